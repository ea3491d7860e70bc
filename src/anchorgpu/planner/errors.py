"""The one error the planner raises for input it cannot plan with.

Every check in the planner ends in a ``PlannerInputError`` that names the
field at fault and says what is wrong with it in a sentence a customer can
act on; callers show ``str(error)`` (``field: message``), or ``error.field``
and ``error.message`` apart, instead of a traceback.

Messages a customer meets in the shop (model configs, presets, training
setups) are templates marked with ``gettext_noop`` and their values kept
apart, as every ``DomainError``: the shop renders them in the reader's
language with ``anchorgpu.i18n.message``; ``message`` and ``str()`` are
English (the CLI, logs). Messages only a developer or operator meets may
be plain English sentences.
"""

from __future__ import annotations

from typing import Any

from anchorgpu.messages import DomainError


class PlannerInputError(DomainError):
    """Input the planner cannot work with (a model config, a training setup, an offer)."""

    def __init__(self, field: str, template: str, **params: Any):
        super().__init__(template, **params)
        self.field = field

    @property
    def message(self) -> str:
        return self.render()

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"
