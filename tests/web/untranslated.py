"""Finding English the catalogs know on a page meant for another language.

From the catalog of a language we take every piece of English it holds (the
msgid split at its placeholders and markup) that the translation does not
keep: the pieces of translated entries whose msgstr says something else, and
every piece of an entry with no translation yet (empty or fuzzy). A page in
that language must show none of them as a whole word sequence."""

from __future__ import annotations

import html
import re
from functools import lru_cache
from pathlib import Path

import polib

import anchorgpu

CATALOGS = Path(anchorgpu.__file__).resolve().parent / "locale"
_SPLIT = re.compile(r"%\([a-z_]+\)[sdf]|%[sdf]|<[^>]+>|\{[^}]*\}|\n")
_WORD = re.compile(r"[A-Za-z][a-z]{2,}")
_STRIP = " .,:;()[]“”\"'’‘—–-…·×/=|!?«»"
# English pieces that are also ordinary words of the language (or the names of things) and may stand on its
# pages in their own right.
_NAMES = {"Data"}  # as in "Distributed Data Parallel"
SAME_IN: dict[str, set[str]] = {"fr": _NAMES | {"Transaction"}, "pt": _NAMES, "ko": _NAMES}


def _entry_texts(entry: polib.POEntry) -> list[str]:
    return [entry.msgid] + ([entry.msgid_plural] if entry.msgid_plural else [])


def _translations(entry: polib.POEntry) -> list[str]:
    return list(entry.msgstr_plural.values()) if entry.msgid_plural else [entry.msgstr]


def pieces_of(text: str) -> list[str]:
    """The runs of words of ``text`` between its placeholders and markup, worth looking for on a page: two
    words or more, a capitalised word (a label), or a word beside a placeholder ("%(n)s cards"). A lone
    lowercase msgid ("amount", "code") is a field name that also turns up in addresses and identifiers."""
    parts = _SPLIT.split(text)
    found = []
    for piece in parts:
        piece = " ".join(piece.split()).strip(_STRIP)
        words = _WORD.findall(piece)
        if len(piece) < 4 or not words:
            continue
        if len(piece.split()) >= 2 or piece[0].isupper() or len(parts) > 1:
            found.append(piece)
    return found


@lru_cache(maxsize=None)
def english_pieces(code: str, catalogs: Path = CATALOGS) -> dict[str, str]:
    """piece -> the msgid it comes from, for the catalog of ``code``."""
    catalog = polib.pofile(str(catalogs / code / "LC_MESSAGES" / "django.po"))
    pieces: dict[str, str] = {}
    for entry in catalog:
        if entry.obsolete:
            continue
        untranslated = not entry.translated() or "fuzzy" in entry.flags
        targets = " ".join(_translations(entry))
        for text in _entry_texts(entry):
            for piece in pieces_of(text):
                if piece in SAME_IN.get(code, ()):
                    continue
                if untranslated or piece not in targets:
                    pieces.setdefault(piece, entry.msgid)
    return pieces


_SKIPPED = re.compile(r"<(script|style|svg|pre|code|kbd|samp|cite)\b.*?</\1\s*>", re.S | re.I)
_ENGLISH_MARKED = re.compile(r"<(\w+)[^>]*\blang=\"en\"[^>]*>.*?</\1\s*>", re.S)
_ADDRESS = re.compile(r"(?:https?://|/(?=[a-z]{2}/))\S*")  # links in e-mails: the path is no prose
_ATTRIBUTES = re.compile(r"\b(?:placeholder|title|aria-label|alt)=\"([^\"]*)\"")


def visible_text(page: str) -> str:
    """What a reader sees of an HTML page (and the attributes a screen reader says), code blocks aside:
    commands and identifiers are the same in every language, and a cited work keeps its title. Elements marked
    lang="en" are English on purpose."""
    page = _SKIPPED.sub(" ", page)
    page = _ENGLISH_MARKED.sub(" ", page)
    attributes = " | ".join(_ATTRIBUTES.findall(page))
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page) + " | " + attributes).split())


def english_left(text: str, code: str, catalogs: Path = CATALOGS) -> list[tuple[str, str]]:
    """(piece, msgid) for each piece of the catalog's English found in ``text`` as whole words."""
    text = " ".join(_ADDRESS.sub(" ", text).split())
    left = []
    for piece, msgid in english_pieces(code, catalogs).items():
        if piece in text and re.search(r"(?<![\w])" + re.escape(piece) + r"(?![\w])", text):
            left.append((piece, msgid))
    # A short piece inside a longer one found too says nothing more.
    longer = [p for p, _m in left]
    return sorted((p, m) for p, m in left if not any(p != q and p in q for q in longer))


# English words that neither Portuguese nor French nor Korean uses (so not "on", "an", "or", "do", "no", "as").
_ENGLISH_GLUE = {"the", "your", "with", "and", "of", "to", "is", "for", "from", "this", "that", "are", "you", "we",
                 "our", "be", "it", "at", "by", "not", "has", "have", "was", "will", "can", "when", "which", "its",
                 "in", "been", "were", "there", "their", "they"}
_RUN = re.compile(r"(?:\b[A-Za-z]+\b[ ,]+){2,}\b[A-Za-z]+\b")


def english_prose(text: str) -> list[str]:
    """Runs of three or more Latin words of which two are English glue words: English the catalogs do not
    know (a sentence written into a template or a view without gettext)."""
    text = _ADDRESS.sub(" ", text)
    return sorted({run.group(0) for run in _RUN.finditer(text)
                   if sum(word.lower() in _ENGLISH_GLUE for word in re.findall(r"[A-Za-z]+", run.group(0))) >= 2})
