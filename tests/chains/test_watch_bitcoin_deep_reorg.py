"""A Bitcoin reorganisation deeper than the confirmations, through the local
Esplora explorer: the block holding a settled payment is replaced by a
longer branch without it. The payment is taken away and the paid order
flagged; the other payment of that block, mined again in the new branch,
stays and keeps counting."""

from __future__ import annotations

import pytest

from anchorgpu.orders.models import OrderEmail
from anchorgpu.payments.models import Transfer
from anchorgpu.payments.watch import watch_poll
from tests import shop
from tests.chains.test_watch_bitcoin_orders import (  # noqa: F401 - explorer and testnet: fixtures, used by name
    PAYMENT,
    SECOND,
    TO_INDEX_1,
    explorer,
    order_for,
    testnet,
    watcher,
)
from tests.chains.watch_support import fresh

pytestmark = pytest.mark.django_db


def test_a_settled_bitcoin_payment_reorganised_away_flags_the_order(explorer, testnet):  # noqa: F811
    order = order_for(2_000_000, shop.customer())  # paid by PAYMENT and SECOND, both in block 2500001
    assert watch_poll(testnet, watcher=watcher(explorer)).ok
    assert fresh(order).state == "paid"
    old = explorer.blocks[explorer.best[2500001]]
    assert PAYMENT in old.txids

    recorded = explorer.transactions
    branch = explorer.add_block([recorded[SECOND], recorded[TO_INDEX_1]], height=2500001,
                                prev_hash=explorer.best[2500000], when=old.time + 1)
    after = explorer.add_block([recorded["23ee48735d6db2534983475d79bf6066450445be9db850f780357350ab09eb32"]],
                               height=2500002, prev_hash=branch.hash, when=old.time + 601)
    explorer.add_block([recorded["3e610a6f94ad1b0f0799e196678cd580696628fc3aef7b73f26818cda6bb5ac4"]],
                       height=2500003, prev_hash=after.hash, when=old.time + 1201)

    report = watch_poll(testnet, watcher=watcher(explorer))
    assert report.ok and report.withdrawn == 1
    gone = Transfer.objects.get(order=order, txid=PAYMENT)
    moved = Transfer.objects.get(order=order, txid=SECOND)
    assert gone.withdrawn_at is not None and "settled_gone:" in gone.note
    assert moved.withdrawn_at is None and moved.block_hash == branch.hash and moved.confirmations == 3
    order = fresh(order)
    assert order.state == "paid" and order.invoice.crypto_amount == 2_000_000  # not moved back
    assert PAYMENT in order.chain_alert and f"block 2500001 ({old.hash})" in order.chain_alert
    assert SECOND not in order.chain_alert  # mined again in the new branch: still there
    # (The order was short, and said so, until its second transfer confirmed.)
    [email] = OrderEmail.objects.filter(order=order, kind=OrderEmail.Kind.OPERATOR_ALERT,
                                        event__kind="order.reorged")
    assert PAYMENT in email.note
