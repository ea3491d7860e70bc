"""Template filters of the shop: catalog data and price lines in the reader's language."""

from __future__ import annotations

from django import template
from django.utils.translation import gettext

from anchorgpu.orders.lines import line_label as _line_label

register = template.Library()


@register.filter
def catalog(text):
    """Catalog data (a product summary, an option's name) in the active
    language, where the catalogs carry it; as entered otherwise."""
    return gettext(str(text)) if text else text


@register.filter
def line_label(line):
    """A stored price line (a dict) described in the active language."""
    return _line_label(line)
