"""A shop with a paid order whose customer has an accented name and a company."""

from __future__ import annotations

import pytest

from anchorgpu.orders.models import Order
from tests import shop

CUSTOMER = {"name": "João Conceição", "company": "Société Générale Ltda", "vat_id": "PT123456789",
            "billing_address": "Rua das Flores 12\n1200-195 Lisboa", "country": "PT"}


def paid_order(user, *, language: str = "en", **customer) -> Order:
    """An order placed by ``user`` with the billing details above (or ``customer``), then paid in full."""
    order = shop.place(user, options=("dedicated-ipv4",))
    Order.objects.filter(pk=order.pk).update(language=language, **{**CUSTOMER, **customer})
    shop.pay(Order.objects.get(pk=order.pk), txid=f"{order.pk:064x}")  # one transfer per order
    return Order.objects.select_related("invoice").get(pk=order.pk)


@pytest.fixture
def alice(db):
    shop.load_shop()
    return shop.customer()


@pytest.fixture
def paid(alice) -> Order:
    return paid_order(alice)
