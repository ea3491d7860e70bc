"""Payment scenarios through the services, on both databases: what a set of
recorded transfers does to an order, its cards and its documents."""

from __future__ import annotations

from datetime import timedelta

import pytest

from anchorgpu.allocation.models import Booking
from anchorgpu.audit.models import AuditEntry
from anchorgpu.billing.models import Invoice
from anchorgpu.orders.errors import InvalidOrder, NotAllowedNow
from anchorgpu.orders.models import Order
from anchorgpu.payments.models import Refund, Transfer
from anchorgpu.payments.refunds import RefundInput, refund_record
from anchorgpu.payments.services import (
    payment_claim,
    payment_mark_invalid,
    payment_mark_paid,
    payment_recheck_capacity,
    refund_address_set,
)
from anchorgpu.payments.transfers import transfer_confirmations_update
from tests import shop

pytestmark = pytest.mark.django_db

REFUND_TO = "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"


@pytest.fixture
def user():
    shop.load_shop()
    return shop.customer()


def fresh(order) -> Order:
    return Order.objects.select_related("booking", "quote").get(pk=order.pk)


def states(order) -> list[str]:
    return list(AuditEntry.objects.filter(object_type="orders.order", object_id=str(order.pk), action="order_state")
                .order_by("at", "id").values_list("to_state", flat=True))


def test_paid_on_time_confirms_the_hold_and_invoices(user):
    order = shop.place(user)
    shop.pay(order)
    order = fresh(order)
    assert order.state == "paid" and order.paid_at is not None
    assert order.booking.kind == Booking.Kind.CONFIRMED
    assert order.invoice.crypto_amount == order.quote.amount and order.invoice.total == order.fiat_total
    assert states(order) == ["paid"]


def test_unconfirmed_transfer_waits_then_pays(user):
    order = shop.place(user)
    transfer = shop.pay(order, confirmations=0)
    assert fresh(order).state == "awaiting_payment"
    transfer_confirmations_update(transfer=transfer, confirmations=2, actor="operator")
    assert fresh(order).state == "paid"
    with pytest.raises(InvalidOrder):
        transfer_confirmations_update(transfer=transfer, confirmations=1, actor="operator")


