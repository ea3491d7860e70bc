"""Numbers, money, crypto amounts and times as the customer's language writes them.

One way for every page, email and PDF: Django's locale formats (``anchorgpu.formats.<lang>`` where we
override them, Django's own otherwise) give the decimal and thousands separators and the date patterns;
this module decides the rest, the same everywhere:

- fiat money is the number in the locale, then the ISO code: "91,250.00 USD" (en), "91.250,00 USD" (pt),
  "91 250,00 USD" (fr), "91,250.00 USD" (ko); negative amounts "-24,28 USD"; rounded half up, for display only;
- crypto amounts are exact: integer base units written with the asset's quoted precision (BTC 8, ETH 6, USDC
  2 places), more places only where the amount has them, never fewer, so nothing shown differs from what is owed;
  ``wallet_amount`` gives the same amount as wallets want it pasted (a dot, no grouping);
- times are shown in UTC and say so.

Money is Decimal or int; a float (a throughput, a size in GB) is accepted only where no money is meant.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext

from django.utils import translation
from django.utils.formats import date_format, number_format

# How a percentage is written, per language (CLDR): French puts a no-break space before the sign.
_PERCENT = {"fr": "{}\u00a0%"}


def as_decimal(value) -> Decimal:
    """A number as Decimal: exact for Decimal, int and numeric text; a float by its shortest repr."""
    if isinstance(value, bool):
        raise TypeError("a truth value is not a number")
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, float):
        number = Decimal(repr(value))
    else:
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            raise ValueError(f"not a number: {value!r}") from None
    if not number.is_finite():
        raise ValueError(f"not a finite number: {value!r}")
    return number


def _grouped(value: Decimal, places: int) -> str:
    """``value`` rounded half up to ``places`` and written with the active language's separators."""
    with localcontext() as ctx:
        ctx.prec = 80  # large figures and 18-decimal tokens stay exact
        rounded = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    if rounded == 0:
        rounded = abs(rounded)  # no "-0.00"
    return number_format(rounded, decimal_pos=places, use_l10n=True, force_grouping=True)


def number(value, places: int = 0) -> str:
    """A plain figure (tokens/s, GB, a count) with ``places`` decimals: 1057.3 -> "1,057" (en), "1.057" (pt)."""
    return _grouped(as_decimal(value), places)


def money(value, currency: str = "", places: int = 2) -> str:
    """Fiat money: "91.250,00 USD" in pt. ``places`` 2 for totals and line amounts."""
    if isinstance(value, float):
        raise TypeError("money is Decimal, never float")
    text = _grouped(as_decimal(value), places)
    return f"{text} {currency}".strip()


def unit_price(value, currency: str = "", max_places: int = 4) -> str:
    """A unit price or a cost per unit (per card-hour, per million tokens): at least cents, up to
    ``max_places`` decimals where the figure has them ("3,4416 USD" in pt)."""
    amount = as_decimal(value)
    exponent = amount.normalize().as_tuple().exponent
    places = min(max(2, -exponent if isinstance(exponent, int) else 2), max_places)
    return money(amount, currency, places)


def line_unit_price(kind: str, value, currency: str = "") -> str:
    """The unit price of a price line: a rate per card-hour keeps up to four decimals, while a discount
    (one line, quantity one) is money like its amount."""
    return money(value, currency) if kind == "discount" else unit_price(value, currency)


def percent(value, places: int = 0) -> str:
    """A value already in percent (12.5 means 12.5 %): "12.5%" (en), "12,5%" (pt), "12,5 %" (fr)."""
    language = (translation.get_language() or "en").split("-")[0]
    return _PERCENT.get(language, "{}%").format(number(value, places))


def _coins(units: int, decimals: int) -> Decimal:
    if isinstance(units, bool) or not isinstance(units, int):
        raise TypeError("crypto amounts are integer base units")
    with localcontext() as ctx:
        ctx.prec = 80  # Decimal's default 28 digits would round a large wei amount
        return Decimal(units).scaleb(-decimals)


def crypto_places(units: int, decimals: int, places: int | None = None) -> int:
    """Decimals to show: the quoted precision, or more where ``units`` would otherwise lose a digit."""
    shown = decimals if places is None else min(places, decimals)
    while shown < decimals and units % 10 ** (decimals - shown):
        shown += 1
    return shown


def crypto(units: int, decimals: int, places: int | None = None, symbol: str = "") -> str:
    """Exact base units in whole coins with the locale's separators: 505469 sat -> "0,00505469 BTC" (pt);
    3120 USDC cents at 2 places -> "31,20 USDC". Never rounded: the shown amount is the amount owed."""
    coins = _coins(units, decimals)
    shown = crypto_places(units, decimals, places)
    with localcontext() as ctx:
        ctx.prec = 80
        exact = coins.quantize(Decimal(1).scaleb(-shown))  # exact: only trailing zeros are added
    text = number_format(exact, decimal_pos=shown, use_l10n=True, force_grouping=True)
    return f"{text} {symbol}".strip()


def wallet_amount(units: int, decimals: int, places: int | None = None) -> str:
    """The same exact amount as a wallet wants it typed or pasted: a dot, no grouping: "0.00505469"."""
    coins = _coins(units, decimals)
    shown = crypto_places(units, decimals, places)
    with localcontext() as ctx:
        ctx.prec = 80
        return format(coins.quantize(Decimal(1).scaleb(-shown)), "f")


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("times are aware (UTC)")
    return moment.astimezone(UTC)


def moment_value(moment: datetime) -> str:
    """Date and time in the locale's short form, in UTC, for a sentence that names the zone itself."""
    return date_format(_utc(moment), "SHORT_DATETIME_FORMAT", use_l10n=True)


def moment(moment: datetime) -> str:
    """Date and time in the locale's short form with the zone stated: "02/12/2026 18:51 UTC" (pt)."""
    return f"{moment_value(moment)} UTC"


def day(moment: datetime | date) -> str:
    """A date in the locale's long form (a time's date in UTC): "2 de dezembro de 2026" (pt)."""
    if not isinstance(moment, datetime):
        return date_format(moment, "DATE_FORMAT", use_l10n=True)
    return date_format(_utc(moment), "DATE_FORMAT", use_l10n=True)
