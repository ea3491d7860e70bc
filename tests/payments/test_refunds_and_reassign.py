"""Money that can always be given back (issue 19): a refund of any settled order, to the customer's address
or to one from their written request, a part of the price of a completed term, and a transfer paid to the
wrong order's address moved to the order it was meant for."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.errors import InvalidOrder, NotAllowedNow
from anchorgpu.orders.invariants import invariant_violations, transactions_credited_twice
from anchorgpu.orders.lifecycle import terms_end_due
from anchorgpu.orders.models import Order
from anchorgpu.payments.models import Refund, Transfer
from anchorgpu.payments.refunds import RefundInput, refund_record
from anchorgpu.payments.services import refund_address_set
from anchorgpu.payments.transfers import transfer_reassign
from anchorgpu.web.timeline import for_order
from tests import shop

pytestmark = pytest.mark.django_db

CUSTOMERS_ADDRESS = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"
WRITTEN_ADDRESS = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"


@pytest.fixture
def store():
    shop.load_shop()
    return shop.customer()


def fresh(order) -> Order:
    return Order.objects.select_related("booking", "quote__asset").get(pk=order.pk)


def refund(order, **changes):
    fields = dict(address=CUSTOMERS_ADDRESS, amount=order.quote.amount, rate_choice="quote", txid="cd" * 32,
                  reason="the customer asked", whole_order=True, customer_reason="refund")
    fields.update(changes)
    return refund_record(order=order, actor="operator", refund=RefundInput(**fields))


def test_an_operator_refunds_to_an_address_from_the_customers_written_request(store):
    order = shop.activate(shop.place(store))
    with pytest.raises(NotAllowedNow, match="written request"):
        refund(order, address=WRITTEN_ADDRESS)  # no address on the page, and no request noted
    assert fresh(order).state == "active" and not Refund.objects.exists()
    request = "Email from alice@example.com of 2026-12-01 09:14 UTC, ticket 4411"
    row = refund(order, address=WRITTEN_ADDRESS, customer_request=request)
    assert row.address == WRITTEN_ADDRESS and row.customer_request == request
    assert fresh(order).state == "refunded"
    entry = AuditEntry.objects.get(object_id=str(order.pk), action="refund_record")
    assert entry.data["customer_request"] == request and entry.data["address"] == WRITTEN_ADDRESS


def test_an_address_from_a_request_is_still_never_the_deposit_address_or_the_sender(store):
    order = shop.place(store)
    shop.pay(order)
    with pytest.raises(InvalidOrder, match="deposit address"):
        refund(order, address=order.quote.address, customer_request="phone call")
    with pytest.raises(InvalidOrder, match="not the refund address the customer gave"):
        refund_address_set(order=order, actor=store.username, address=CUSTOMERS_ADDRESS)
        refund(order, address=WRITTEN_ADDRESS)
    assert not Refund.objects.exists()


def test_part_of_the_price_of_a_completed_term_is_refunded_with_a_credit_note(store):
    order = shop.activate(shop.place(store))
    assert terms_end_due(now=order.ends_at) == 1 and fresh(order).state == "completed"
    refund_address_set(order=order, actor=store.username, address=CUSTOMERS_ADDRESS)
    with pytest.raises(NotAllowedNow, match="cannot be refunded as a whole"):
        refund(order)
    tenth = order.quote.amount // 10
    row = refund(order, amount=tenth, whole_order=False, of_price=True, customer_reason="fault", reason="six hours lost to a host fault")
    order = fresh(order)
    assert order.state == "completed"
    note = order.invoice.credit_notes.get()
    assert note.refund_id == row.pk and note.amount == row.fiat_amount and note.amount > Decimal(0)
    with pytest.raises(InvalidOrder, match="keeps %d base units of its price" % (order.quote.amount - tenth)):
        refund(order, amount=order.quote.amount, whole_order=False, of_price=True, customer_reason="fault", txid="ef" * 32)


@pytest.mark.parametrize("state", ["paid", "provisioning", "active", "failed"])
def test_every_settled_state_can_be_refunded_whole(store, state):
    order = shop.place(store)
    if state == "paid":
        shop.pay(order)
    else:
        order = shop.activate(order)
        if state != "active":
            Order.objects.filter(pk=order.pk).update(state=state)
    refund_address_set(order=order, actor=store.username, address=CUSTOMERS_ADDRESS)
    refund(order)
    order = fresh(order)
    assert order.state == "refunded" and order.booking.state == "released" and invariant_violations() == []


def _pair(store):
    """Order ``a`` for two cards, order ``b`` for one: b's customer pays b's amount to a's address."""
    a = shop.place(store, quantity=2)
    b = shop.place(shop.customer("bob@example.com"))
    wrong = shop.pay(a, amount=b.quote.amount)
    assert fresh(a).state == "underpaid"
    return a, b, wrong


