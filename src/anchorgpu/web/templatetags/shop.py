"""Template filters of the shop: catalog data and price lines in the reader's language."""

from __future__ import annotations

from django import template
from django.utils.translation import gettext

from anchorgpu.orders.lines import line_label as _line_label
from anchorgpu.pilotreports.warning_text import warning_text
from anchorgpu.simulations.text import error_text, progress_text

register = template.Library()


@register.filter
def catalog(text):
    """Data the operator enters (a product's name or summary, an option's name, an asset's network name, a
    rate's source) in the active language, where the catalogs carry it; as entered otherwise. The demo's
    values are marked with gettext_noop where they are made (demo.py, payments/demo.py): an operator who adds
    a network or a product adds its words to the catalogs the same way. The stored value stays as entered."""
    return gettext(str(text)) if text else text


@register.filter
def simulation_progress(code):
    """A running simulation's stage code in the active language."""
    return progress_text(code)


@register.filter
def simulation_error(error):
    """A failed simulation's stored reason in the active language (see ``error_text``)."""
    return error_text(error)


@register.filter
def pilot_warning(warning):
    """A warning of a pilot report in the active language (see ``pilotreports.warning_text``)."""
    return warning_text(warning)


@register.filter
def line_label(line):
    """A stored price line (a dict) described in the active language."""
    return _line_label(line)
