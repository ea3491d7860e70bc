"""What an operator records for a watched asset is read from the chain (issue 19): a transfer is named by its
transaction id and its amount, recipient, token and confirmations come from the node; a refund's transaction is
looked up before the customer is told it was sent. On anvil (a real JSON-RPC node) and eth-tester."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.urls import reverse

from anchorgpu.orders import notify
from anchorgpu.orders.errors import NotAllowedNow
from anchorgpu.orders.models import OrderEmail
from anchorgpu.payments.models import Asset, Refund, Transfer
from anchorgpu.payments.refunds import RefundInput, refund_record, refunds_verify_due
from anchorgpu.payments.services import refund_address_set
from anchorgpu.payments.transfers import transfer_record_from_chain
from anchorgpu.web.timeline import for_order
from tests import shop
from tests.chains import evm_support as evm
from tests.chains.watch_support import CONFIRMATIONS, ChainShop, fresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain(evm_w3):
    chain = ChainShop(evm_w3)
    # Watched: the tests hand the watcher over; the URL only marks the assets as watched.
    Asset.objects.filter(code__in=["eth", "usdc-ethereum"]).update(watch_url="http://127.0.0.1:9/")
    return chain


@pytest.mark.parametrize("code", ["eth", "usdc-ethereum"])
def test_a_watched_transfer_is_read_from_the_chain_not_typed(chain, code):
    order = chain.place(code)
    txid = chain.send(order, order.quote.amount)
    with pytest.raises(NotAllowedNow, match="watched on chain"):
        shop.pay(order, txid=txid, amount=10 * order.quote.amount)  # whatever an operator would type
    rows = transfer_record_from_chain(order=order, txid=txid, actor="carol", note="customer's email",
                                      watcher=chain.watcher(order.quote.asset))
    receipt = chain.w3.eth.get_transaction_receipt(txid)
    index = receipt["logs"][0]["logIndex"] if code != "eth" else 0
    assert [(r.amount, r.index, r.recorded_by, r.source) for r in rows] == [
        (order.quote.amount, index, "carol", Transfer.Source.WATCHER)]
    assert rows[0].block_number == receipt["blockNumber"] and rows[0].sender.lower() == chain.payer.lower()
    chain.mine(CONFIRMATIONS)
    chain.poll(code)
    assert fresh(order).state == "paid"
    with pytest.raises(NotAllowedNow, match="already recorded for this order"):
        transfer_record_from_chain(order=order, txid=txid, actor="carol", watcher=chain.watcher(order.quote.asset))


def test_a_transaction_that_pays_another_orders_address_is_refused(chain):
    first, second = chain.place("eth"), chain.place("eth")
    txid = chain.send(first, first.quote.amount)
    with pytest.raises(NotAllowedNow, match="pays none of this order's deposit address"):
        transfer_record_from_chain(order=second, txid=txid, actor="carol", watcher=chain.watcher(second.quote.asset))
    transfer_record_from_chain(order=first, txid=txid, actor="carol", watcher=chain.watcher(first.quote.asset))
    assert list(Transfer.objects.values_list("order", flat=True)) == [first.pk]
    assert fresh(second).state == "awaiting_payment"


def _paid(chain):
    order = chain.place("eth")
    chain.send(order, order.quote.amount)
    chain.mine(CONFIRMATIONS)
    chain.poll("eth")
    assert fresh(order).state == "paid"
    customer = chain.w3.eth.accounts[2]
    refund_address_set(order=order, actor=order.user.username, address=customer)
    return order, customer


def _refund(chain, order, txid):
    return refund_record(order=order, actor="carol", watcher=chain.watcher(order.quote.asset), refund=RefundInput(
        address=fresh(order).refund_address, amount=order.quote.amount, rate_choice="quote", txid=txid,
        reason="host fault", whole_order=True, customer_reason="refund"))


def test_a_refund_is_shown_as_sent_once_the_chain_shows_it_paying_the_customer(chain, client):
    order, customer = _paid(chain)
    operator = chain.w3.eth.accounts[0]
    sent = evm.send_eth(chain.w3, operator, customer, order.quote.amount)
    row = _refund(chain, order, sent)
    # One block deep, short of the asset's confirmations: not "sent" yet, anywhere the customer looks.
    assert row.verified_at is None and row.verification["status"] == "confirming"
    texts = " ".join(e.text for e in for_order(fresh(order)))
    assert "on its way" in texts and "Refund sent" not in texts
    note = fresh(order).invoice.credit_notes.get()
    client.force_login(order.user)
    pdf = reverse("credit_note_pdf", args=[order.reference, note.number])
    assert pdf not in client.get(reverse("order", args=[order.reference])).content.decode()
    assert client.get(pdf).status_code == 404
    [state_email] = OrderEmail.objects.filter(order=order, kind="state_changed", state="refunded")
    assert "on its way" in notify._message(state_email)[1]

    chain.mine(CONFIRMATIONS)
    with mock.patch("anchorgpu.payments.refunds.watcher_for", return_value=chain.watcher(order.quote.asset)):
        assert refunds_verify_due(every=timedelta(0)) == 1
    row = Refund.objects.get(pk=row.pk)
    assert row.verified_at is not None and row.verification["status"] == "verified"
    assert row.verification["paid"] == str(order.quote.amount)
    texts = " ".join(e.text for e in for_order(fresh(order)))
    assert "Refund sent" in texts
    assert pdf in client.get(reverse("order", args=[order.reference])).content.decode()
    assert client.get(pdf).status_code == 200
    [sent_email] = OrderEmail.objects.filter(order=order, kind="refund_sent")
    assert sent in notify._message(sent_email)[1]


def test_a_refund_whose_transaction_pays_someone_else_is_never_shown_as_sent(chain):
    order, _customer = _paid(chain)
    elsewhere = evm.send_eth(chain.w3, chain.w3.eth.accounts[0], chain.w3.eth.accounts[3], order.quote.amount)
    chain.mine(CONFIRMATIONS)
    row = _refund(chain, order, elsewhere)
    assert row.verified_at is None and row.verification["status"] == "other_address"
    texts = " ".join(e.text for e in for_order(fresh(order)))
    assert "on its way" in texts and "Refund sent" not in texts
    assert refunds_verify_due() == 0  # a final finding is not looked up again; the operator corrects it
    assert Refund.objects.get(pk=row.pk).verification["checks"] == 1
    from anchorgpu.orders.admin_panels import to_do
    from anchorgpu.orders.queue import PaymentQueueEntry

    assert PaymentQueueEntry.objects.filter(pk=order.pk).count() == 1
    assert "does not hold up on chain (other_address)" in to_do(fresh(order))


def test_a_short_refund_is_not_verified(chain):
    order, customer = _paid(chain)
    sent = evm.send_eth(chain.w3, chain.w3.eth.accounts[0], customer, order.quote.amount // 2)
    chain.mine(CONFIRMATIONS)
    row = _refund(chain, order, sent)
    assert row.verified_at is None and row.verification["status"] == "short"


def test_the_admin_records_a_watched_transfer_by_its_id_only(admin_client, anvil_w3, anvil_url):
    chain = ChainShop(anvil_w3, url=anvil_url)
    order = chain.place("usdc-ethereum")
    url = reverse("admin:orders_order_record_transfer", args=[order.pk])
    page = admin_client.get(url).content.decode()
    assert 'name="txid"' in page and 'name="amount"' not in page and 'name="index"' not in page
    txid = chain.send(order, order.quote.amount)
    response = admin_client.post(url, {"txid": txid, "note": "from the customer's email"})
    assert response.status_code == 302, response.content.decode()[:2000]
    row = Transfer.objects.get(order=order)
    assert row.amount == order.quote.amount and row.recorded_by == "admin"
    response = admin_client.post(url, {"txid": txid, "note": "again"})
    assert response.status_code == 200 and "already recorded for this order" in response.content.decode()
