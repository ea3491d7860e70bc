"""The demo catalog, price list and fleet a fresh shop starts with.

Card facts (memory, stack) follow DESIGN §3; prices are our demo prices,
for the operator to change in the admin. ``load_demo`` only writes into an
empty database and is safe to call on every start.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from anchorgpu.catalog.models import Environment, Option, OptionPrice, PriceList, Product, ProductRate, TermDiscount
from anchorgpu.fleet.models import Device, Host, Site
from anchorgpu.payments.demo import load_payments

PRODUCTS = [
    # slug, name, vendor, GB per card, cards per unit, stack, summary, rate per card-hour
    ("a100-sxm-80gb", gettext_noop("A100 SXM 80 GB"), "NVIDIA", 80, 1, "cuda",
     gettext_noop("Ampere, HBM2e. The economical choice for LoRA and mid-size full fine-tuning."), "1.29"),
    ("h100-sxm-80gb", gettext_noop("H100 SXM 80 GB"), "NVIDIA", 80, 1, "cuda",
     gettext_noop("Hopper, HBM3, FP8 tensor cores. Fast steps for models that fit in 80 GB."), "2.19"),
    ("h200-141gb", gettext_noop("H200 141 GB"), "NVIDIA", 141, 1, "cuda",
     gettext_noop("Hopper with 141 GB HBM3e: longer sequences and larger batches per card."), "2.89"),
    ("mi300x-192gb", gettext_noop("MI300X 192 GB"), "AMD", 192, 1, "rocm",
     gettext_noop("CDNA 3 with 192 GB HBM3 on the ROCm stack: the most memory per card."), "2.39"),
    ("b200-lot-2x180gb", gettext_noop("B200 lot, 2 × 180 GB"), "NVIDIA", 180, 2, "blackwell",
     gettext_noop("Two Blackwell cards on one host, joined by NVLink. Needs a Blackwell-ready build."), "4.49"),
]

ENVIRONMENTS = [
    # slug, name, stack, image, CUDA release, ROCm release (the releases the image tags name)
    ("pytorch-cuda124", gettext_noop("PyTorch 2.5 · CUDA 12.4 · Ubuntu 22.04"), "cuda", "anchorgpu/pytorch:2.5-cu124",
     "12.4", ""),
    (
        "pytorch-cuda128",
        gettext_noop("PyTorch 2.7 · CUDA 12.8 (Blackwell-ready) · Ubuntu 24.04"),
        "blackwell",
        "anchorgpu/pytorch:2.7-cu128", "12.8", "",
    ),
    ("pytorch-rocm63", gettext_noop("PyTorch 2.7 · ROCm 6.3 · Ubuntu 22.04"), "rocm", "anchorgpu/pytorch:2.7-rocm6.3",
     "", "6.3"),
    (
        "bare-cuda",
        gettext_noop("Ubuntu 22.04 with the NVIDIA driver and CUDA toolkit only"),
        "cuda",
        "anchorgpu/base:cuda-12.4", "12.4", "",
    ),
    (
        "bare-rocm",
        gettext_noop("Ubuntu 22.04 with the ROCm driver and runtime only"),
        "rocm",
        "anchorgpu/base:rocm-6.3", "", "6.3",
    ),
]

OPTIONS = [
    # slug, name, description, per unit, price for 3 / 7 / 30 days
    ("checkpoint-storage-1tb", gettext_noop("Off-machine checkpoint storage, 1 TB"),
     gettext_noop("Object storage in the same site, kept 14 days after the term ends. This is where a checkpoint "
                  "survives."), False, ("6.00", "12.00", "40.00")),
    ("extra-nvme-4tb", gettext_noop("Extra local NVMe, 4 TB"),
     gettext_noop("Fast scratch space on the host for datasets and temporary files. It is wiped at the end of the term "
                  "and is not a backup."), True, ("9.00", "18.00", "60.00")),
    ("dedicated-ipv4", gettext_noop("Dedicated IPv4 address"),
     gettext_noop("A public IPv4 address of your own instead of a shared address with a port."), False,
     ("3.00", "6.00", "20.00")),
]

TERM_DISCOUNTS = {3: Decimal("0"), 7: Decimal("5"), 30: Decimal("15")}

SITES = [("fra1", "Frankfurt", "DE"), ("lis1", "Lisbon", "PT")]
# site, product slug, host count, cards per host, NVLink pairs declared
FLEET = [
    ("fra1", "a100-sxm-80gb", 2, 8, False),
    ("lis1", "a100-sxm-80gb", 1, 8, False),
    ("fra1", "h100-sxm-80gb", 2, 8, False),
    ("lis1", "h100-sxm-80gb", 2, 8, False),
    ("fra1", "h200-141gb", 2, 8, False),
    ("lis1", "mi300x-192gb", 2, 8, False),
    ("fra1", "b200-lot-2x180gb", 1, 8, True),
    ("lis1", "b200-lot-2x180gb", 1, 8, True),
]


def database_is_empty() -> bool:
    return not Product.objects.exists() and not Host.objects.exists()


@transaction.atomic
def load_catalog() -> dict[str, Product]:
    products = {}
    for position, (slug, name, vendor, gb, per_unit, stack, summary, _rate) in enumerate(PRODUCTS):
        products[slug], _ = Product.objects.update_or_create(
            slug=slug, defaults=dict(name=name, vendor=vendor, memory_gb_per_card=gb, cards_per_unit=per_unit,
                                     stack=stack, summary=summary, position=position))
    for position, (slug, name, stack, image, cuda, rocm) in enumerate(ENVIRONMENTS):
        Environment.objects.update_or_create(slug=slug, defaults=dict(name=name, stack=stack, image=image,
                                                                       cuda_version=cuda, rocm_version=rocm,
                                                                       position=position))
    for position, (slug, name, description, per_unit, _prices) in enumerate(OPTIONS):
        Option.objects.update_or_create(slug=slug, defaults=dict(name=name, description=description,
                                                                  per_unit=per_unit, position=position))
    return products


@transaction.atomic
def load_price_list(products: dict[str, Product]) -> PriceList:
    price_list = PriceList.objects.create(name="Demo prices", currency="USD",
                                          valid_from=timezone.now() - timedelta(days=1))
    ProductRate.objects.bulk_create([
        ProductRate(price_list=price_list, product=products[slug], rate_per_card_hour=Decimal(rate))
        for slug, *_rest, rate in PRODUCTS])
    TermDiscount.objects.bulk_create([TermDiscount(price_list=price_list, term_days=d, percent=p)
                                      for d, p in TERM_DISCOUNTS.items()])
    options = {o.slug: o for o in Option.objects.all()}
    OptionPrice.objects.bulk_create([
        OptionPrice(price_list=price_list, option=options[slug], term_days=days, price=Decimal(amount))
        for slug, _n, _d, _p, amounts in OPTIONS for days, amount in zip((3, 7, 30), amounts, strict=True)])
    return price_list


@transaction.atomic
def load_fleet(products: dict[str, Product]) -> list[Host]:
    sites = {code: Site.objects.get_or_create(code=code, defaults=dict(name=name, country=country))[0]
             for code, name, country in SITES}
    hosts = []
    counters: dict[str, int] = {}
    for site_code, slug, count, cards, paired in FLEET:
        short = slug.split("-")[0]
        for _ in range(count):
            counters[(site_code, short)] = n = counters.get((site_code, short), 0) + 1
            host = Host.objects.create(site=sites[site_code], name=f"{site_code}-{short}-{n:02d}",
                                       product=products[slug])
            Device.objects.bulk_create([
                Device(host=host, index=i, uid=f"{host.name}-gpu{i}", nvlink_pair=(i // 2) if paired else None)
                for i in range(cards)])
            hosts.append(host)
    return hosts


def load_demo_bookings() -> int:
    """A few confirmed terms, so the live catalog shows a fleet in use."""
    from anchorgpu.allocation.services import hold_confirm, hold_place

    now = timezone.now().replace(second=0, microsecond=0)
    plan = [("h100-sxm-80gb", 20, 7), ("h200-141gb", 12, 30), ("b200-lot-2x180gb", 5, 7),
            ("mi300x-192gb", 3, 3), ("a100-sxm-80gb", 10, 3)]
    made = 0
    for slug, quantity, days in plan:
        booking = hold_place(product=Product.objects.get(slug=slug), quantity=quantity, start=now,
                             term_days=days, actor="demo", reference="demo")
        hold_confirm(booking=booking, actor="demo")
        made += 1
    return made


def load_demo(*, with_bookings: bool = True) -> bool:
    """Fill an empty database with the demo shop; returns False if it was not empty."""
    if not database_is_empty():
        return False
    products = load_catalog()
    load_price_list(products)
    load_fleet(products)
    load_payments()
    if with_bookings:
        load_demo_bookings()
    return True
