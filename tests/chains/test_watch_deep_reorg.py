"""A reorganisation deeper than the confirmations, on a real anvil node
(``evm_snapshot`` before the payment, ``evm_revert`` after it settled, then a
longer chain without it): the paid order keeps its state and invoice, is
flagged for the operators, who get one email from the worker's sweep, and
the order's page, its admin page and the payment queue say so. A transfer
mined again clears the alert with a trace; a node that is behind or lost a
receipt flags nothing."""

from __future__ import annotations

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import translation
from eth_account import Account
from web3 import Web3

from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.models import OrderEmail
from anchorgpu.orders.notify import emails_send_due
from anchorgpu.payments.models import Transfer
from anchorgpu.payments.watch import watch_poll
from tests.chains import evm_support as evm
from tests.chains.test_watch_edge_cases import LostReceipts
from tests.chains.watch_support import CONFIRMATIONS, ChainShop, fresh

pytestmark = pytest.mark.django_db
# anvil's second development account (the payer in ChainShop): its key is public, printed by anvil itself.
PAYER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
OPERATORS = "ops@anchorgpu.example, night-shift@anchorgpu.example"


@pytest.fixture
def chain(anvil_w3, anvil_url, settings):
    settings.ANCHORGPU_OPERATOR_EMAILS = OPERATORS
    settings.ANCHORGPU_SITE_URL = "https://shop.anchorgpu.example"
    return ChainShop(anvil_w3, url=anvil_url)


CHAIN_EVENTS = ("order.reorged", "order.reorg_resolved")


def alerts(order) -> list[OrderEmail]:
    """The operators' emails about the chain (not those about a short or late payment)."""
    return list(OrderEmail.objects.filter(order=order, kind=OrderEmail.Kind.OPERATOR_ALERT,
                                         event__kind__in=CHAIN_EVENTS).order_by("id"))


