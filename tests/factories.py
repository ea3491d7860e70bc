"""Small builders for database tests: a product with hosts and devices, a price list."""

from __future__ import annotations

import itertools
from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from anchorgpu.catalog.models import Environment, Option, OptionPrice, PriceList, Product, ProductRate, TermDiscount
from anchorgpu.fleet.models import Device, Host, Site

_seq = itertools.count(1)


def site(code: str | None = None) -> Site:
    code = code or f"s{next(_seq)}"
    return Site.objects.get_or_create(code=code, defaults={"name": code.upper(), "country": "DE"})[0]


def product(slug: str | None = None, *, cards_per_unit: int = 1, stack: str = "cuda", memory: int = 80,
            name: str | None = None) -> Product:
    slug = slug or f"gpu-{next(_seq)}"
    return Product.objects.create(slug=slug, name=name or slug.upper(), vendor="NVIDIA", memory_gb_per_card=memory,
                                  cards_per_unit=cards_per_unit, stack=stack)


def host(prod: Product, *, cards: int = 8, paired: bool | None = None, at: Site | None = None,
         status: str = Host.Status.ACTIVE) -> Host:
    paired = prod.cards_per_unit == 2 if paired is None else paired
    h = Host.objects.create(site=at or site(), name=f"{prod.slug}-h{next(_seq)}", product=prod, status=status)
    Device.objects.bulk_create([Device(host=h, index=i, uid=f"{h.name}-gpu{i}",
                                       nvlink_pair=(i // 2) if paired else None) for i in range(cards)])
    return h


def price_list(rates: dict[Product, str], *, discounts=None, currency: str = "USD") -> PriceList:
    pl = PriceList.objects.create(name="test", currency=currency, valid_from=timezone.now() - timedelta(hours=1))
    ProductRate.objects.bulk_create([ProductRate(price_list=pl, product=p, rate_per_card_hour=Decimal(r))
                                     for p, r in rates.items()])
    discounts = {3: "0", 7: "5", 30: "15"} if discounts is None else discounts
    TermDiscount.objects.bulk_create([TermDiscount(price_list=pl, term_days=d, percent=Decimal(p))
                                      for d, p in discounts.items()])
    return pl


def option(slug: str, prices: dict[int, str], pl: PriceList, *, per_unit: bool = False) -> Option:
    opt = Option.objects.create(slug=slug, name=slug.replace("-", " ").title(), per_unit=per_unit)
    OptionPrice.objects.bulk_create([OptionPrice(price_list=pl, option=opt, term_days=d, price=Decimal(p))
                                     for d, p in prices.items()])
    return opt


def environment(slug: str, stack: str) -> Environment:
    return Environment.objects.create(slug=slug, name=slug, stack=stack)


def now_minute():
    return timezone.now().replace(second=0, microsecond=0)
