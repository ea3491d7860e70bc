"""Reads of the catalog, turned into the domain's plain values."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Prefetch
from django.utils import timezone

from . import pricing
from .models import Environment, Option, OptionPrice, PriceList, Product, ProductRate


class NoPriceList(LookupError):
    pass


def products_on_sale():
    return Product.objects.filter(is_active=True)


def environments_for(product: Product):
    from .rules import environment_fits
    return [env for env in Environment.objects.filter(is_active=True) if environment_fits(product.stack, env.stack)]


def options_offered():
    return Option.objects.filter(is_active=True)


def price_list_current(*, at: datetime | None = None) -> pricing.PriceList:
    at = at or timezone.now()
    row = (PriceList.objects.filter(is_active=True, valid_from__lte=at)
           .prefetch_related(Prefetch("rates", ProductRate.objects.select_related("product")), "discounts",
                             Prefetch("option_prices", OptionPrice.objects.select_related("option"))).first())
    if row is None:
        raise NoPriceList("no active price list")
    options: dict[str, dict] = {}
    for op in row.option_prices.all():
        if not op.option.is_active:
            continue
        entry = options.setdefault(op.option.slug, {"option": op.option, "prices": {}})
        entry["prices"][op.term_days] = op.price
    return pricing.PriceList(
        currency=row.currency,
        minor_unit=pricing.minor_unit(row.currency),
        rate_per_card_hour={r.product.slug: r.rate_per_card_hour for r in row.rates.all()},
        term_discount_percent={d.term_days: d.percent for d in row.discounts.all()},
        options={
            slug: pricing.OptionPrice(slug, e["option"].name, e["prices"], e["option"].per_unit)
            for slug, e in options.items()
        },
    )
