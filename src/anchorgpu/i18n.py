"""Showing domain messages in the reader's language."""

from __future__ import annotations

from django.utils.translation import gettext

from .messages import DomainError


def message(error: Exception) -> str:
    """The error's message in the active language (domain errors carry their
    untranslated template; anything else is shown as it is)."""
    if isinstance(error, DomainError):
        return error.render(gettext)
    return str(error)
