"""Messages the domain core raises, translatable without importing Django.

The pure modules mark their messages with ``gettext_noop`` (a no-op here,
and a keyword the catalog extractor knows) and raise a ``DomainError`` that
keeps the untranslated template and its parameters apart. Whoever shows the
message to a person renders it with their translation function
(``anchorgpu.i18n.message``); logs and ``str()`` get the English text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def gettext_noop(text: str) -> str:
    """Marks ``text`` for the translation catalogs; returns it unchanged."""
    return text


class DomainError(ValueError):
    def __init__(self, template: str, **params: Any):
        self.template = template
        self.params = params
        super().__init__(template % params if params else template)

    def render(self, translate: Callable[[str], str] = str) -> str:
        text = translate(self.template)
        return text % self.params if self.params else text