def test_underpaid_then_topped_up(user):
    order = shop.place(user)
    amount = order.quote.amount
    shop.pay(order, amount=amount // 2, index=0)
    order = fresh(order)
    assert order.state == "underpaid" and order.booking.kind == Booking.Kind.HOLD
    shop.pay(order, amount=amount - amount // 2, txid=shop.txid("btc", 1))
    order = fresh(order)
    assert order.state == "paid" and order.booking.kind == Booking.Kind.CONFIRMED
    assert order.invoice.crypto_amount == amount
    assert states(order) == ["underpaid", "paid"]


def test_within_tolerance_counts_as_paid(user):
    order = shop.place(user)
    quote = order.quote
    assert quote.tolerance > 0  # the demo BTC asset allows 0.2 %
    shop.pay(order, amount=quote.amount - quote.tolerance)
    assert fresh(order).state == "paid"


def test_overpaid_is_paid_and_the_excess_noted_for_refund(user):
    order = shop.place(user)
    shop.pay(order, amount=order.quote.amount + 5_000)
    order = fresh(order)
    assert order.state == "paid" and order.refund_due
    assert order.excess == {"units": "5000", "asset": "btc"}
    assert AuditEntry.objects.filter(object_id=str(order.pk), action="payment_overpaid").exists()
    refund_address_set(order=order, actor=user.username, address=REFUND_TO)
    refund = refund_record(order=order, actor="operator", refund=RefundInput(address=REFUND_TO, 
        amount=5_000, rate_choice=Refund.RateChoice.QUOTE, txid="cd" * 32, reason="overpayment returned",
        whole_order=False))
    order = fresh(order)
    assert order.state == "paid" and not order.refund_due  # the order itself stands
    assert refund.address == REFUND_TO and refund.rate == order.quote.rate
    assert not order.invoice.credit_notes.exists()


def test_paid_after_expiry_with_capacity_still_free(user):
    order = shop.place(user)
    quote = order.quote
    late = quote.expires_at + timedelta(minutes=30)
    shop.pay(order, seen_at=late, now=late)
    order = fresh(order)
    assert order.state == "paid"
    assert states(order) == ["paid_late", "paid"]
    assert order.booking.kind == Booking.Kind.CONFIRMED and order.booking.state == Booking.State.LIVE
    assert order.invoice is not None


def test_paid_after_expiry_with_capacity_gone_goes_to_refund(user):
    order = shop.place(user, product="h200-141gb", quantity=16, term_days=7)
    late = order.quote.expires_at + timedelta(minutes=1)
    # Meanwhile the hold ran out and another customer took every H200 for that time.
    other = shop.order_for_all_h200(shop.customer("bob@example.com"), now=late)
    shop.pay(order, seen_at=late, now=late + timedelta(minutes=1))
    order = fresh(order)
    assert order.state == "paid_late" and order.refund_due
    assert not hasattr(order, "invoice") or not Order.objects.filter(pk=order.pk, invoice__isnull=False).exists()
    assert other.booking.state == Booking.State.LIVE
    with pytest.raises(NotAllowedNow):  # no refund before the customer gives an address
        refund_record(order=order, actor="operator", refund=RefundInput(address=REFUND_TO, 
            amount=order.quote.amount, rate_choice="quote", txid="ef" * 32, reason="no capacity", whole_order=True, customer_reason="refund"))
    refund_address_set(order=order, actor=user.username, address=REFUND_TO)
    refund_record(order=order, actor="operator", refund=RefundInput(address=REFUND_TO, 
        amount=order.quote.amount, rate_choice="quote", txid="ef" * 32, reason="no capacity", whole_order=True, customer_reason="refund"))
    order = fresh(order)
    assert order.state == "refunded" and not order.refund_due
    assert states(order)[-1] == "refunded"


def test_a_late_payment_whose_cards_were_taken_is_told_as_a_refund_not_as_more_than_the_quote(user):
    from anchorgpu.orders import admin_panels
    from anchorgpu.web.timeline import for_order

    order = shop.place(user, product="h200-141gb", quantity=16, term_days=7)
    late = order.quote.expires_at + timedelta(minutes=1)
    shop.order_for_all_h200(shop.customer("bob@example.com"), now=late)
    shop.pay(order, seen_at=late, now=late + timedelta(minutes=1))
    order = fresh(order)
    assert order.state == "paid_late" and order.refund_due
    texts = [event.text for event in for_order(order)]
    assert not any("More than the quote arrived" in text for text in texts), texts
    assert any(text.startswith("Your payment of ") and "arrived after the quote expired, when the cards were no "
               "longer free: all of it will be refunded to you." in text for text in texts), texts
    assert "cards were gone" in admin_panels.to_do(order, admin_panels.payment_summary(order))
    # Money on top of a paid order is still "more than the quote".
    paid = shop.place(user)
    shop.pay(paid, amount=paid.quote.amount + 1000, txid=shop.txid("btc", 5))
    texts = [event.text for event in for_order(fresh(paid))]
    assert any(text.startswith("More than the quote arrived: ") for text in texts), texts


def test_money_arriving_after_a_refund_is_told_as_arriving_after_the_order_ended(user):
    from anchorgpu.orders import admin_panels
    from anchorgpu.web.timeline import for_order

    order = shop.place(user)
    shop.pay(order)
    refund_address_set(order=order, actor=user.username, address=REFUND_TO)
    refund_record(order=order, actor="operator", refund=RefundInput(address=REFUND_TO, amount=order.quote.amount,
                  rate_choice="quote", txid="ef" * 32, reason="customer asked", whole_order=True,
                  customer_reason="refund"))
    assert fresh(order).state == "refunded"
    shop.pay(order, amount=5000, txid=shop.txid("btc", 6))
    order = fresh(order)
    texts = [event.text for event in for_order(order)]
    assert any("arrived after the order had ended: it will be refunded to you." in text for text in texts), texts
    assert not any("More than the quote arrived" in text for text in texts), texts
    assert "arrived after the order had ended: refund it." in admin_panels.to_do(order,
                                                                                admin_panels.payment_summary(order))


def test_recheck_capacity_after_the_cards_free_up(user):
    order = shop.place(user, product="h200-141gb", quantity=16, term_days=7)
    late = order.quote.expires_at + timedelta(minutes=1)
    other = shop.order_for_all_h200(shop.customer("bob@example.com"), now=late)
    shop.pay(order, seen_at=late, now=late)
    assert fresh(order).state == "paid_late"
    from anchorgpu.orders.services import order_cancel
    order_cancel(order=other, actor="bob@example.com")
    payment_recheck_capacity(order=order, actor="operator", now=late + timedelta(minutes=2))
    order = fresh(order)
    assert order.state == "paid" and order.booking.kind == Booking.Kind.CONFIRMED


def test_a_transfer_recorded_twice(user):
    order = shop.place(user)
    second = shop.place(user)
    shop.pay(order, amount=1_000)
    with pytest.raises(NotAllowedNow, match=f"already credited to {order.reference}"):
        shop.pay(order, amount=1_000)
    with pytest.raises(NotAllowedNow, match=f"already credited to {order.reference}") as refused:
        shop.pay(second, amount=1_000)  # same (chain, txid, index) for another order
    assert "index" not in str(refused.value)  # nothing invites typing the same transaction with another index
    assert Transfer.objects.count() == 1


@pytest.mark.parametrize("index", [0, 1, 3, 7])
def test_one_transaction_credits_one_order_at_any_index(user, index):
    """The same transaction typed for a second order is refused at every index, and for the first order too
    (one transaction, one credit) -- unless the operator states which output pays which order."""
    order, second = shop.place(user), shop.place(user)
    shop.pay(order)
    for target in (second, order):
        if target is order and index == 0:
            continue  # the very same transfer again: refused above at index 0 as well
        with pytest.raises(NotAllowedNow, match="already credited"):
            shop.pay(target, index=index)
    assert list(Transfer.objects.values_list("order", flat=True)) == [order.pk]
    assert fresh(second).state == "awaiting_payment" and not Invoice.objects.filter(order=second).exists()
    if index == 0:
        return
    statement = f"Output {index} pays {second.quote.address} (order {second.reference}); output 0 pays the first."
    row = shop.pay(second, index=index, shared_statement=statement)
    assert row.shared_statement == statement and fresh(second).state == "paid"
    entry = AuditEntry.objects.get(object_id=str(second.pk), action="transfer_record")
    assert entry.data["shared_statement"] == statement and entry.actor == "operator"


def test_transfer_input_is_checked(user):
    order = shop.place(user)
    with pytest.raises(InvalidOrder, match="Bitcoin transaction id"):
        shop.pay(order, txid="0x" + "ab" * 32)
    with pytest.raises(InvalidOrder, match="positive"):
        shop.pay(order, amount=0)
    with pytest.raises(InvalidOrder, match="future"):
        from django.utils import timezone
        shop.pay(order, seen_at=timezone.now() + timedelta(hours=3))
    assert not Transfer.objects.exists() and fresh(order).state == "awaiting_payment"


def test_claim_marked_invalid_goes_back_to_waiting_with_a_reason(user):
    order = shop.place(user)
    payment_claim(order=order, actor=user.username, txid="ab" * 32)
    told = "No transfer with this transaction id reaches your order's address."
    with pytest.raises(InvalidOrder, match="Say why"):
        payment_mark_invalid(order=order, actor="operator", reason="  ", customer_reason=told)
    with pytest.raises(InvalidOrder, match="Say what to tell the customer"):
        payment_mark_invalid(order=order, actor="operator", reason="no such transaction", customer_reason=" ")
    assert fresh(order).state == "payment_claimed"
    payment_mark_invalid(order=order, actor="operator", reason="no such transaction on chain", customer_reason=told)
    order = fresh(order)
    assert order.state == "awaiting_payment" and order.claimed_txid == ""
    entry = AuditEntry.objects.filter(object_id=str(order.pk), action="order_state").latest("id")
    assert entry.actor == "operator" and "no such transaction" in entry.reason and entry.data["claimed_txid"]
    assert entry.data["customer_reason"] == told
    email = order.emails.filter(kind="state_changed", state="awaiting_payment").get()
    assert email.note == told  # the customer's words, not the operators' reason


def test_mark_paid_by_hand_needs_a_reason_and_is_audited(user):
    order = shop.place(user)
    shop.pay(order, amount=order.quote.amount - 100_000)  # an exchange took a fee
    assert fresh(order).state == "underpaid"
    with pytest.raises(InvalidOrder):
        payment_mark_paid(order=order, actor="operator", reason="")
    payment_mark_paid(order=order, actor="operator", reason="exchange fee, customer confirmed by email")
    order = fresh(order)
    assert order.state == "paid"
    assert AuditEntry.objects.filter(object_id=str(order.pk), action="payment_mark_paid", actor="operator",
                                     reason__contains="exchange fee").exists()
    with pytest.raises(NotAllowedNow):
        payment_mark_paid(order=order, actor="operator", reason="again")


def test_refund_address_rules(user):
    order = shop.place(user)
    with pytest.raises(InvalidOrder, match="deposit address"):
        refund_address_set(order=order, actor=user.username, address=order.quote.address)
    with pytest.raises(InvalidOrder):
        refund_address_set(order=order, actor=user.username, address="0x9858EfFD232B4033E47d90003D41EC34EcaEda94")
    shop.pay(order, amount=1_000)
    Transfer.objects.filter(order=order).update(sender=REFUND_TO)
    with pytest.raises(InvalidOrder, match="never sent back"):
        refund_address_set(order=order, actor=user.username, address=REFUND_TO)


def test_refund_cannot_exceed_what_arrived(user):
    order = shop.place(user)
    shop.pay(order, amount=1_000)
    refund_address_set(order=order, actor=user.username, address=REFUND_TO)
    with pytest.raises(InvalidOrder, match="more than was received"):
        refund_record(order=order, actor="operator", refund=RefundInput(address=REFUND_TO, 
            amount=1_001, rate_choice="quote", txid="cd" * 32, reason="r", whole_order=True, customer_reason="refund"))
    refund_record(order=order, actor="operator", refund=RefundInput(address=REFUND_TO, 
        amount=1_000, rate_choice="current", rate=order.quote.rate * 2, txid="cd" * 32, reason="r", whole_order=True, customer_reason="refund"))
    order = fresh(order)
    assert order.state == "refunded" and order.booking.state == Booking.State.RELEASED
    assert order.refunds.get().fiat_amount > 0


def test_money_sent_to_a_cancelled_order_is_owed_back(user):
    from anchorgpu.orders.services import order_cancel
    order = shop.place(user)
    order_cancel(order=order, actor=user.username)
    shop.pay(order, amount=1_234)
    order = fresh(order)
    assert order.state == "cancelled" and order.refund_due and order.excess["units"] == "1234"
    refund_address_set(order=order, actor=user.username, address=REFUND_TO)
    refund_record(order=order, actor="operator", refund=RefundInput(address=REFUND_TO, 
        amount=1_234, rate_choice="quote", txid="cd" * 32, reason="sent to a cancelled order", whole_order=False))
    order = fresh(order)
    assert not order.refund_due and order.excess == {}


def test_mark_paid_needs_money_received(user):
    order = shop.place(user)
    with pytest.raises(NotAllowedNow, match="record the transfer first"):
        payment_mark_paid(order=order, actor="operator", reason="customer says so")
    assert fresh(order).state == "awaiting_payment"


def test_excess_refunds_are_capped_and_partial_ones_keep_the_flag(user):
    order = shop.place(user)
    shop.pay(order, amount=order.quote.amount + 1_000)
    refund_address_set(order=order, actor=user.username, address=REFUND_TO)
    with pytest.raises(InvalidOrder, match="owed back"):
        refund_record(order=order, actor="operator", refund=RefundInput(address=REFUND_TO, 
            amount=1_001, rate_choice="quote", txid="cd" * 32, reason="r", whole_order=False))
    refund_record(order=order, actor="operator", refund=RefundInput(address=REFUND_TO, 
        amount=400, rate_choice="quote", txid="cd" * 32, reason="first part", whole_order=False))
    order = fresh(order)
    assert order.refund_due and order.excess["units"] == "600"
    shop.pay(order, amount=50, txid=shop.txid("btc", 1))  # a late extra transfer adds to what is owed
    assert fresh(order).excess["units"] == "650"


def test_underpaid_order_has_no_excess_to_refund(user):
    order = shop.place(user)
    shop.pay(order, amount=1_000)
    refund_address_set(order=order, actor=user.username, address=REFUND_TO)
    with pytest.raises(InvalidOrder, match="owed back"):
        refund_record(order=order, actor="operator", refund=RefundInput(address=REFUND_TO, 
            amount=10, rate_choice="quote", txid="cd" * 32, reason="r", whole_order=False))


def test_a_late_payment_is_refunded_whole_and_cannot_then_be_paid(user):
    order = shop.place(user, product="h200-141gb", quantity=16, term_days=7)
    late = order.quote.expires_at + timedelta(minutes=1)
    other = shop.order_for_all_h200(shop.customer("bob@example.com"), now=late)
    shop.pay(order, seen_at=late, now=late)
    refund_address_set(order=order, actor=user.username, address=REFUND_TO)
    with pytest.raises(InvalidOrder, match="refunded as a whole"):
        refund_record(order=order, actor="operator", refund=RefundInput(
            address=REFUND_TO, amount=order.quote.amount, rate_choice="quote", txid="ef" * 32, reason="r",
            whole_order=False))
    refund_record(order=order, actor="operator", refund=RefundInput(
        address=REFUND_TO, amount=order.quote.amount - 300, network_fee=300, rate_choice="quote", txid="ef" * 32,
        reason="no capacity", whole_order=True, customer_reason="refund"))
    order = fresh(order)
    assert order.state == "refunded" and not order.refund_due and order.excess == {}
    from anchorgpu.orders.services import order_cancel
    order_cancel(order=other, actor="bob@example.com")  # the cards free up after the refund
    with pytest.raises(NotAllowedNow):
        payment_recheck_capacity(order=order, actor="operator")
    with pytest.raises(NotAllowedNow):
        payment_mark_paid(order=order, actor="operator", reason="r")


def test_an_on_time_transfer_still_confirming_keeps_the_cards(user):
    from anchorgpu.orders.lifecycle import orders_expire_due
    order = shop.place(user, product="h200-141gb", quantity=16, term_days=7)
    quote = order.quote
    transfer = shop.pay(order, confirmations=0, seen_at=quote.expires_at - timedelta(minutes=2),
                        now=quote.expires_at - timedelta(minutes=1))
    assert fresh(order).booking.expires_at > quote.expires_at  # the hold was extended
    after = quote.expires_at + timedelta(minutes=30)
    assert orders_expire_due(now=after) == 0
    from anchorgpu.orders.errors import Unavailable
    with pytest.raises(Unavailable):  # the cards are still held: nobody else gets them for that time
        shop.place(shop.customer("bob@example.com"), product="h200-141gb", quantity=16, term_days=7,
                   start=after + timedelta(hours=1), now=after)
    transfer_confirmations_update(transfer=transfer, confirmations=2, actor="operator", now=after)
    order = fresh(order)
    assert order.state == "paid" and order.booking.kind == Booking.Kind.CONFIRMED


def test_a_refund_never_goes_to_a_sender_even_one_recorded_later(user):
    order = shop.place(user)
    shop.pay(order, amount=order.quote.amount + 500)
    refund_address_set(order=order, actor=user.username, address=REFUND_TO)
    Transfer.objects.filter(order=order).update(sender=REFUND_TO)  # the explorer shows where it came from
    with pytest.raises(InvalidOrder, match="sender"):
        refund_record(order=order, actor="operator", refund=RefundInput(
            address=REFUND_TO, amount=500, rate_choice="quote", txid="cd" * 32, reason="r", whole_order=False))
    with pytest.raises(InvalidOrder, match="not the refund address"):
        refund_record(order=order, actor="operator", refund=RefundInput(
            address="3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy", amount=500, rate_choice="quote", txid="cd" * 32,
            reason="r", whole_order=False))
    assert not Refund.objects.exists()


def test_money_confirmed_after_a_whole_refund_is_owed_back(user):
    order = shop.place(user)
    quarter = order.quote.amount // 4
    shop.pay(order, amount=quarter, index=0)
    late_one = shop.pay(order, amount=quarter, txid=shop.txid("btc", 1), confirmations=0)
    assert fresh(order).state == "underpaid"
    refund_address_set(order=order, actor=user.username, address=REFUND_TO)
    refund_record(order=order, actor="operator", refund=RefundInput(
        address=REFUND_TO, amount=quarter, rate_choice="quote", txid="cd" * 32, reason="gave up", whole_order=True, customer_reason="refund"))
    assert fresh(order).state == "refunded" and not fresh(order).refund_due
    transfer_confirmations_update(transfer=late_one, confirmations=3, actor="operator")
    order = fresh(order)
    assert order.refund_due and order.excess["units"] == str(quarter)


def test_quotes_to_the_public_test_keys_are_refused_unless_allowed(user, settings):
    from anchorgpu.orders.errors import Unavailable
    from anchorgpu.payments.models import Quote

    settings.ANCHORGPU_ALLOW_TEST_KEYS = False
    with pytest.raises(Unavailable, match="not set up"):
        shop.place(user)
    assert not Order.objects.exists() and not Quote.objects.exists() and not Booking.objects.exists()
