"""Every customer template and e-mail writes figures and times through locale_formats, never with its own
format (floatformat, a date pattern, a raw crypto string), so one rule decides how they look in each language.
The operators' admin templates are left to Django's admin."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "anchorgpu"
# Each a way of writing a figure or a time that bypasses anchorgpu.formats.display.
OWN_FORMATS = re.compile(
    r"\|floatformat|\|intcomma|\{% widthratio|\.display_amount|\.display_tolerance|whole_units"
    r"|\|date:(?!['\"]c['\"]|['\"]Y-m-d['\"])"  # only the ISO forms of a <time datetime="..."> attribute
)


def customer_templates() -> list[Path]:
    found = [p for p in SRC.rglob("templates/**/*") if p.suffix in (".html", ".txt")]
    return sorted(p for p in found if "/templates/admin/" not in p.as_posix())


def test_the_check_sees_the_customer_pages_and_emails():
    names = {p.name for p in customer_templates()}
    assert {"_order_live.html", "_quote.html", "_offers.html", "_run_plan.html", "order_placed.txt"} <= names


def test_no_customer_template_formats_a_figure_or_a_time_its_own_way():
    offenders = []
    for path in customer_templates():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in OWN_FORMATS.finditer(line):
                offenders.append(f"{path.relative_to(SRC)}:{number}: {match.group(0)}")
    assert not offenders, "use the locale_formats filters instead:\n" + "\n".join(offenders)
