"""Pricing: a pure function from a price list and a request to line items.

All amounts are ``Decimal`` in the price list's currency. Line amounts are
exact (no rounding); the total is rounded once, at the end, half up to the
currency's minor unit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from anchorgpu.messages import gettext_noop

from .rules import RuleError, check_quantity, check_term

HOURS_PER_DAY = 24
# ISO 4217 currencies whose minor unit is not a hundredth; all others use 0.01.
_MINOR_UNIT_EXPONENT = {"JPY": 0, "KRW": 0, "CLP": 0, "ISK": 0, "VND": 0, "HUF": 2,
                        "BHD": 3, "KWD": 3, "OMR": 3, "JOD": 3, "TND": 3, "IQD": 3, "LYD": 3}


def minor_unit(currency: str) -> Decimal:
    """The smallest amount of ``currency`` a total is rounded to."""
    return Decimal(1).scaleb(-_MINOR_UNIT_EXPONENT.get(currency.upper(), 2))


@dataclass(frozen=True)
class OptionPrice:
    slug: str
    name: str
    price_per_term: Mapping[int, Decimal]  # term days -> price
    per_unit: bool = False  # multiplied by the order's units, else once per order


@dataclass(frozen=True)
class PriceList:
    currency: str
    rate_per_card_hour: Mapping[str, Decimal]  # product slug -> rate
    term_discount_percent: Mapping[int, Decimal]  # term days -> percent off the cards line
    options: Mapping[str, OptionPrice] = field(default_factory=dict)
    minor_unit: Decimal = Decimal("0.01")


@dataclass(frozen=True)
class Line:
    kind: str  # "cards", "discount" or "option"
    description: str
    quantity: int
    unit_price: Decimal
    amount: Decimal
    # What a reader's language needs to describe the line (``description`` is English).
    params: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Price:
    currency: str
    lines: tuple[Line, ...]
    total: Decimal

    @property
    def subtotal_exact(self) -> Decimal:
        return sum((line.amount for line in self.lines), Decimal(0))


def option_line(option: OptionPrice, *, quantity: int, term_days: int) -> Line | None:
    """The line ``option`` adds to an order of ``quantity`` units for ``term_days`` (None: not offered for that
    term): its price for the term, once per unit or once per order."""
    each = option.price_per_term.get(term_days)
    if each is None:
        return None
    count = quantity if option.per_unit else 1
    return Line("option", option.name, count, each, each * count, {"option": option.name})


def option_lines(prices: PriceList, *, quantity: int, term_days: int) -> tuple[tuple[str, Line], ...]:
    """Every option of the price list offered for ``term_days``, by slug, with what it would add."""
    found = ((slug, option_line(option, quantity=quantity, term_days=term_days))
             for slug, option in prices.options.items())
    return tuple((slug, line) for slug, line in found if line is not None)


def price(
    prices: PriceList,
    *,
    product: str,
    product_name: str,
    cards_per_unit: int,
    quantity: int,
    term_days: int,
    options: Sequence[str] = (),
) -> Price:
    check_quantity(quantity)
    check_term(term_days)
    try:
        rate = prices.rate_per_card_hour[product]
    except KeyError:
        raise RuleError(gettext_noop("%(product)s has no price in the current price list."),
                        product=product_name) from None
    cards = quantity * cards_per_unit
    hours = term_days * HOURS_PER_DAY
    cards_amount = rate * cards * hours
    lines = [Line("cards", f"{product_name}: {cards} card(s) × {hours} h", cards * hours, rate, cards_amount,
                  {"product": product_name, "cards": cards, "hours": hours})]
    percent = prices.term_discount_percent.get(term_days, Decimal(0))
    if percent:
        lines.append(Line("discount", f"{term_days}-day term discount ({percent.normalize():f} %)", 1,
                          -cards_amount * percent / 100, -cards_amount * percent / 100,
                          {"days": term_days, "percent": f"{percent.normalize():f}"}))
    seen: set[str] = set()
    for slug in options:
        if slug in seen:
            raise RuleError(gettext_noop("The option “%(option)s” is listed twice."), option=slug)
        seen.add(slug)
        option = prices.options.get(slug)
        if option is None:
            raise RuleError(gettext_noop("Unknown option “%(option)s”."), option=slug)
        if term_days not in option.price_per_term:
            raise RuleError(gettext_noop("The option “%(option)s” is not offered for a %(days)d-day term."),
                            option=option.name, days=term_days)
        lines.append(option_line(option, quantity=quantity, term_days=term_days))
    total = sum((line.amount for line in lines), Decimal(0)).quantize(prices.minor_unit, rounding=ROUND_HALF_UP)
    return Price(prices.currency, tuple(lines), total)
