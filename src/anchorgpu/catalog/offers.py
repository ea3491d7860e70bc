"""The live catalog: per product, units free now, earliest start and prices.

A selector: reads the catalog, the price list and the bookings, computes
with the pure domain functions, writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from anchorgpu.allocation.selectors import Availability, availability

from . import pricing
from .models import Environment, Product
from .rules import TERM_DAYS, RuleError, Stack, check_environment
from .selectors import NoPriceList, price_list_current, products_on_sale


@dataclass(frozen=True)
class Offer:
    product: Product
    term_days: int
    quantity: int
    units_total: int
    units_free_now: int
    earliest_start: datetime | None
    prices: dict[int, pricing.Price]  # term days -> price of `quantity` units for that term
    starts_now: bool

    @property
    def stack_label(self) -> str:
        return Stack(self.product.stack).label

    @property
    def currency(self) -> str:
        return next(iter(self.prices.values())).currency if self.prices else ""

    @property
    def term_prices(self) -> list[tuple[int, pricing.Price | None]]:
        return [(days, self.prices.get(days)) for days in TERM_DAYS]

    @property
    def price_for_term(self) -> pricing.Price | None:
        return self.prices.get(self.term_days)


def _current_prices(now: datetime) -> pricing.PriceList | None:
    try:
        return price_list_current(at=now)
    except NoPriceList:
        return None  # the catalog still shows availability; prices show as not set


def _prices(prices: pricing.PriceList | None, product: Product, quantity: int,
            options: Sequence[str] = ()) -> dict[int, pricing.Price]:
    out: dict[int, pricing.Price] = {}
    if prices is None:
        return out
    for days in TERM_DAYS:
        if product.slug not in prices.rate_per_card_hour:
            continue
        try:
            out[days] = pricing.price(prices, product=product.slug, product_name=product.name,
                                      cards_per_unit=product.cards_per_unit, quantity=quantity, term_days=days,
                                      options=options)
        except RuleError:
            continue  # e.g. an option not priced for this term: the term is not offered with it
    return out


def _offer(product: Product, found: Availability, *, term_days: int, quantity: int, now: datetime,
           prices: pricing.PriceList | None, options: Sequence[str] = ()) -> Offer:
    return Offer(product=product, term_days=term_days, quantity=quantity, units_total=found.units_total,
                 units_free_now=found.units_free_now, earliest_start=found.earliest_start,
                 prices=_prices(prices, product, quantity, options),
                 starts_now=found.earliest_start is not None and found.earliest_start <= now)


def offer_for(product: Product, *, term_days: int, quantity: int, not_before: datetime | None = None,
              now: datetime | None = None, prices: pricing.PriceList | None = None,
              options: Sequence[str] = ()) -> Offer:
    now = (now or timezone.now()).replace(microsecond=0)
    start = max(now, not_before) if not_before else now
    prices = prices or _current_prices(now)
    found = availability([product], quantity=quantity, term_days=term_days, not_before=start, now=now)[product.pk]
    return _offer(product, found, term_days=term_days, quantity=quantity, now=now, prices=prices, options=options)


@dataclass(frozen=True)
class Fleet:
    """What the offers of every query are computed from, read once for a moment: the products on sale and the
    price list. The live catalog keeps one per snapshot and second (``web.catalog_cache.live_offers``). The
    availability of each query is searched for it (on PostgreSQL by one statement for all the products,
    ``allocation.sweep_sql``): reading every live booking of the fleet once a second instead, to answer every
    query from it, cost about 2 s at fleet scale (issue 22)."""

    now: datetime
    products: tuple[Product, ...]
    prices: pricing.PriceList | None


def fleet_read(now: datetime) -> Fleet:
    now = now.replace(microsecond=0)
    return Fleet(now=now, products=tuple(products_on_sale()), prices=_current_prices(now))


def offers(*, term_days: int, quantity: int, not_before: datetime | None = None,
           environment: Environment | None = None, now: datetime | None = None,
           fleet: Fleet | None = None) -> list[Offer]:
    """One offer per product on sale (only those that run ``environment`` when given). The availability of
    all of them is read at once (a few queries, however many products); the products and prices are those
    of ``fleet`` when given, read for the same ``now``."""
    now = (now or timezone.now()).replace(microsecond=0)
    if fleet is not None and fleet.now != now:
        raise ValueError("the fleet was read for another moment")
    start = max(now, not_before) if not_before else now
    prices = fleet.prices if fleet is not None else _current_prices(now)
    products = []
    for product in (fleet.products if fleet is not None else products_on_sale()):
        if environment is not None:
            try:
                check_environment(product.name, product.stack, environment.name, environment.stack)
            except ValueError:
                continue
        products.append(product)
    found = availability(products, quantity=quantity, term_days=term_days, not_before=start, now=now)
    return [_offer(product, found[product.pk], term_days=term_days, quantity=quantity, now=now, prices=prices)
            for product in products]
