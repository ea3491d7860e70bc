"""Read a guide in one language: front matter, Markdown body, links into the shop.

A guide lives in ``content/<lang>/<slug>.md``. The file opens with a front
matter block between two ``---`` lines::

    ---
    title: Choosing a GPU for fine-tuning
    summary: One sentence for the guides index.
    updated: 2026-11-30
    sources:
    - NVIDIA H100 product page | https://www.nvidia.com/en-us/data-center/h100/
    ---

The body links into the shop with placeholders, ``[the catalog]({catalog})``;
they become URLs in the guide's language. A page that is not built yet
(planner, pilot kit) points at the guide's own ``#coming`` section, which is
written between ``<!-- coming -->`` and ``<!-- /coming -->``, with one block
per page inside (``<!-- coming:planner -->`` … ``<!-- /coming:planner -->``).
Once every page exists, the section disappears by itself.
There is no fallback language: a missing translation is an error.
"""

from __future__ import annotations

import html as htmllib
import re
from dataclasses import dataclass
from datetime import date
from functools import cache, lru_cache
from pathlib import Path

import markdown
from django.urls import NoReverseMatch, reverse
from django.utils import translation
from markdown.extensions.toc import slugify_unicode

CONTENT_DIR = Path(__file__).resolve().parent / "content"
LANGUAGES = ("en", "pt", "fr", "ko")
SLUGS = ("choosing-a-gpu", "blackwell-lots")  # the order of the guides index
LINKS = ("catalog", "planner", "pilot", "terms")  # placeholder name = URL name
PENDING_ANCHOR = "#coming"
EXTENSIONS = ["tables", "attr_list", "fenced_code", "sane_lists", "toc"]
EXTENSION_CONFIGS = {"toc": {"slugify": slugify_unicode, "toc_depth": "2"}}

_PLACEHOLDER = re.compile(r"(?<=\]\()\{([a-z_]+)\}")  # only as a link target: ](…)
_COMING = re.compile(r"<!-- coming -->\n(.*?)<!-- /coming -->\n?", re.S)
_COMING_PART = re.compile(r"<!-- coming:([a-z_]+) -->\n(.*?)<!-- /coming:\1 -->\n?", re.S)


class GuideError(LookupError):
    """A guide file is missing or malformed."""


@dataclass(frozen=True)
class Source:
    name: str
    url: str


@dataclass(frozen=True)
class Guide:
    slug: str
    lang: str
    title: str
    summary: str
    updated: date
    sources: tuple[Source, ...]
    html: str
    toc: tuple[tuple[str, str], ...]  # (anchor id, heading text) of each ## section


@dataclass(frozen=True)
class _Raw:
    title: str
    summary: str
    updated: date
    sources: tuple[Source, ...]
    body: str


def guide_path(slug: str, lang: str) -> Path:
    if slug not in SLUGS or lang not in LANGUAGES:
        raise GuideError(f"No guide {slug!r} in {lang!r}.")
    return CONTENT_DIR / lang / f"{slug}.md"


def parse(text: str, *, origin: str = "guide") -> _Raw:
    """Split a guide file into its front matter fields and its Markdown body."""
    lines = text.lstrip("\ufeff").split("\n")
    if lines[0].strip() != "---" or "---" not in (line.strip() for line in lines[1:]):
        raise GuideError(f"{origin}: the file must open with a front matter block between '---' lines.")
    end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "---")
    fields: dict[str, str] = {}
    sources: list[Source] = []
    for line in lines[1:end]:
        if not line.strip():
            continue
        if line.startswith("- "):
            name, _, url = line[2:].rpartition("|")
            name, url = name.strip(), url.strip()
            if not name or not url.startswith("https://") or " " in url:
                raise GuideError(f"{origin}: a source must read '- Name | https://…', not {line!r}.")
            sources.append(Source(name, url))
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise GuideError(f"{origin}: cannot read front matter line {line!r}.")
        fields[key.strip()] = value.strip()
    missing = {"title", "summary", "updated"} - {k for k, v in fields.items() if v}
    if missing or not sources:
        raise GuideError(f"{origin}: front matter lacks {', '.join(sorted(missing)) or 'sources'}.")
    try:
        updated = date.fromisoformat(fields["updated"])
    except ValueError as exc:
        raise GuideError(f"{origin}: 'updated' must be a date like 2026-11-30.") from exc
    return _Raw(fields["title"], fields["summary"], updated, tuple(sources), "\n".join(lines[end + 1:]).strip() + "\n")


@cache
def _read(slug: str, lang: str) -> _Raw:
    path = guide_path(slug, lang)
    if not path.is_file():
        raise GuideError(f"The guide {slug!r} has no {lang!r} version ({path}); every language must exist.")
    return parse(path.read_text(encoding="utf-8"), origin=f"{lang}/{slug}.md")


def link_targets(lang: str) -> dict[str, str]:
    """The URL of each placeholder in this language; pages not built yet point at the guide's #coming."""
    targets = {}
    with translation.override(lang):
        for name in LINKS:
            try:
                targets[name] = reverse(name)
            except NoReverseMatch:
                targets[name] = PENDING_ANCHOR
    return targets


def _resolve(body: str, targets: dict[str, str], *, origin: str) -> str:
    pending = {name for name, url in targets.items() if url == PENDING_ANCHOR}

    def section(match: re.Match) -> str:
        if not pending:
            return ""
        return _COMING_PART.sub(lambda part: part.group(2) if part.group(1) in pending else "", match.group(1))

    body = _COMING.sub(section, body)

    def link(match: re.Match) -> str:
        if match.group(1) not in targets:
            raise GuideError(f"{origin}: unknown link placeholder {match.group(0)!r}.")
        return targets[match.group(1)]

    return _PLACEHOLDER.sub(link, body)


def load(slug: str, lang: str) -> Guide:
    """The guide ``slug`` in ``lang``, rendered, with its links in that language."""
    return _render(slug, lang, tuple(sorted(link_targets(lang).items())))


@lru_cache(maxsize=64)
def _render(slug: str, lang: str, targets: tuple[tuple[str, str], ...]) -> Guide:
    raw = _read(slug, lang)
    body = _resolve(raw.body, dict(targets), origin=f"{lang}/{slug}.md")
    md = markdown.Markdown(extensions=EXTENSIONS, extension_configs=EXTENSION_CONFIGS, output_format="html")
    html = md.convert(body)
    toc = tuple((token["id"], htmllib.unescape(token["name"])) for token in md.toc_tokens)
    return Guide(slug=slug, lang=lang, title=raw.title, summary=raw.summary, updated=raw.updated,
                 sources=raw.sources, html=html, toc=toc)


def load_all(lang: str) -> list[Guide]:
    return [load(slug, lang) for slug in SLUGS]
