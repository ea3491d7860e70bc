"""The shop reads fully in Portuguese, French and Korean: every string the
code and templates mark is in each catalog, translated, with the same
placeholders. A new string left untranslated fails here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polib
import pytest

import anchorgpu

PACKAGE = Path(anchorgpu.__file__).resolve().parent
LANGUAGES = ("pt", "fr", "ko")
_PLACEHOLDER = re.compile(r"%\([a-z_]+\)[sd]|%[sd]")
_HANGUL = re.compile(r"[\uac00-\ud7a3]")


def _catalog(code: str) -> polib.POFile:
    return polib.pofile(str(PACKAGE / "locale" / code / "LC_MESSAGES" / "django.po"))


@pytest.mark.parametrize("code", LANGUAGES)
def test_every_string_is_translated(code):
    catalog = _catalog(code)
    missing = [e.msgid for e in catalog.untranslated_entries()]
    fuzzy = [e.msgid for e in catalog.fuzzy_entries()]
    assert not missing, f"{len(missing)} untranslated in {code}, e.g. {missing[:5]}"
    assert not fuzzy, f"{len(fuzzy)} fuzzy in {code}, e.g. {fuzzy[:5]}"


@pytest.mark.parametrize("code", LANGUAGES)
def test_translations_keep_their_placeholders(code):
    wrong = []
    for entry in _catalog(code).translated_entries():
        wanted = sorted(_PLACEHOLDER.findall(entry.msgid))
        targets = list(entry.msgstr_plural.values()) if entry.msgid_plural else [entry.msgstr]
        for text in targets:
            found = sorted(_PLACEHOLDER.findall(text))
            # A plural form may leave out the count (e.g. Korean, or "one card").
            if found != wanted and not (entry.msgid_plural and set(found) <= set(
                    _PLACEHOLDER.findall(entry.msgid_plural) + wanted)):
                wrong.append((entry.msgid, text))
    assert not wrong, wrong[:5]


def test_korean_is_written_in_hangul():
    def prose(text: str) -> bool:  # two or more plain English words, not just names and versions
        return len(re.findall(r"\b[a-z]{4,}\b", _PLACEHOLDER.sub("", text))) >= 2

    latin_only = [e.msgid for e in _catalog("ko").translated_entries()
                  if prose(e.msgid) and not _HANGUL.search(e.msgstr or e.msgstr_plural.get(0, ""))]
    assert not latin_only, latin_only[:10]


def test_catalogs_hold_every_string_of_the_source(tmp_path):
    """Extract the strings again from a copy of the package and compare."""
    if not shutil.which("xgettext"):
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("xgettext (GNU gettext) is needed under CI to check the catalogs")
        pytest.skip("xgettext (GNU gettext) is not installed")
    copy = tmp_path / "anchorgpu"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.mo"))
    (tmp_path / "extract_settings.py").write_text(
        "from anchorgpu.settings import *  # noqa\n"
        f"LOCALE_PATHS = [{str(copy / 'locale')!r}]\n")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "extract_settings",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run([sys.executable, "-m", "django", "makemessages", "-l", "pt", "--no-obsolete",
                           "-e", "html,txt,py"], cwd=copy, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    fresh = {(e.msgctxt, e.msgid) for e in polib.pofile(str(copy / "locale/pt/LC_MESSAGES/django.po"))}
    for code in LANGUAGES:
        committed = {(e.msgctxt, e.msgid) for e in _catalog(code)}
        new = sorted(m for _c, m in fresh - committed)
        gone = sorted(m for _c, m in committed - fresh)
        assert not new, f"strings missing from the {code} catalog (run makemessages and translate): {new[:10]}"
        assert not gone, f"strings in the {code} catalog that the code no longer uses: {gone[:10]}"
