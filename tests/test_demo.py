from collections import Counter

import pytest

from anchorgpu.allocation.models import Booking
from anchorgpu.catalog.models import Environment, Option, PriceList, Product
from anchorgpu.catalog.rules import TERM_DAYS
from anchorgpu.demo import load_demo
from anchorgpu.fleet.models import Host, Site

pytestmark = pytest.mark.django_db


def test_demo_fills_an_empty_database_once():
    assert load_demo() is True
    assert load_demo() is False  # never writes over an existing shop
    assert Product.objects.count() == 5


def test_demo_fleet_meets_the_catalog_facts():
    load_demo()
    assert Site.objects.count() >= 2
    products = {p.slug: p for p in Product.objects.all()}
    facts = {slug: (p.memory_gb_per_card, p.cards_per_unit, p.stack) for slug, p in products.items()}
    assert facts == {
        "a100-sxm-80gb": (80, 1, "cuda"),
        "h100-sxm-80gb": (80, 1, "cuda"),
        "h200-141gb": (141, 1, "cuda"),
        "mi300x-192gb": (192, 1, "rocm"),
        "b200-lot-2x180gb": (180, 2, "blackwell"),
    }
    for product in products.values():
        assert Host.objects.filter(product=product).exists(), product.slug
    for host in Host.objects.filter(product__slug="b200-lot-2x180gb"):
        pairs = Counter(host.devices.values_list("nvlink_pair", flat=True))
        assert len(pairs) == 4 and set(pairs.values()) == {2}, host.name


def test_demo_prices_every_product_term_and_option():
    load_demo()
    price_list = PriceList.objects.get()
    assert {r.product.slug for r in price_list.rates.all()} == set(Product.objects.values_list("slug", flat=True))
    assert sorted(price_list.discounts.values_list("term_days", flat=True)) == list(TERM_DAYS)
    for option in Option.objects.all():
        assert sorted(price_list.option_prices.filter(option=option).values_list("term_days", flat=True)) == list(TERM_DAYS)
    assert set(Environment.objects.values_list("stack", flat=True)) == {"cuda", "rocm", "blackwell"}
    assert "not a backup" in Option.objects.get(slug="extra-nvme-4tb").description


def test_demo_bookings_are_confirmed_terms():
    load_demo()
    kinds = set(Booking.objects.values_list("kind", "state"))
    assert kinds == {("confirmed", "live")}