def test_a_transfer_to_the_wrong_orders_address_is_moved_to_the_order_it_was_meant_for(store):
    a, b, wrong = _pair(store)
    with pytest.raises(InvalidOrder, match="Say why"):
        transfer_reassign(transfer=wrong, to_order=b, actor="operator", reason=" ")
    transfer_reassign(transfer=wrong, to_order=b, actor="operator",
                      reason="Bob sent his payment to Alice's quote by mistake (his email of 1 Dec)")
    a, b, row = fresh(a), fresh(b), Transfer.objects.get(pk=wrong.pk)
    assert row.order_id == b.pk and row.paid_to == a.quote.address and row.address == a.quote.address
    assert b.state == "paid" and b.invoice.crypto_amount == b.quote.amount
    assert a.state == "awaiting_payment" and not hasattr(a, "invoice")
    for order in (a, b):
        entry = AuditEntry.objects.get(object_id=str(order.pk), action="transfer_reassign")
        assert entry.data["from"] == a.reference and entry.data["to"] == b.reference and "Bob" in entry.reason
    assert "meant for this order" in " ".join(e.text for e in for_order(b))
    assert "meant for another order" in " ".join(e.text for e in for_order(a))
    assert transactions_credited_twice() == [] and invariant_violations() == []


def test_a_transfer_an_order_counts_towards_its_own_payment_stays_where_it_is(store):
    a = shop.place(store)
    paid = shop.pay(a)
    b = shop.place(shop.customer("bob@example.com"))
    with pytest.raises(NotAllowedNow, match="counts this transfer towards its payment"):
        transfer_reassign(transfer=paid, to_order=b, actor="operator", reason="wrong order?")
    eth = shop.place(store, asset="eth")
    with pytest.raises(InvalidOrder, match="same asset"):
        transfer_reassign(transfer=paid, to_order=eth, actor="operator", reason="wrong order?")
    assert Transfer.objects.get(pk=paid.pk).order_id == a.pk and fresh(a).state == "paid"


def test_the_admin_reassigns_a_transfer_from_the_order_page(admin_client, store):
    a, b, wrong = _pair(store)
    url = reverse("admin:orders_order_reassign_transfer", args=[a.pk, wrong.pk])
    page = admin_client.get(reverse("admin:orders_order_change", args=[a.pk])).content.decode()
    assert url in page
    response = admin_client.post(url, {"to_reference": "AG-NOSUCH22", "reason": "meant for bob"})
    assert response.status_code == 200 and "No order has that reference" in response.content.decode()
    response = admin_client.post(url, {"to_reference": b.reference.lower(), "reason": "meant for bob"})
    assert response.status_code == 302
    assert fresh(b).state == "paid" and Transfer.objects.get(pk=wrong.pk).order_id == b.pk


def test_the_admin_refunds_an_active_order_with_a_written_request(admin_client, store):
    order = shop.activate(shop.place(store))
    url = reverse("admin:orders_order_record_refund", args=[order.pk])
    data = {"scope": "whole", "address": WRITTEN_ADDRESS, "amount": str(order.quote.amount), "network_fee": "0",
            "rate_choice": "quote", "rate": "", "txid": "cd" * 32, "reason": "host fault", "customer_request": "",
            "customer_reason": "not_delivered"}
    response = admin_client.post(url, {**data, "customer_request": "ticket 4411, 1 Dec", "customer_reason": ""})
    assert response.status_code == 200  # the credit note's reason for the customer is the operator's to give
    assert "Choose the reason the credit note gives the customer." in response.content.decode()
    response = admin_client.post(url, data)
    assert response.status_code == 200 and "written request" in response.content.decode()
    response = admin_client.post(url, {**data, "customer_request": "ticket 4411, 1 Dec"})
    assert response.status_code == 302
    order = fresh(order)
    assert order.state == "refunded" and order.booking.state == "released"
    assert "Refund sent" in " ".join(e.text for e in for_order(order))  # BTC is not watched here: as recorded


