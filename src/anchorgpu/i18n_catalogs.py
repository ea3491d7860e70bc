"""Compiling the translation catalogs (``locale/<lang>/LC_MESSAGES/django.po``
to ``.mo``) in pure Python with polib, so a fresh machine needs no GNU gettext
to run the shop. Extracting strings (``anchorgpu makemessages``) still needs
gettext's xgettext, as it does in Django."""

from __future__ import annotations

from pathlib import Path

import polib

LOCALE_DIR = Path(__file__).resolve().parent / "locale"


class CatalogError(ValueError):
    pass


def catalogs(locale_dir: Path = LOCALE_DIR) -> list[Path]:
    return sorted(locale_dir.glob("*/LC_MESSAGES/django.po"))


def compile_catalogs(locale_dir: Path = LOCALE_DIR, *, only_stale: bool = False) -> list[Path]:
    """Write each catalog's ``.mo`` beside it; returns the ones written.
    Fuzzy entries are left out, as msgfmt does."""
    written = []
    for po_path in catalogs(locale_dir):
        mo_path = po_path.with_suffix(".mo")
        if only_stale and mo_path.exists() and mo_path.stat().st_mtime >= po_path.stat().st_mtime:
            continue
        try:
            catalog = polib.pofile(str(po_path))
        except (OSError, ValueError) as exc:
            raise CatalogError(f"{po_path}: {exc}") from None
        catalog.save_as_mofile(str(mo_path))
        written.append(mo_path)
    return written
