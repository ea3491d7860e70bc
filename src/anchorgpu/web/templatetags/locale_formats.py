"""Template filters that write numbers, money, crypto amounts and times in the reader's language.

Every customer page and email uses these (``{% load locale_formats %}``) rather than ``floatformat`` or
``date``, so one rule decides how a figure looks (``anchorgpu.formats.display``):

    {{ order.fiat_total|money:order.currency }}      91.250,00 USD
    {{ line.unit_price|unit_price }}                 3,4416
    {{ row.tokens_per_s|num }}  {{ gb|num:1 }}       1.057   80,5
    {{ diff|percent:1 }}  {{ 0.125|share:1 }}        12,5%   (fr: 12,5 %)
    {{ summary.peak_memory_bytes|gib }}              80,5  (GiB, 2**30 bytes)
    {{ quote.amount|crypto:quote.asset }}            0,00505469 BTC
    {{ quote.amount|crypto_number:quote.asset }}     0,00505469
    {{ quote.amount|wallet_amount:quote.asset }}     0.00505469  (what a wallet wants pasted)
    {{ quote.expires_at|moment }}                    02/12/2026 18:51 UTC
    {{ quote.expires_at|moment_value }}              02/12/2026 18:51   (in a sentence that says UTC)

An empty value (None, "") gives "" so a template can still write ``|default:"—"``; a value that is not a
number is shown as it is (a page never fails on a figure), and a test catches it.
"""

from __future__ import annotations

import functools
import logging

from django import template

from anchorgpu.formats import display

log = logging.getLogger(__name__)


register = template.Library()


def _filter(func):
    """Registers ``func`` as a filter that shows a value it cannot format as given (logged), never a 500."""
    @functools.wraps(func)
    def soft(value, *args):
        try:
            return func(value, *args)
        except (TypeError, ValueError, ArithmeticError):
            log.warning("locale_formats.%s could not format %r", func.__name__, value)
            return "" if value is None else str(value)
    return register.filter(func.__name__, soft)


def _empty(value) -> bool:
    return value is None or value == ""


def _places(arg, default: int) -> int:
    try:
        return int(arg)
    except (TypeError, ValueError):
        return default


@_filter
def money(value, currency=""):
    """Fiat money with cents and the currency's code."""
    return "" if _empty(value) else display.money(value, currency or "")


@_filter
def unit_price(value, currency=""):
    """A unit price or a cost per unit: cents, up to four decimals where the figure has them."""
    return "" if _empty(value) else display.unit_price(value, currency or "")


@_filter
def line_unit_price(line, currency=""):
    """A price line's unit price (``display.line_unit_price``): ``line`` is the line, a dict or an object."""
    kind = line.get("kind", "") if isinstance(line, dict) else getattr(line, "kind", "")
    value = line.get("unit_price") if isinstance(line, dict) else getattr(line, "unit_price", None)
    return "" if _empty(value) else display.line_unit_price(kind, value, currency or "")


@_filter
def num(value, places=0):
    """A plain figure with the locale's grouping and ``places`` decimals."""
    return "" if _empty(value) else display.number(value, _places(places, 0))


@_filter
def percent(value, places=0):
    """A value in percent, with the locale's sign spacing."""
    return "" if _empty(value) else display.percent(value, _places(places, 0))


@_filter
def share(value, places=0):
    """A fraction as a percentage: 0.125 -> "12.5%" with one place."""
    return "" if _empty(value) else display.percent(display.as_decimal(value) * 100, _places(places, 0))


@_filter
def gib(value, places=1):
    """A size in bytes as GiB (2**30 bytes) with ``places`` decimals."""
    return "" if _empty(value) else display.number(display.as_decimal(value) / 2**30, _places(places, 1))


def _asset_parts(asset) -> tuple[int, int | None, str]:
    """(decimals, quoted places, symbol) of an Asset, or of an invoice's record of one."""
    decimals = int(asset.decimals)
    places = getattr(asset, "quoted_places", None)
    return decimals, places, getattr(asset, "symbol", "") or getattr(asset, "asset_symbol", "")


@_filter
def crypto(units, asset):
    """Exact base units of ``asset`` in whole coins, at its quoted precision, with its symbol."""
    if _empty(units) or asset is None:
        return ""
    decimals, places, symbol = _asset_parts(asset)
    return display.crypto(int(units), decimals, places, symbol)


@_filter
def crypto_number(units, asset):
    """The same as ``crypto`` without the symbol, for a sentence that writes the symbol itself."""
    if _empty(units) or asset is None:
        return ""
    decimals, places, _symbol = _asset_parts(asset)
    return display.crypto(int(units), decimals, places)


@_filter
def wallet_amount(units, asset):
    """The same amount with a dot and no grouping, as wallets expect it pasted."""
    if _empty(units) or asset is None:
        return ""
    decimals, places, _symbol = _asset_parts(asset)
    return display.wallet_amount(int(units), decimals, places)


@_filter
def moment(value):
    """Date and time in the locale, in UTC, with "UTC" written after it."""
    return "" if _empty(value) else display.moment(value)


@_filter
def moment_value(value):
    """Date and time in the locale, in UTC, for a sentence whose words already name the zone."""
    return "" if _empty(value) else display.moment_value(value)


@_filter
def day(value):
    """A date in the locale's long form."""
    return "" if _empty(value) else display.day(value)