def signed_eth(w3: Web3, to: str, amount: int, nonce: int) -> bytes:
    tx = {"to": Web3.to_checksum_address(to), "value": amount, "nonce": nonce, "gas": 21_000,
          "chainId": w3.eth.chain_id, "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 10**9}
    return Account.sign_transaction(tx, PAYER_KEY).raw_transaction


def paid_then_reorged(chain, anvil_w3, code: str):
    """An order paid with all its confirmations, then a longer chain without its transfer."""
    order = chain.place(code)
    snap = evm.snapshot(anvil_w3)
    txid = chain.send(order, order.quote.amount)
    credited_in = anvil_w3.eth.get_transaction_receipt(txid)["blockNumber"]
    chain.mine(CONFIRMATIONS + 2)  # deeper than the confirmations
    chain.poll(code)
    order = fresh(order)
    assert order.state == "paid" and order.invoice is not None and not order.chain_alert
    evm.revert(anvil_w3, snap)
    chain.mine(CONFIRMATIONS + 6)  # the other branch is longer: the transfer's height has another block now
    assert anvil_w3.eth.get_block(credited_in)["hash"] is not None
    return order, txid, credited_in


@pytest.mark.parametrize("code", ["eth", "usdc-ethereum"])
def test_a_reorg_deeper_than_the_confirmations_flags_the_paid_order(chain, anvil_w3, code, client, admin_client):
    order, txid, height = paid_then_reorged(chain, anvil_w3, code)
    assert anvil_w3.eth.get_balance(order.quote.address) == 0  # the address holds nothing now

    report = chain.poll(code)
    assert report.ok and report.withdrawn == 1
    order = fresh(order)
    row = Transfer.objects.get(order=order)
    # The order is not moved back and keeps its invoice; the transfer stops counting for new decisions.
    assert order.state == "paid" and order.invoice.crypto_amount == order.quote.amount
    assert row.withdrawn_at is not None and "settled_gone:" in row.note
    assert txid in order.chain_alert and f"block {height}" in order.chain_alert
    assert "is no longer on chain" in order.chain_alert and order.chain_alert_at is not None
    assert AuditEntry.objects.filter(action="chain_alert_raised", object_id=str(order.pk)).count() == 1
    [email] = alerts(order)
    assert txid in email.note and email.sent_at is None

    chain.mine(1)
    chain.poll(code)  # found gone again: the same finding is not raised twice
    assert len(alerts(order)) == 1

    mail.outbox.clear()
    assert emails_send_due() >= 1  # the worker's sweep
    [sent] = [m for m in mail.outbox if "alert" in m.subject]
    assert sent.to == ["ops@anchorgpu.example", "night-shift@anchorgpu.example"]
    assert order.reference in sent.subject and txid in sent.body
    assert f"https://shop.anchorgpu.example/admin/orders/order/{order.pk}/change/" in sent.body
    assert fresh(order).emails.get(kind=OrderEmail.Kind.OPERATOR_ALERT).sent_at is not None

    client.force_login(chain.customer)
    with translation.override("en"):
        page = client.get(reverse("order", kwargs={"reference": order.reference})).content.decode()
    assert "A payment we had counted for this order is no longer on the network." in page
    assert txid not in page  # the customer gets a neutral notice, not the operators' details

    admin_page = admin_client.get(reverse("admin:orders_order_change", args=[order.pk])).content.decode()
    assert 'id="chain-alert"' in admin_page and txid in admin_page
    assert "Money counted for this order is no longer on chain" in admin_page
    assert reverse("admin:orders_order_clear_chain_alert", args=[order.pk]) in admin_page
    queue = admin_client.get(reverse("admin:orders_paymentqueueentry_changelist")).content.decode()
    assert order.reference in queue


def test_a_transfer_mined_again_clears_the_alert_with_a_trace(chain, anvil_w3):
    order = chain.place("eth")
    nonce = anvil_w3.eth.get_transaction_count(chain.payer)
    raw = signed_eth(anvil_w3, order.quote.address, order.quote.amount, nonce)
    snap = evm.snapshot(anvil_w3)
    txid = anvil_w3.eth.send_raw_transaction(raw).to_0x_hex()
    chain.mine(CONFIRMATIONS + 2)
    chain.poll("eth")
    evm.revert(anvil_w3, snap)
    chain.mine(CONFIRMATIONS + 6)
    chain.poll("eth")
    assert fresh(order).chain_alert

    assert anvil_w3.eth.send_raw_transaction(raw).to_0x_hex() == txid  # the same transaction, mined again
    again_in = evm.wait(anvil_w3, txid)["blockNumber"]  # anvil mines it just after answering
    chain.mine(CONFIRMATIONS)
    chain.poll("eth")
    order = fresh(order)
    row = Transfer.objects.get(order=order)
    assert row.withdrawn_at is None and row.block_number == again_in and row.confirmations >= CONFIRMATIONS
    assert "settled_back:" in row.note
    assert order.chain_alert == "" and order.chain_alert_at is None and order.state == "paid"
    cleared = AuditEntry.objects.get(action="chain_alert_cleared", object_id=str(order.pk))
    assert txid in cleared.data["alert_was"] and cleared.actor == "chain-watcher"
    gone, back = alerts(order)
    assert "is on chain again" in back.note and f"block {again_in}" in back.note
    assert "it counts for the order again." in back.note
    mail.outbox.clear()
    emails_send_due()
    told = [m for m in mail.outbox if "ops@anchorgpu.example" in m.to]
    # Sent after it came back, each email says what its own event was.
    assert sorted(m.subject.rsplit(", ", 1)[1] for m in told) == ["payment back on chain",
                                                                  "payment no longer on chain"]
    assert any("The order has no open chain alert now." in m.body and "on chain again" in m.body for m in told)


def test_a_node_that_lost_the_receipt_of_a_settled_transfer_flags_nothing(chain, anvil_w3):
    order = chain.paid()
    chain.mine(1)
    asset = chain.asset("eth")
    report = watch_poll(asset, watcher=LostReceipts.for_web3(anvil_w3, chain_id=asset.chain_id,
                                                             network=asset.network))
    assert report.ok and report.withdrawn == 0
    row = Transfer.objects.get(order=order)
    assert row.withdrawn_at is None and row.rechecked_at is None  # neither gone nor found: asked again later
    assert not fresh(order).chain_alert and not alerts(order)
