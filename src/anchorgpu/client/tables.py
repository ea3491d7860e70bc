"""Plain-text tables for the terminal (wide characters such as Hangul count twice)."""

from __future__ import annotations

import unicodedata


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int, align: str) -> str:
    gap = " " * (width - _width(text))
    return gap + text if align == ">" else text + gap


def render_table(headers: list[str], rows, *, align: str = "") -> str:
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max([_width(h)] + [_width(r[i]) for r in rows]) for i, h in enumerate(headers)]
    align = align.ljust(len(headers), "<")
    lines = ["  ".join(_pad(h, w, a) for h, w, a in zip(headers, widths, align, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(_pad(c, w, a) for c, w, a in zip(row, widths, align, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def order_lines(lines: list[dict]) -> list[tuple[str, str, str]]:
    return [(line["description"], str(line["quantity"]), line["amount"]) for line in lines]
