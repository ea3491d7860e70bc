"""An as-soon-as-possible term starts when access is ready (``allocation.slide`` has the rule).

The order's booking holds its cards from the earliest start found to the end of the term plus a reach
(``placement_reach``). When the payment is confirmed the term is placed from that moment, keeping room for
access preparation after it; when access is ready it is fixed from that moment and the cards after its end
are let go. Each step runs inside the caller's transaction with the order's row locked; stretching the
booking takes the product's turn like any other writer of its cards, so a slid term never overlaps another
customer's booking. A dated order keeps its date: none of this touches it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from anchorgpu.allocation import selectors, slide
from anchorgpu.allocation import services as allocation
from anchorgpu.allocation.errors import NoLongerAvailable
from anchorgpu.allocation.models import Booking
from anchorgpu.allocation.periods import Period
from anchorgpu.audit.services import audit_record

from .models import Move, Order

# Until access is ready, an as-soon-as-possible term has no fixed start: ``starts_at`` is the earliest it can.
SLIDING_STATES = frozenset({"awaiting_payment", "payment_claimed", "underpaid", "paid", "provisioning", "paid_late"})


def is_sliding(order: Order) -> bool:
    return order.start_asap and order.state in SLIDING_STATES and not fixed_by_a_move(order)


def fixed_by_a_move(order: Order) -> bool:
    """Whether ``order`` had its access delivered before a move to other cards (``orders.moves``): its term was
    fixed then, and it does not slide again when access is ready on the new cards."""
    return Move.objects.filter(order=order, access_delivered=True).exists()


def access_allowance() -> timedelta:
    """How long access preparation may take after the payment is confirmed."""
    return timedelta(minutes=max(0, settings.ANCHORGPU_ACCESS_MINUTES))


def placement_reach(payment) -> timedelta:
    """How far past the term an as-soon-as-possible order holds its cards when placed (``payment`` is the
    ``PaymentSettings`` its quote is made with)."""
    return slide.reach(quote_minutes=payment.quote_minutes, claim_grace_minutes=payment.claim_grace_minutes,
                       access_minutes=int(access_allowance().total_seconds() // 60))


def _live(booking: Booking | None) -> bool:
    return (booking is not None and booking.state == Booking.State.LIVE
            and booking.kind in (Booking.Kind.HOLD, Booking.Kind.CONFIRMED))


def _usable(booking: Booking, length: timedelta) -> Period:
    """The part of the held period a term may slide into: up to the first maintenance window of its hosts
    entered after the cards were held (their room after the term overlaps it; the term itself, if the window
    reaches it, is the operator's to move, and keeps its earliest place)."""
    devices = list(selectors.current_slots(booking.pk).values_list("device_id", flat=True))
    earliest_end = booking.starts_at + length
    window = selectors.maintenance_from(devices, after=earliest_end, until=booking.ends_at)
    return Period(booking.starts_at, max(earliest_end, window))


def hold_until(order: Order, *, until: datetime, actor: str, now: datetime | None = None) -> None:
    """The hold of an unpaid as-soon-as-possible order lasts until ``until`` (a transfer is on its way):
    keep its cards for a term that starts then, as far as they are free."""
    if not order.start_asap or not _live(order.booking):
        return
    booking = order.booking
    length = timedelta(days=order.total_days)
    want = slide.wanted_end(held=Period(booking.starts_at, booking.ends_at), length=length, at=until,
                            allowance=access_allowance())
    if want > booking.ends_at:
        try:
            order.booking = allocation.booking_stretch(booking=booking, until=want, actor=actor, now=now,
                                                       reason="the payment window grew: room for the term to "
                                                              "start later")
        except NoLongerAvailable:  # conflicts on every attempt: the term keeps the room it has
            pass


def term_slide(order: Order, *, at: datetime, actor: str, final: bool,
               now: datetime | None = None) -> slide.Slid | None:
    """Place an as-soon-as-possible order's term from ``at``: provisionally when it is paid (``final`` False,
    room for access preparation kept after it), for good when access is ready (``final``: the held cards after
    the term are let go). Returns where the term went; None for a dated order or one without live cards."""
    if not order.start_asap or not _live(order.booking) or fixed_by_a_move(order):
        return None
    now = now or timezone.now()
    at = at.replace(microsecond=0)
    booking = order.booking
    length = timedelta(days=order.total_days)
    allowance = timedelta(0) if final else access_allowance()
    want = slide.wanted_end(held=Period(booking.starts_at, booking.ends_at), length=length, at=at,
                            allowance=allowance)
    if want > booking.ends_at:
        try:
            booking = allocation.booking_stretch(booking=booking, until=want, actor=actor, now=now,
                                                 reason="the term starts later than the cards were held for")
        except NoLongerAvailable:  # conflicts on every attempt: place the term inside what is held
            pass
    placed = slide.slide(held=_usable(booking, length), length=length, at=at)
    if final and booking.ends_at > placed.term.end:
        booking = allocation.booking_trim(booking=booking, end=placed.term.end, actor=actor,
                                          reason="the term is fixed; the cards after it are free again")
    order.booking = booking
    before = (order.starts_at, order.ends_at)
    if before != (placed.term.start, placed.term.end):
        order.starts_at, order.ends_at = placed.term.start, placed.term.end
        order.save(update_fields=["starts_at", "ends_at", "updated_at"])
    audit_record(
        actor=actor,
        action="term_slide",
        obj=order,
        reason="access is ready: the term starts now" if final else "paid: the term starts when access is ready",
        data={
            "at": at.isoformat(),
            "from": before[0].isoformat(),
            "start": placed.term.start.isoformat(),
            "end": placed.term.end.isoformat(),
            "final": final,
            "short_by_seconds": int(placed.short_by.total_seconds()),
        },
    )
    return placed
