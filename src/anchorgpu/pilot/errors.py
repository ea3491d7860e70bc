"""The error the pilot kit raises for input it cannot run with: a sentence for the customer, no traceback."""

from __future__ import annotations


class PilotInputError(ValueError):
    """A model, data file or option the pilot cannot use; ``str()`` says what and why."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")
