"""The balance signal on anvil: a watched deposit address holding less coin
than its settled transfers credited, having never sent a transaction, flags
the order once; an address the operator swept (it sent a transaction) flags
nothing, since the transfers are still where they were credited."""

from __future__ import annotations

import pytest

from anchorgpu.orders.models import OrderEmail
from anchorgpu.payments.models import Transfer
from anchorgpu.payments.watch import BALANCE_EVERY_BLOCKS
from tests.chains.watch_support import ChainShop, fresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain(anvil_w3, anvil_url, settings):
    settings.ANCHORGPU_OPERATOR_EMAILS = "ops@anchorgpu.example"
    return ChainShop(anvil_w3, url=anvil_url)


CHAIN_EVENTS = ("order.reorged", "order.reorg_resolved")


def alerts(order) -> list[OrderEmail]:
    """The operators' emails about the chain (not those about a short or late payment)."""
    return list(OrderEmail.objects.filter(order=order, kind=OrderEmail.Kind.OPERATOR_ALERT,
                                         event__kind__in=CHAIN_EVENTS))


def rpc(w3, method, params):
    return w3.manager.request_blocking(method, params)


def test_coin_gone_from_an_address_that_never_sent_flags_the_order_once(chain, anvil_w3):
    order = chain.paid()
    address = order.quote.address.lower()  # as the watcher reads addresses
    short = order.quote.amount // 4
    rpc(anvil_w3, "anvil_setBalance", [address, hex(short)])  # the node says the coin is not there
    assert anvil_w3.eth.get_transaction_count(anvil_w3.to_checksum_address(address)) == 0
    chain.mine(BALANCE_EVERY_BLOCKS)  # the balances are compared when the tip crosses a multiple of this
    assert chain.poll("eth").ok
    order = fresh(order)
    assert order.state == "paid"
    assert f"Deposit address {address} holds {short} base units" in order.chain_alert
    assert f"less than the {order.quote.amount} its settled transfers credited" in order.chain_alert
    assert Transfer.objects.get(order=order).withdrawn_at is None  # no transfer is judged gone by a balance
    [email] = alerts(order)
    assert address in email.note

    chain.mine(BALANCE_EVERY_BLOCKS)
    chain.poll("eth")
    assert len(alerts(order)) == 1


def test_an_address_the_operator_swept_flags_nothing(chain, anvil_w3):
    order = chain.paid()
    sweeper = anvil_w3.to_checksum_address(order.quote.address)
    rpc(anvil_w3, "anvil_impersonateAccount", [sweeper])
    try:
        anvil_w3.eth.send_transaction({"from": sweeper, "to": chain.payer, "value": order.quote.amount // 2,
                                       "gas": 21_000})
    finally:
        rpc(anvil_w3, "anvil_stopImpersonatingAccount", [sweeper])
    assert anvil_w3.eth.get_balance(sweeper) < order.quote.amount
    chain.mine(BALANCE_EVERY_BLOCKS)
    assert chain.poll("eth").ok
    order = fresh(order)
    assert order.chain_alert == "" and not alerts(order)
    assert Transfer.objects.get(order=order).rechecked_at is not None  # the transfer itself was found in place


def test_a_reassigned_transfer_is_counted_at_the_address_it_was_paid_to(chain, anvil_w3):
    """Bob paid Alice's quote; the operator moved the transfer to Bob's order. The coin is still at Alice's
    address: Bob's address is not short of it, and Alice's holds nothing unattributed."""
    from anchorgpu.payments.models import Quote
    from anchorgpu.payments.transfers import transfer_reassign
    from tests import shop
    from tests.chains.watch_support import CONFIRMATIONS

    alice = shop.place(chain.customer, asset="eth", quantity=2)
    bob = shop.place(shop.customer("bob@example.com"), asset="eth")
    chain.send(alice, bob.quote.amount)
    chain.mine(CONFIRMATIONS)
    chain.poll("eth")
    assert fresh(alice).state == "underpaid"
    transfer_reassign(transfer=Transfer.objects.get(order=alice), to_order=bob, actor="operator",
                      reason="Bob's payment, sent to Alice's quote")
    assert fresh(bob).state == "paid"
    chain.mine(BALANCE_EVERY_BLOCKS)
    assert chain.poll("eth").ok
    assert fresh(bob).chain_alert == "" and not alerts(bob) and not alerts(alice)
    assert Quote.objects.get(order=alice).unattributed == 0
    # Then the coin vanishes from Alice's address: the order it credits, Bob's, is the one flagged.
    rpc(anvil_w3, "anvil_setBalance", [alice.quote.address.lower(), hex(0)])
    chain.mine(BALANCE_EVERY_BLOCKS)
    assert chain.poll("eth").ok
    assert fresh(bob).chain_alert and len(alerts(bob)) == 1 and fresh(alice).chain_alert == ""
