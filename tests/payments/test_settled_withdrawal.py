"""The watcher's writes for a settled transfer taken away, straight through
the services (no chain): the order is flagged, not moved back; a transfer
that comes back and goes again is news each time; one that never settled
flags nothing."""

from __future__ import annotations

import pytest
from django.utils import timezone

from anchorgpu.chains.base import BlockRef, SeenTransfer
from anchorgpu.orders.models import OrderEmail
from anchorgpu.payments.models import Asset
from anchorgpu.payments.observe import transfer_observe, transfer_withdraw
from tests import shop
from tests.chains.watch_support import fresh

pytestmark = pytest.mark.django_db
BLOCK = BlockRef(100, "0x" + "aa" * 32)


@pytest.fixture
def order():
    shop.load_shop()
    Asset.objects.filter(code="eth").update(confirmations_required=3)
    return shop.place(shop.customer(), asset="eth")


def seen(order, block=BLOCK) -> SeenTransfer:
    return SeenTransfer(txid=shop.txid("evm"), index=0, to=order.quote.address.lower(), amount=order.quote.amount,
                        sender="0x" + "11" * 20, block=block)


CHAIN_EVENTS = ("order.reorged", "order.reorg_resolved")


def alerts(order):
    """The operators' emails about the chain (not those about a short or late payment)."""
    return list(OrderEmail.objects.filter(order=order, kind=OrderEmail.Kind.OPERATOR_ALERT,
                                         event__kind__in=CHAIN_EVENTS).order_by("id"))


def gone(row):
    return transfer_withdraw(transfer=row, expected=(row.block_number, row.block_hash), now=timezone.now(),
                             reason="block 100 is now 0xbb… and the transaction is in no block")


def test_gone_back_in_the_same_block_and_gone_again_is_raised_each_time(order):
    row = transfer_observe(order=order, seen=seen(order), tip=104)
    assert fresh(order).state == "paid"
    gone(row)
    assert fresh(order).chain_alert and len(alerts(order)) == 1
    transfer_observe(order=order, seen=seen(order), tip=106)  # the first branch won after all
    assert not fresh(order).chain_alert and len(alerts(order)) == 2
    row.refresh_from_db()
    gone(row)
    order = fresh(order)
    assert "(taken away 2 times)" in order.chain_alert and len(alerts(order)) == 3
    assert order.state == "paid" and order.invoice is not None


def test_a_transfer_that_never_settled_flags_nothing(order):
    row = transfer_observe(order=order, seen=seen(order), tip=101)  # 2 of 3 confirmations
    gone(row)
    row.refresh_from_db()
    assert row.withdrawn_at is not None and "settled_gone" not in row.note
    assert not fresh(order).chain_alert and not alerts(order) and fresh(order).state == "awaiting_payment"


def test_a_settled_transfer_moved_to_a_shallow_block_and_gone_from_there_flags_the_order(order):
    row = transfer_observe(order=order, seen=seen(order), tip=104)
    shallow = BlockRef(105, "0x" + "cc" * 32)
    transfer_observe(order=order, seen=seen(order, shallow), tip=105)  # mined again, 1 confirmation there
    row.refresh_from_db()
    assert row.confirmations == 1 and "settled_moved:" in row.note
    gone(row)  # the unsettled check takes it away from its new block
    order = fresh(order)
    assert order.state == "paid" and f"block 105 ({shallow.hash})" in order.chain_alert and len(alerts(order)) == 1
