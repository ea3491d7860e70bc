"""The one error the planner raises for input it cannot plan with.

Every check in the planner ends in a ``PlannerInputError`` that names the
field at fault and says what is wrong with it in a sentence a customer can
act on; callers show ``str(error)`` (or ``error.field`` and
``error.message`` apart) instead of a traceback.

The messages are English only for now. They are deliberately not marked
for translation here: the shop's catalogs are kept complete by a test, and
the strings join them when the planner gets its web page.
"""

from __future__ import annotations


class PlannerInputError(ValueError):
    """Input the planner cannot work with (a model config, a training setup, an offer)."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")
