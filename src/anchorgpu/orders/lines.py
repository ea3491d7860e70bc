"""Price lines in the reader's language. An order keeps its lines as data
(kind, quantity, prices and the facts that describe them); the words are
made when the lines are shown, in the language of whoever reads them."""

from __future__ import annotations

from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext as _

from anchorgpu.formats.display import as_decimal
from anchorgpu.formats.display import number as display_number


def _figure(value) -> str:
    """A stored figure ("5", "12.5") with the reader's decimal separator, as many places as it has."""
    number = as_decimal(value).normalize()
    return display_number(number, max(0, -number.as_tuple().exponent))


def line_label(line: dict) -> str:
    params = line.get("params") or {}
    kind = line.get("kind")
    if kind == "cards" and params:
        cards, hours = int(params["cards"]), int(params["hours"])
        return ngettext("%(product)s: %(cards)d card × %(hours)d h", "%(product)s: %(cards)d cards × %(hours)d h",
                        cards) % {"product": gettext(str(params["product"])), "cards": cards, "hours": hours}
    if kind == "discount" and params:
        return _("%(days)d-day term discount (%(percent)s %%)") % {"days": int(params["days"]),
                                                                   "percent": _figure(params["percent"])}
    if kind == "option" and params:
        return gettext(str(params["option"]))  # catalog data: translated where the catalog carries it
    return line.get("description", "")


def invoice_line_label(item, order_lines: list[dict]) -> str:
    """An invoice line in the active language: made again from the order's line of the same position and
    kind (the order keeps its lines as data), else the words stored when the invoice was issued."""
    position = getattr(item, "position", 0)
    if 0 < position <= len(order_lines or ()):
        line = order_lines[position - 1]
        if line.get("kind") == item.kind and line.get("params"):
            return line_label(line)
    return item.description
