"""No paid time lost to the payment window (issue 20, item 4).

An as-soon-as-possible order holds its cards past the term for the payment window and access preparation,
and its term starts when access is ready: paid late or early, the customer gets the whole term from then.
A dated order keeps its date. When the cards are not free for the slid term, the term keeps its length and
the order says so; when they were taken altogether, a late payment can take the earliest free start.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from anchorgpu.allocation.models import Booking
from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.errors import NotAllowedNow
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.invariants import invariant_violations
from anchorgpu.orders.lifecycle import terms_end_due
from anchorgpu.orders.models import Order
from anchorgpu.orders.transitions import order_lock
from anchorgpu.payments.models import PaymentSettings, Transfer
from anchorgpu.payments.services import payment_apply, payment_claim, payment_take_earliest_start
from tests import shop

pytestmark = pytest.mark.django_db

MINUTE, HOUR, DAY = timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)
REACH = 150 * MINUTE  # the demo's quote (60 min) + grace after "I've paid" (60) + access preparation (30)


def fresh(order) -> Order:
    return Order.objects.select_related("booking").get(pk=order.pk)


@pytest.fixture
def t0():
    shop.load_shop()
    return timezone.now().replace(microsecond=0)


def test_an_asap_order_holds_its_cards_past_the_term_for_payment_and_preparation(t0):
    order = fresh(shop.place(shop.customer(), now=t0, term_days=7))
    assert order.start_asap
    assert (order.starts_at, order.ends_at) == (t0, t0 + 7 * DAY)  # at the earliest; it slides later
    assert (order.booking.starts_at, order.booking.ends_at) == (t0, t0 + 7 * DAY + REACH)
    assert set(order.booking.slots.values_list("starts_at", "ends_at")) == {(t0, t0 + 7 * DAY + REACH)}


def test_paid_late_in_the_window_the_term_starts_when_access_is_ready(t0):
    """The issue's walk: ordered at 18:51, confirmations until 19:08, access ready at 19:10: 7 whole days
    from 19:10, not from 18:51."""
    order = shop.place(shop.customer(), now=t0, term_days=7)
    shop.pay(order, now=t0 + 17 * MINUTE, seen_at=t0 + 5 * MINUTE)
    paid = fresh(order)
    assert paid.state == "paid"
    assert (paid.starts_at, paid.ends_at) == (t0 + 17 * MINUTE, t0 + 17 * MINUTE + 7 * DAY)  # provisional
    assert paid.booking.kind == "confirmed" and paid.booking.ends_at >= paid.ends_at + 30 * MINUTE

    provision_due(now=t0 + 19 * MINUTE)
    active = fresh(order)
    assert active.state == "active"
    assert (active.starts_at, active.ends_at) == (t0 + 19 * MINUTE, t0 + 19 * MINUTE + 7 * DAY)
    # The cards after the term are let go; the booking covers exactly what the customer uses.
    assert (active.booking.starts_at, active.booking.ends_at) == (t0, active.ends_at)
    assert set(active.booking.slots.values_list("ends_at", flat=True)) == {active.ends_at}
    slides = AuditEntry.objects.filter(action="term_slide", object_id=str(order.pk)).order_by("id")
    assert [e.data["final"] for e in slides] == [False, True]
    assert slides.last().data["short_by_seconds"] == 0
    assert invariant_violations() == []


def test_paid_at_once_the_term_still_starts_when_access_is_ready(t0):
    order = shop.place(shop.customer(), now=t0, term_days=3)
    shop.pay(order, now=t0 + MINUTE, seen_at=t0 + MINUTE)
    provision_due(now=t0 + 2 * MINUTE)
    active = fresh(order)
    assert active.state == "active" and active.starts_at == t0 + 2 * MINUTE
    assert active.ends_at - active.starts_at == 3 * DAY
    assert active.booking.ends_at == active.ends_at


def test_a_transfer_still_confirming_keeps_room_for_the_term_to_start_later(t0):
    """A Bitcoin transfer seen in time but slow to confirm keeps the hold for hours: the held period grows
    with it, so the term still starts when access is ready."""
    order = shop.place(shop.customer(), now=t0, term_days=3)
    shop.pay(order, now=t0 + 10 * MINUTE, seen_at=t0 + 5 * MINUTE, confirmations=0)
    pending = fresh(order)
    hold = pending.booking
    assert hold.kind == "hold" and hold.expires_at > t0 + HOUR
    assert hold.ends_at >= hold.expires_at + 3 * DAY + 30 * MINUTE
    three_hours = t0 + 3 * HOUR
    # Three hours later the transfer has its confirmations (what the watcher records), and the order is paid.
    Transfer.objects.filter(order=order).update(confirmations=6)
    with transaction.atomic():
        payment_apply(order_lock(order), actor="watcher", now=three_hours)
    assert fresh(order).state == "paid"
    provision_due(now=three_hours + MINUTE)
    active = fresh(order)
    assert active.state == "active"
    assert active.starts_at == three_hours + MINUTE and active.ends_at - active.starts_at == 3 * DAY


def test_a_dated_order_keeps_its_date(t0):
    start = t0 + 2 * DAY
    order = shop.place(shop.customer(), now=t0, term_days=3, start=start)
    assert not fresh(order).start_asap
    booking = fresh(order).booking
    assert (booking.starts_at, booking.ends_at) == (start, start + 3 * DAY)
    shop.pay(order, now=t0 + 5 * MINUTE)
    provision_due(now=t0 + HOUR)  # not due yet
    assert fresh(order).state == "paid"
    provision_due(now=start + 3 * MINUTE)
    active = fresh(order)
    assert active.state == "active"
    assert (active.starts_at, active.ends_at) == (start, start + 3 * DAY)
    assert (active.booking.starts_at, active.booking.ends_at) == (start, start + 3 * DAY)
    assert not AuditEntry.objects.filter(action="term_slide", object_id=str(order.pk)).exists()


def test_cards_booked_right_after_limit_the_slide_and_the_term_keeps_its_length(t0):
    """Another customer's dated order takes every H200 card 10 minutes after our term would end: our held
    period stops there, and a term that cannot slide all the way starts as late as it can, whole."""
    user = shop.customer()
    other = shop.place(shop.customer("bob@example.com"), product="h200-141gb", quantity=16, term_days=3,
                       start=t0 + 3 * DAY + 10 * MINUTE, now=t0)
    order = shop.place(user, product="h200-141gb", quantity=16, term_days=3, now=t0)
    assert fresh(order).booking.ends_at == other.booking.starts_at
    shop.pay(order, now=t0 + 30 * MINUTE, seen_at=t0 + 5 * MINUTE)
    provision_due(now=t0 + 40 * MINUTE)
    active = fresh(order)
    assert active.state == "active"
    assert (active.starts_at, active.ends_at) == (t0 + 10 * MINUTE, other.booking.starts_at)
    assert active.ends_at - active.starts_at == 3 * DAY
    last = AuditEntry.objects.filter(action="term_slide", object_id=str(order.pk)).order_by("id").last()
    assert last.data["short_by_seconds"] == 30 * 60
    assert invariant_violations() == []


def test_a_late_payment_whose_cards_were_taken_can_take_the_earliest_free_start(t0):
    order = shop.place(shop.customer(), product="h200-141gb", quantity=16, term_days=3, now=t0)
    after_expiry = t0 + 3 * HOUR
    rival = shop.place(shop.customer("bob@example.com"), product="h200-141gb", quantity=16, term_days=3,
                       now=after_expiry)
    shop.pay(order, now=after_expiry + MINUTE, seen_at=after_expiry)
    late = fresh(order)
    assert late.state == "paid_late" and late.refund_due  # said on the order page, and in the operator's queue
    assert AuditEntry.objects.filter(action="capacity_gone", object_id=str(order.pk)).exists()

    taken = payment_take_earliest_start(order=late, actor="alice@example.com", now=after_expiry + 2 * MINUTE)
    taken = fresh(taken)
    assert taken.state == "paid" and not taken.refund_due
    assert taken.starts_at >= fresh(rival).booking.ends_at - MINUTE  # after the rival's held period
    assert taken.ends_at - taken.starts_at == 3 * DAY
    assert invariant_violations() == []
    with pytest.raises(NotAllowedNow):
        payment_take_earliest_start(order=taken, actor="alice@example.com", now=after_expiry + 3 * MINUTE)


def test_a_late_payment_rebooked_from_now_still_slides_to_activation(t0):
    order = shop.place(shop.customer(), term_days=3, now=t0)
    late_at = t0 + 4 * HOUR  # the hold ran out, but the cards are still free
    shop.pay(order, now=late_at, seen_at=late_at)
    assert fresh(order).state == "paid"
    provision_due(now=late_at + 5 * MINUTE)
    active = fresh(order)
    assert active.state == "active" and active.starts_at == late_at + 5 * MINUTE
    assert active.ends_at - active.starts_at == 3 * DAY and active.booking.ends_at == active.ends_at


def test_the_claim_grace_is_already_inside_the_held_period(t0):
    order = shop.place(shop.customer(), term_days=3, now=t0)
    before = fresh(order).booking.ends_at
    payment_claim(order=order, actor="alice@example.com", now=t0 + 50 * MINUTE)
    hold = fresh(order).booking
    grace = timedelta(minutes=PaymentSettings.current().claim_grace_minutes)
    assert hold.expires_at == order.quote.expires_at + grace
    assert hold.ends_at == before  # expiry + term + preparation fitted in the held period already


def test_a_paid_term_that_passes_without_access_lets_its_held_room_go(t0):
    order = shop.place(shop.customer(), term_days=3, now=t0)
    shop.pay(order, now=t0 + 5 * MINUTE)
    paid = fresh(order)
    assert paid.booking.ends_at > paid.ends_at
    terms_end_due(now=paid.ends_at + HOUR)
    stranded = fresh(order)
    assert stranded.refund_due and stranded.booking.state == Booking.State.LIVE
    assert stranded.booking.ends_at == stranded.ends_at


def test_the_emails_say_when_the_term_starts(t0, mailoutbox):
    from anchorgpu.orders.notify import emails_send_due

    asap = shop.place(shop.customer(), term_days=3, now=t0)
    shop.place(shop.customer("bob@example.com"), term_days=3, start=t0 + 2 * DAY, now=t0)
    shop.pay(asap, now=t0 + 5 * MINUTE)
    emails_send_due()
    by_order = {}
    for mail in mailoutbox:
        by_order.setdefault(mail.to[0], []).append(mail.body)
    alice, bob = "\n".join(by_order["alice@example.com"]), "\n".join(by_order["bob@example.com"])
    assert "Your term starts when your access is ready" in alice
    assert "your term starts when it is ready" in alice  # the "paid" email
    assert "Your term runs from" in bob and "Your term starts when" not in bob


def _first_h200_host():
    from anchorgpu.fleet.models import Host

    return Host.objects.filter(product__slug="h200-141gb").order_by("name").first()


def test_a_term_never_slides_into_a_maintenance_window_entered_after_its_cards_were_held(t0):
    """The window begins an hour after the term would end if it started at once: the room after the term
    overlaps it, the term itself does not. Access comes 80 minutes later; the term stops at the window."""
    from anchorgpu.allocation.services import host_enter_maintenance

    order = shop.place(shop.customer(), product="h200-141gb", quantity=16, term_days=3, now=t0)
    window_start = t0 + 3 * DAY + HOUR
    host_enter_maintenance(host=_first_h200_host(), start=window_start, end=t0 + 4 * DAY, actor="op",
                           reason="fans", now=t0 + MINUTE)
    shop.pay(order, now=t0 + 50 * MINUTE, seen_at=t0 + 5 * MINUTE)
    provision_due(now=t0 + 80 * MINUTE)
    active = fresh(order)
    assert active.state == "active"
    assert active.ends_at == window_start and active.ends_at - active.starts_at == 3 * DAY
    last = AuditEntry.objects.filter(action="term_slide", object_id=str(order.pk)).order_by("id").last()
    assert last.data["short_by_seconds"] == 20 * 60
    assert invariant_violations() == []


def test_the_room_after_a_term_stops_at_a_maintenance_window_whose_slots_left_a_gap(t0):
    """A window entered while another hold sat inside it has no slot where that hold was; once the hold
    has run out, a new order's room after its term must still stop where the window begins."""
    from anchorgpu.allocation.models import BookingDevice
    from anchorgpu.allocation.services import host_enter_maintenance

    shop.place(shop.customer("bob@example.com"), product="h200-141gb", quantity=16, term_days=3,
               start=t0 + 3 * DAY, now=t0)  # never paid
    host = _first_h200_host()
    window = (t0 + 3 * DAY + 2 * HOUR, t0 + 4 * DAY)
    entered = host_enter_maintenance(host=host, start=window[0], end=window[1], actor="op", reason="fans",
                                     now=t0 + MINUTE)
    assert entered.booking.slots.count() == 0  # every card of the host was held inside the window
    later = t0 + 2 * HOUR  # Bob's hold has run out
    order = shop.place(shop.customer(), product="h200-141gb", quantity=16, term_days=3, now=later)
    assert fresh(order).booking.ends_at == window[0]
    shop.pay(order, now=later + 30 * MINUTE, seen_at=later + 5 * MINUTE)
    provision_due(now=later + 35 * MINUTE)
    active = fresh(order)
    assert active.state == "active" and active.ends_at - active.starts_at == 3 * DAY
    inside = BookingDevice.objects.filter(booking=active.booking, live=True, device__host=host,
                                          starts_at__lt=window[1], ends_at__gt=window[0])
    assert not inside.exists()


def test_a_late_payment_for_a_product_taken_off_sale_is_told_so(t0):
    from anchorgpu.catalog.models import Product

    order = shop.place(shop.customer(), product="h200-141gb", quantity=16, term_days=3, now=t0)
    rival_at = t0 + 3 * HOUR
    shop.place(shop.customer("bob@example.com"), product="h200-141gb", quantity=16, term_days=3, now=rival_at)
    shop.pay(order, now=rival_at + MINUTE, seen_at=rival_at)
    Product.objects.filter(slug="h200-141gb").update(is_active=False)
    with pytest.raises(NotAllowedNow, match="no longer on sale"):
        payment_take_earliest_start(order=fresh(order), actor="alice@example.com", now=rival_at + 2 * MINUTE)
    assert fresh(order).state == "paid_late"
