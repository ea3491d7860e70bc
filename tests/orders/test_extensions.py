"""Extending a paid term on the same cards (``orders.extensions``): held, paid, late, expired, refused, and the
"until when" answer. Both databases."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from anchorgpu.allocation.models import Booking, BookingDevice
from anchorgpu.audit.models import AuditEntry
from anchorgpu.billing.models import Invoice
from anchorgpu.orders import extension_options
from anchorgpu.orders.errors import InvalidOrder, NotAllowedNow, Unavailable
from anchorgpu.orders.extensions import extension_price, order_extend, paid_segments, refusal_text
from anchorgpu.orders.invariants import invariant_violations
from anchorgpu.orders.lifecycle import orders_expire_due, terms_end_due
from anchorgpu.orders.models import Order, OrderEmail
from anchorgpu.payments.models import Asset
from anchorgpu.payments.services import payment_mark_paid
from tests import shop

HOUR, SECOND = timedelta(hours=1), timedelta(seconds=1)


@pytest.fixture
def shop_db(db):
    shop.load_shop()


def fresh(order: Order) -> Order:
    return Order.objects.select_related("booking", "quote__asset", "extends").get(pk=order.pk)


def btc() -> Asset:
    return Asset.objects.get(code="btc")


def devices(order: Order) -> list[int]:
    return sorted(order.booking.slots.values_list("device_id", flat=True))


def running(user=None, n: int = 0, **kw) -> Order:
    """An active term, paid by made-up transaction ``n``."""
    from anchorgpu.orders.fulfilment import provision_due

    order = shop.place(user or shop.customer(), **kw)
    shop.pay(order, txid=shop.txid("btc", n))
    provision_due()
    order = fresh(order)
    assert order.state == "active", order.state
    return order


def extend(order: Order, days: int = 3, **kw) -> Order:
    return order_extend(order=order, days=days, actor=order.user.get_username(), asset=btc(), **kw)


def pay_extension(ext: Order, n: int = 1, **kw):
    return shop.pay(ext, txid=shop.txid("btc", n), **kw)


def test_an_extension_holds_the_same_cards_right_after_the_term_at_the_current_price(shop_db):
    order = running()
    ext = extend(order, 7)
    ext = fresh(ext)
    assert ext.extends == order and ext.state == "awaiting_payment" and ext.term_days == 7
    assert (ext.starts_at, ext.ends_at) == (order.ends_at, order.ends_at + timedelta(days=7))
    assert ext.booking.kind == Booking.Kind.HOLD and devices(ext) == devices(order)
    assert (ext.booking.starts_at, ext.booking.ends_at) == (ext.starts_at, ext.ends_at)
    price = extension_price(order=order, days=7)
    assert ext.fiat_total == price.total and ext.quote.fiat_total == price.total
    assert any(line["kind"] == "discount" for line in ext.lines)  # the 7-day discount of the price list
    assert ext.quote.address != order.quote.address
    assert OrderEmail.objects.filter(order=ext, kind=OrderEmail.Kind.ORDER_PLACED).exists()
    found = extension_options.extension_options(fresh(order))
    assert found.refusal == extension_options.PENDING and found.pending == ext
    with pytest.raises(NotAllowedNow):
        extend(fresh(order), 3)  # one at a time


def test_a_paid_extension_lengthens_the_booking_and_the_term_and_has_its_own_invoice(shop_db):
    order = running()
    end, booking = order.ends_at, order.booking
    ext = extend(order, 3)
    pay_extension(ext)
    ext, order = fresh(ext), fresh(order)
    assert ext.state == "completed" and ext.state_label == f"added to order {order.reference}"
    assert ext.booking.state == Booking.State.RELEASED
    assert not ext.booking.slots.filter(live=True).exists()
    assert order.state == "active" and order.booking_id == booking.pk
    assert order.ends_at == end + timedelta(days=3) and order.extended_days == 3 and order.total_days == 6
    assert order.booking.ends_at == order.ends_at
    assert set(order.booking.slots.values_list("ends_at", flat=True)) == {order.ends_at}
    invoice = Invoice.objects.get(order=ext)
    assert invoice.total == ext.fiat_total and invoice != Invoice.objects.get(order=order)
    line = invoice.lines.first()
    assert (line.period_start, line.period_end) == (end, end + timedelta(days=3))
    assert AuditEntry.objects.filter(action="order_extended", object_id=str(order.pk)).exists()
    assert not OrderEmail.objects.filter(order=ext, kind=OrderEmail.Kind.STATE_CHANGED, state="paid").exists()
    assert OrderEmail.objects.filter(order=ext, kind=OrderEmail.Kind.STATE_CHANGED, state="completed").exists()
    assert invariant_violations() == []
    segments = paid_segments(order)
    assert [(s, e) for s, e, _ in segments] == [(order.starts_at, end), (end, end + timedelta(days=3))]
    assert [i.order_id for _, _, i in segments] == [order.pk, ext.pk]

    # The term now ends at the new end, not the old one.
    assert terms_end_due(now=end + HOUR) == 0 and fresh(order).state == "active"
    assert terms_end_due(now=order.ends_at) == 1
    assert fresh(order).state == "completed"


def test_two_extensions_in_a_row_add_up(shop_db):
    order = running()
    end = order.ends_at
    pay_extension(extend(order, 3), 1)
    pay_extension(extend(fresh(order), 7), 2)
    order = fresh(order)
    assert order.ends_at == end + timedelta(days=10) and order.booking.ends_at == order.ends_at
    assert [e - s for s, e, _ in paid_segments(order)] == [timedelta(days=3), timedelta(days=3), timedelta(days=7)]
    assert invariant_violations() == []


def test_an_unpaid_extension_expires_and_releases_its_hold_the_order_unchanged(shop_db):
    order = running()
    ext = extend(order, 3)
    assert orders_expire_due(now=ext.quote.expires_at) == 1
    ext, after = fresh(ext), fresh(order)
    assert ext.state == "expired" and ext.booking.state == Booking.State.RELEASED
    assert (after.ends_at, after.extended_days, after.booking.ends_at) == (order.ends_at, 0, order.booking.ends_at)
    assert extension_options.extension_options(after).days == (3, 7, 30)


def test_paid_late_with_the_cards_still_free_is_applied(shop_db):
    order = running()
    ext = extend(order, 3)
    late = ext.quote.expires_at + HOUR
    orders_expire_due(now=ext.quote.expires_at)
    pay_extension(ext, seen_at=late - 5 * 60 * SECOND, now=late)
    ext, order2 = fresh(ext), fresh(order)
    assert ext.state == "completed"
    assert order2.ends_at == order.ends_at + timedelta(days=3) and order2.booking.ends_at == order2.ends_at
    assert Invoice.objects.filter(order=ext).exists()


def test_paid_late_with_the_cards_taken_goes_to_the_refund_queue(shop_db):
    order = running(product="h200-141gb", quantity=16)
    ext = extend(order, 3)
    orders_expire_due(now=ext.quote.expires_at)
    # Another customer books all the cards from the term's end meanwhile.
    taken = shop.place(shop.customer("bob@example.com"), product="h200-141gb", quantity=16, start=order.ends_at)
    shop.pay(taken, txid=shop.txid("btc", 9))
    assert fresh(taken).state == "paid"
    late = ext.quote.expires_at + HOUR
    pay_extension(ext, seen_at=late - 5 * 60 * SECOND, now=late)
    ext, after = fresh(ext), fresh(order)
    assert ext.state == "paid_late" and ext.refund_due
    assert after.ends_at == order.ends_at and after.extended_days == 0
    assert not Invoice.objects.filter(order=ext).exists()
    with pytest.raises(NotAllowedNow):
        from anchorgpu.payments.services import payment_take_earliest_start
        payment_take_earliest_start(order=ext, actor="alice@example.com")


def test_paid_after_the_order_ended_is_refunded(shop_db):
    from anchorgpu.payments.services import payment_claim

    order = running()
    ext = extend(order, 3)
    payment_claim(order=ext, actor="alice@example.com")  # "I've paid": it stays for its transfer
    terms_end_due(now=order.ends_at)
    assert fresh(order).state == "completed" and fresh(ext).state == "payment_claimed"
    pay_extension(ext, seen_at=ext.quote.created_at + 60 * SECOND)
    ext = fresh(ext)
    assert ext.state == "paid_late" and ext.refund_due


def test_an_operator_mark_paid_applies_it(shop_db):
    order = running()
    ext = extend(order, 3)
    pay_extension(ext, amount=ext.quote.amount - ext.quote.tolerance - 1)
    assert fresh(ext).state == "underpaid"
    payment_mark_paid(order=fresh(ext), actor="operator", reason="exchange fee")
    assert fresh(ext).state == "completed"
    assert fresh(order).ends_at == order.ends_at + timedelta(days=3)


def test_refused_when_the_next_booking_starts_at_the_terms_end(shop_db):
    order = running(product="h200-141gb", quantity=16)
    shop.place(shop.customer("bob@example.com"), product="h200-141gb", quantity=16, start=order.ends_at)
    found = extension_options.extension_options(fresh(order))
    assert found.days == () and found.refusal == extension_options.BOOKED_AT_END
    assert "cards are booked from" in refusal_text(found)
    with pytest.raises(Unavailable) as refused:
        extend(fresh(order), 3)
    assert refused.value.code == extension_options.BOOKED_AT_END
    assert invariant_violations() == []


def test_until_when_it_can_be_extended(shop_db):
    order = running(product="h200-141gb", quantity=16)
    shop.place(shop.customer("bob@example.com"), product="h200-141gb", quantity=16,
               start=order.ends_at + timedelta(days=5))
    found = extension_options.extension_options(fresh(order))
    assert found.days == (3,) and found.free_until == order.ends_at + timedelta(days=5)
    assert "only until" in refusal_text(found) or "can be extended by 3" in refusal_text(found)
    with pytest.raises(Unavailable):
        extend(fresh(order), 7)
    shop.place(shop.customer("carol@example.com"), product="h200-141gb", quantity=16,
               start=order.ends_at + timedelta(days=1))
    found = extension_options.extension_options(fresh(order))
    assert found.refusal == extension_options.TOO_SHORT and found.free_until == order.ends_at + timedelta(days=1)
    assert "only until" in refusal_text(found)


def test_refused_for_a_completed_or_unpaid_order_or_bad_days(shop_db):
    order = running()
    with pytest.raises(InvalidOrder):
        extend(order, 5)
    unpaid = shop.place(shop.customer("bob@example.com"))
    with pytest.raises(NotAllowedNow):
        extend(unpaid, 3)
    terms_end_due(now=order.ends_at)
    with pytest.raises(NotAllowedNow) as refused:
        extend(fresh(order), 3)
    assert "has not ended" in refused.value.message
    ext = extend(running(shop.customer("carol@example.com"), n=7, product="a100-sxm-80gb"), 3)
    with pytest.raises(NotAllowedNow):
        extend(ext, 3)  # an extension is not extended itself


def test_a_paid_upcoming_order_can_be_extended_before_access(shop_db):
    start = (timezone.now() + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    order = shop.place(shop.customer(), start=start)
    shop.pay(order)
    order = fresh(order)
    assert order.state == "paid"
    pay_extension(extend(order, 30))
    order = fresh(order)
    assert order.ends_at == start + timedelta(days=33) and order.booking.ends_at == order.ends_at
    assert invariant_violations() == []


def test_an_extension_is_never_provisioned_or_ended_as_a_term(shop_db):
    from anchorgpu.orders.fulfilment import provision_due

    order = running()
    ext = extend(order, 3)
    pay_extension(ext)
    assert provision_due(now=fresh(ext).starts_at) == 0
    assert not fresh(ext).steps.exists()
    assert BookingDevice.objects.filter(booking__order=fresh(order), live=True).count() == 1
    assert Decimal(fresh(ext).fiat_total) > 0


def test_the_admin_shows_the_extensions_and_the_order_extended(shop_db, admin_client):
    from django.urls import reverse

    order = running()
    ext = extend(order, 3)
    pay_extension(ext)
    page = admin_client.get(reverse("admin:orders_order_change", args=[order.pk])).content.decode()
    assert ext.reference in page and Invoice.objects.get(order=ext).number in page
    page = admin_client.get(reverse("admin:orders_order_change", args=[ext.pk])).content.decode()
    assert order.reference in page and f"added to order {order.reference}" in page


def test_an_as_soon_as_possible_term_extended_before_access_slides_with_its_new_length(shop_db):
    from anchorgpu.orders.fulfilment import provision_due

    order = shop.place(shop.customer())  # as soon as possible: its cards held past the term for access
    shop.pay(order)
    order = fresh(order)
    assert order.state == "paid" and order.start_asap and order.booking.ends_at > order.ends_at
    ext = extend(order, 3)
    assert fresh(ext).starts_at == order.booking.ends_at  # right after the cards the term holds
    pay_extension(ext)
    order = fresh(order)
    assert order.total_days == 6 and order.ends_at - order.starts_at == timedelta(days=6)
    provision_due(now=order.starts_at + 60 * SECOND)
    order = fresh(order)
    assert order.state == "active" and order.ends_at - order.starts_at == timedelta(days=6)
    assert order.starts_at >= order.booking.starts_at and order.ends_at <= order.booking.ends_at
    assert invariant_violations() == []


def test_an_extension_follows_its_term_to_other_cards(shop_db):
    """If the term was moved to other cards while its extension waited for payment (``booking_move``), the
    extension is held again on the new cards when paid, if they are free (here the move is simulated by
    pointing the extension's hold at other free cards)."""
    from anchorgpu.allocation import services as allocation

    order = running()
    ext = extend(order, 3)
    other = allocation.hold_place(product=ext.product, quantity=1, start=ext.starts_at, term_days=3,
                                  reference="elsewhere")
    assert devices(Order(booking=other)) != devices(order)
    allocation.booking_release(booking=ext.booking, actor="test", reason="test", for_order=True)
    Order.objects.filter(pk=ext.pk).update(booking=other)
    pay_extension(fresh(ext))
    ext, order2 = fresh(ext), fresh(order)
    assert ext.state == "completed" and order2.ends_at == order.ends_at + timedelta(days=3)
    assert fresh(ext).booking.pk != other.pk and Booking.objects.get(pk=other.pk).state == Booking.State.RELEASED
    assert invariant_violations() == []


def test_an_unpaid_extension_is_cancelled_when_its_term_ends(shop_db):
    order = running()
    ext = extend(order, 3)
    assert terms_end_due(now=order.ends_at) == 1
    ext = fresh(ext)
    assert ext.state == "cancelled" and ext.booking.state == Booking.State.RELEASED
    pay_extension(ext)  # money sent anyway is owed back
    assert fresh(ext).refund_due


def test_a_term_refunded_whole_takes_its_paid_extension_with_it_and_owes_that_money_back(shop_db):
    """The extension's days went with the term's booking: its invoice is credited whole and its money is owed
    back on its own order, in its own asset, until the operator records that refund."""
    from anchorgpu.payments.refunds import RefundInput, refund_record
    from anchorgpu.payments.services import owed_back

    address = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"
    order = running()
    ext = extend(order, 3)
    pay_extension(ext)
    ext, order = fresh(ext), fresh(order)
    assert ext.state == "completed" and owed_back(ext) == 0 and not ext.refund_due

    def refund(target, *, whole: bool):
        return refund_record(order=target, actor="operator", refund=RefundInput(
            address=address, amount=target.quote.amount, rate_choice="quote", txid=f"ab{target.pk:062x}",
            reason="the host died", whole_order=whole, customer_reason="refund"))

    for target in (order, ext):
        from anchorgpu.payments.services import refund_address_set
        refund_address_set(order=target, actor=target.user.get_username(), address=address)
    refund(fresh(order), whole=True)
    order, ext = fresh(order), fresh(ext)
    assert order.state == "refunded"
    invoice = Invoice.objects.get(order=ext)
    notes = list(invoice.credit_notes.all())
    assert sum(n.amount for n in notes) == invoice.total and all(n.refund_id is None for n in notes)
    assert ext.refund_due and owed_back(ext) == ext.quote.amount
    # The operator pays it back as money owed back; nothing more is owed after that.
    refund(ext, whole=False)
    ext = fresh(ext)
    assert owed_back(ext) == 0 and not ext.refund_due
    assert invariant_violations() == []
