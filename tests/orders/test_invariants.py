"""The scan of the whole database for the shop's promises (``anchorgpu.orders.invariants``, ``anchorgpu
invariants``): it finds an order without its cards and a transaction credited twice, and stays quiet about
what the rules allow (a stated shared transaction, outputs the chain proved)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from anchorgpu.allocation.models import Booking
from anchorgpu.orders.invariants import database_checks_missing, invariant_violations, orders_without_their_booking
from anchorgpu.payments.models import Transfer
from tests import shop

pytestmark = pytest.mark.django_db


@pytest.fixture
def store():
    shop.load_shop()
    return shop.customer()


def _without_the_database_check():
    """What a database without the triggers (or a restore that skipped them) would let through; the test's
    transaction rolls this back."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # Django's deferred foreign keys, checked now
            cursor.execute("ALTER TABLE allocation_booking DISABLE TRIGGER booking_keeps_its_order")
        else:
            cursor.execute("DROP TRIGGER booking_keeps_its_order")


def test_an_active_order_whose_booking_was_released_behind_its_back_is_found(store, capsys):
    order = shop.activate(shop.place(store))
    call_command("invariants")
    assert "The invariants hold" in capsys.readouterr().out
    _without_the_database_check()
    assert database_checks_missing() == [
        "the database's check booking_keeps_its_order is missing: run the migrations again, or restore it"]
    Booking.objects.filter(pk=order.booking_id).update(state=Booking.State.RELEASED)
    assert orders_without_their_booking() == [
        f"order {order.reference} is active without a live confirmed booking (booking {order.booking_id})"]
    with pytest.raises(CommandError, match="2 problem"):
        call_command("invariants")


def _typed(order, txid: str, index: int, statement: str = "", source: str = Transfer.Source.OPERATOR):
    asset = order.quote.asset
    return Transfer.objects.create(order=order, asset=asset, chain=asset.network, txid=txid, index=index,
                                   amount=order.quote.amount, confirmations=6, source=source, recorded_by="x",
                                   seen_at=timezone.now() - timedelta(minutes=1), shared_statement=statement)


def test_a_transaction_credited_to_two_orders_is_found_unless_stated_or_proven(store):
    first, second, third = shop.place(store), shop.place(store), shop.place(store)
    _typed(first, shop.TXID_BTC, 0)
    _typed(second, shop.TXID_BTC, 3, statement="output 3 pays the second order's address")
    assert invariant_violations() == []
    row = _typed(third, shop.TXID_BTC, 4)
    found = invariant_violations()
    assert len(found) == 1 and first.reference in found[0] and third.reference in found[0]
    Transfer.objects.filter(pk=row.pk).update(source=Transfer.Source.WATCHER)  # read from the chain: proven
    assert invariant_violations() == []


def test_a_live_booking_whose_cards_were_let_go_is_found(store):
    from anchorgpu.allocation.models import BookingDevice

    order = shop.activate(shop.place(store))
    assert invariant_violations() == []
    BookingDevice.objects.filter(booking_id=order.booking_id).update(live=False)
    assert invariant_violations() == [f"booking {order.booking_id} of order {order.reference} holds no live card"]


def test_a_term_shorter_than_bought_or_outside_its_booking_is_found(store):
    from anchorgpu.orders.invariants import terms_outside_their_booking
    from anchorgpu.orders.models import Order

    order = shop.activate(shop.place(store, term_days=3))
    assert terms_outside_their_booking() == []
    Order.objects.filter(pk=order.pk).update(ends_at=order.ends_at - timedelta(minutes=19))
    assert terms_outside_their_booking() == [f"order {order.reference}: its term runs 2 days, 23:41:00, not the 3 "
                                             "days bought"]
    Order.objects.filter(pk=order.pk).update(starts_at=order.starts_at + timedelta(hours=1),
                                             ends_at=order.ends_at + timedelta(hours=1))
    found = terms_outside_their_booking()
    assert len(found) == 1 and "is not inside its booking" in found[0]
