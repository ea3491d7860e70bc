"""Reads of the catalog, turned into the domain's plain values."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from . import pricing
from .models import Environment, Option, OptionPrice, PriceList, Product, ProductRate, TermDiscount


class NoPriceList(LookupError):
    pass


def products_on_sale():
    return Product.objects.filter(is_active=True)


def environments_for(product: Product):
    from .rules import environment_fits
    return [env for env in Environment.objects.filter(is_active=True) if environment_fits(product.stack, env.stack)]


def options_offered():
    return Option.objects.filter(is_active=True)


def price_list_current_pk(*, at: datetime | None = None) -> int | None:
    """The id of the price list in effect at ``at`` (now): the active one with the latest start."""
    return (PriceList.objects.filter(is_active=True, valid_from__lte=at or timezone.now())
            .values_list("pk", flat=True).first())


def price_list_current(*, at: datetime | None = None) -> pricing.PriceList:
    """The active price list with the latest start at ``at``, as the domain's value. Four small queries of
    plain values: every order and every computation of the catalog reads it."""
    at = at or timezone.now()
    row = PriceList.objects.filter(is_active=True, valid_from__lte=at).values_list("pk", "currency").first()
    if row is None:
        raise NoPriceList("no active price list")
    pk, currency = row
    options: dict[str, dict] = {}
    option_rows = (OptionPrice.objects.filter(price_list_id=pk, option__is_active=True)
                   .order_by("option__position", "option__name", "option_id", "term_days")
                   .values_list("option__slug", "option__name", "option__per_unit", "term_days", "price"))
    for slug, name, per_unit, term_days, price in option_rows:
        entry = options.setdefault(slug, {"name": name, "per_unit": per_unit, "prices": {}})
        entry["prices"][term_days] = price
    return pricing.PriceList(
        currency=currency,
        minor_unit=pricing.minor_unit(currency),
        rate_per_card_hour=dict(ProductRate.objects.filter(price_list_id=pk).order_by()
                                .values_list("product__slug", "rate_per_card_hour")),
        term_discount_percent=dict(TermDiscount.objects.filter(price_list_id=pk).order_by()
                                   .values_list("term_days", "percent")),
        options={slug: pricing.OptionPrice(slug, e["name"], e["prices"], e["per_unit"]) for slug, e in options.items()},
    )