def test_a_refund_of_part_of_the_price_leaves_the_excess_owed_back(store):
    from anchorgpu.payments.services import owed_back

    order = shop.place(store)
    price = order.quote.amount
    shop.pay(order, amount=price + price // 5)  # a fifth too much
    refund_address_set(order=order, actor=store.username, address=CUSTOMERS_ADDRESS)
    refund(order, amount=price // 10, whole_order=False, of_price=True, customer_reason="fault", reason="goodwill")
    order = fresh(order)
    assert owed_back(order) == price // 5 and order.refund_due  # the excess is still the customer's
    with pytest.raises(InvalidOrder, match="keeps"):
        refund(order, amount=price, whole_order=False, of_price=True, customer_reason="fault", txid="ef" * 32)  # more than the price kept
    refund(order, amount=price // 5, whole_order=False, txid="ab" * 32, reason="the excess")
    order = fresh(order)
    assert owed_back(order) == 0 and not order.refund_due
    assert [n.amount for n in order.invoice.credit_notes.all()] == [Refund.objects.get(of_price=True).fiat_amount]


def test_an_operator_acting_on_a_transfer_that_moved_a_moment_ago_is_told_so(store):
    """Two operators on one transfer: the second one's page still shows the first order."""
    from anchorgpu.payments.observe import transfer_withdraw
    from anchorgpu.payments.transfers import transfer_confirmations_update

    a, b, stale = _pair(store)
    c = shop.place(shop.customer("carol@example.com"))
    transfer_reassign(transfer=stale, to_order=b, actor="first", reason="meant for bob")
    with pytest.raises(NotAllowedNow, match="moved to another order a moment ago"):
        transfer_reassign(transfer=stale, to_order=c, actor="second", reason="meant for carol")
    with pytest.raises(NotAllowedNow, match="moved to another order a moment ago"):
        transfer_confirmations_update(transfer=stale, confirmations=9, actor="second")
    row = transfer_withdraw(transfer=stale, reason="a poll that read it before the move")
    assert row.withdrawn_at is None and Transfer.objects.get(pk=stale.pk).order_id == b.pk
    assert fresh(b).state == "paid" and fresh(c).state == "awaiting_payment"


class _ChainShowing:
    """A watcher stand-in whose node shows one transaction paying the asked address at ``index``."""

    def __init__(self, txid: str, index: int, amount: int):
        self.txid, self.index, self.amount = txid, index, amount

    def lookup(self, txid, address):
        from anchorgpu.chains.base import BlockRef, LookupOutcome, SeenTransfer, TxLookup

        block = BlockRef(number=90, hash="00" * 32)
        return TxLookup(LookupOutcome.FOUND, tip=100, transfers=(SeenTransfer(
            txid=txid, index=self.index, to=address, amount=self.amount, block=block),))


def test_a_transaction_paying_two_orders_is_read_from_the_chain_for_each(store, settings, monkeypatch):
    """An exchange's batch pays two of our addresses in one transaction: each order gets its own output."""
    from anchorgpu.payments import transfers
    from anchorgpu.payments.transfers import transfer_record_from_chain

    first, second = shop.place(store), shop.place(store)
    shop.pay(first)  # output 0, typed before the asset was watched
    monkeypatch.setattr(transfers, "is_watched", lambda asset: True)
    rows = transfer_record_from_chain(order=second, txid=shop.TXID_BTC, actor="carol",
                                      watcher=_ChainShowing(shop.TXID_BTC, 1, second.quote.amount))
    assert [(r.order_id, r.index, r.source) for r in rows] == [(second.pk, 1, Transfer.Source.WATCHER)]
    with pytest.raises(NotAllowedNow, match=f"already credits order {first.reference}"):
        transfer_record_from_chain(order=second, txid=shop.TXID_BTC, actor="carol",
                                   watcher=_ChainShowing(shop.TXID_BTC, 0, first.quote.amount))
    assert invariant_violations() == []


def test_an_absurd_rate_of_the_day_is_refused_not_a_server_error(store):
    order = shop.activate(shop.place(store))
    refund_address_set(order=order, actor=store.username, address=CUSTOMERS_ADDRESS)
    with pytest.raises(InvalidOrder, match="check the rate"):
        refund(order, rate_choice="current", rate=Decimal("9" * 16 + ".5"))
    assert not Refund.objects.exists() and fresh(order).state == "active"
