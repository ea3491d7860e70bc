"""Ten operators record one transaction for ten orders at the same moment, each at another index (PostgreSQL,
issue 19): exactly one order is credited; the others are refused and nothing else is written."""

from __future__ import annotations

import pytest

from anchorgpu.orders.errors import NotAllowedNow
from anchorgpu.payments.models import Transfer
from tests import shop
from tests.allocation.test_race import run_together

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db_race, pytest.mark.postgres_only]


def test_one_transaction_typed_for_ten_orders_at_once_credits_one():
    shop.load_shop()
    user = shop.customer()
    orders = [shop.place(user) for _ in range(10)]
    results = run_together([lambda o=o, i=i: shop.pay(o, index=i).pk for i, o in enumerate(orders)])
    granted = [r for r in results if r[0] == "granted"]
    refused = [r[1] for r in results if r[0] == "refused"]
    assert len(granted) == 1 and len(refused) == 9
    assert all(isinstance(e, NotAllowedNow) and "already credited" in str(e) for e in refused), refused[:2]
    assert Transfer.objects.count() == 1
