"""Extensions under a rush (PostgreSQL, many threads; issue 25): an extension racing new orders for the same
cards right after the term, and several extensions of one order at once. Exactly one wins each race, and no
card is booked twice. SQLite runs one writer at a time: there the same races run one after the other."""

from __future__ import annotations

from datetime import timedelta

import pytest

from anchorgpu.allocation.models import Booking
from anchorgpu.orders.errors import Unavailable
from anchorgpu.orders.extensions import order_extend
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.models import Order
from anchorgpu.payments.models import Asset
from tests import shop
from tests.allocation.test_race import overlapping_live_rows, run_together

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db_race]


def _all_h200_running() -> Order:
    shop.load_shop()
    order = shop.place(shop.customer(), product="h200-141gb", quantity=16, term_days=3)
    shop.pay(order)
    provision_due()
    order = Order.objects.get(pk=order.pk)
    assert order.state == "active"
    return order


def _extend(order: Order, days: int):
    def job():
        return order_extend(order=Order.objects.get(pk=order.pk), days=days, actor="alice@example.com",
                            asset=Asset.objects.get(code="btc")).pk
    return job


def _rival(n: int, start):
    def job():
        user = shop.customer(f"rival{n}@example.com")
        return shop.place(user, product="h200-141gb", quantity=16, term_days=3, start=start).pk
    return job


def _live_holds_after(order: Order) -> list[Booking]:
    return list(Booking.objects.filter(state=Booking.State.LIVE, starts_at__gte=order.ends_at,
                                       starts_at__lt=order.ends_at + timedelta(days=3)))


@pytest.mark.postgres_only
def test_an_extension_racing_new_orders_for_the_same_cards_exactly_one_wins():
    order = _all_h200_running()
    jobs = [_extend(order, 3)] + [_rival(n, order.ends_at) for n in range(11)]
    results = run_together(jobs)
    granted = [value for outcome, value in results if outcome == "granted"]
    assert len(granted) == 1, results
    assert len(_live_holds_after(order)) == 1
    assert overlapping_live_rows() == []


@pytest.mark.postgres_only
def test_several_extensions_of_one_order_at_once_one_wins():
    order = _all_h200_running()
    results = run_together([_extend(order, days) for days in (3, 7, 30, 3, 7, 30)])
    granted = [value for outcome, value in results if outcome == "granted"]
    assert len(granted) == 1, results
    assert Order.objects.filter(extends=order).count() == 1
    assert overlapping_live_rows() == []


def test_serially_the_first_of_an_extension_and_a_new_order_wins():
    order = _all_h200_running()
    ext = _extend(order, 3)()
    with pytest.raises(Unavailable):
        _rival(1, order.ends_at)()
    assert Order.objects.filter(pk=ext).exists() and len(_live_holds_after(order)) == 1
    assert overlapping_live_rows() == []
