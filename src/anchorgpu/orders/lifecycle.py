"""Time-driven order changes: the worker's sweeps for quotes that ran out
and terms that end (DESIGN §5–6).

Every sweep picks its candidates with one query, then handles each order in
a transaction of its own with the order's row locked (``SKIP LOCKED``: an
order another worker or an operator is busy with is left for the next
sweep) and re-checks the condition under the lock. Running a sweep twice,
late, or in two workers at once changes nothing more. Each returns how many
orders it changed.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation import services as allocation
from anchorgpu.allocation.errors import InvalidBookingState
from anchorgpu.allocation.models import Booking
from anchorgpu.audit.services import SYSTEM, audit_record

from . import notify, operator_events
from .errors import InvalidOrder, NotAllowedNow
from .models import Order
from .provisioning import WIPE
from .states import OrderState
from .transitions import order_lock, order_transition
from .wipes import wipe_mark_due

log = logging.getLogger(__name__)

S = OrderState
BATCH = 200
WARN_BEFORE = timedelta(hours=24)
WARN_LAST_HOUR = timedelta(hours=1)
UNPAID = (S.AWAITING_PAYMENT.value, S.PAYMENT_CLAIMED.value)


def _claim(order_pk: int) -> Order | None:
    """The order's own row, locked; None when someone else holds it."""
    return Order.objects.select_for_update(skip_locked=True, of=("self",)).filter(pk=order_pk).first()


def _release(order: Order, *, reason: str) -> bool:
    """Release the order's booking if it is still live. True if it was released here."""
    booking = order.booking
    if booking is None or booking.state != Booking.State.LIVE:
        return False
    try:
        allocation.booking_release(booking=booking, actor=SYSTEM, reason=reason, for_order=True)
    except InvalidBookingState:  # the hold sweep marked it expired a moment ago: it no longer counts either way
        return False
    return True


def _hold_kept(order: Order, now: datetime) -> bool:
    booking = order.booking
    return (booking is not None and booking.kind == Booking.Kind.HOLD and booking.state == Booking.State.LIVE
            and booking.expires_at > now)


def orders_expire_due(now: datetime | None = None) -> int:
    """Unpaid orders whose quote has expired become EXPIRED and their hold is
    released, so the cards are free for others at once. A transfer that
    still arrives makes the order PAID_LATE (payments re-checks capacity).
    UNDERPAID orders stay in the operator's queue, but their hold is released
    too once the quote has expired."""
    now = now or timezone.now()
    changed = 0
    unpaid = Order.objects.filter(state__in=UNPAID, quote__expires_at__lte=now)
    for pk in list(unpaid.order_by("pk").values_list("pk", flat=True)[:BATCH]):
        with transaction.atomic():
            order = _claim(pk)
            if order is None or order.state not in UNPAID or order.quote.expires_at > now:
                continue
            if _hold_kept(order, now):
                continue  # "I've paid" or a transfer still confirming keeps it for now
            order_transition(order=order, to=S.EXPIRED, actor=SYSTEM, reason="the quote expired before payment")
            _release(order, reason="quote expired")
            changed += 1
    underpaid = Order.objects.filter(state=S.UNDERPAID.value, quote__expires_at__lte=now,
                                     booking__state=Booking.State.LIVE, booking__kind=Booking.Kind.HOLD)
    for pk in list(underpaid.order_by("pk").values_list("pk", flat=True)[:BATCH]):
        with transaction.atomic():
            order = _claim(pk)
            if order is None or order.state != S.UNDERPAID.value or order.quote.expires_at > now:
                continue
            if _hold_kept(order, now):
                continue
            if _release(order, reason="quote expired while underpaid; the operator decides"):
                changed += 1
    return changed


# The reminders before a term ends, latest first: (field that records it, how long before the end, the email).
# Each is sent once per end; an extension moves the end and clears them (``extensions.extension_apply``). A
# worker that was down sends only the latest one due (the hour's, not a day's warning an hour before the end).
REMINDERS = (("end_warned_hour_at", WARN_LAST_HOUR, "term_ending_hour"), ("end_warned_at", WARN_BEFORE, "term_ending"))


def _warn_one(pk: int, *, field: str, before: timedelta, now: datetime) -> bool:
    with transaction.atomic():
        order = _claim(pk)
        if (order is None or order.state != S.ACTIVE.value or getattr(order, field) is not None
                or not now < order.ends_at <= now + before):
            return False
        fields = [name for name, ahead, _kind in REMINDERS if ahead >= before and getattr(order, name) is None]
        for name in fields:  # this one, and any earlier one not sent: it would say less, later
            setattr(order, name, now)
        order.save(update_fields=[*fields, "updated_at"])
        audit_record(actor=SYSTEM, action="term_warning", obj=order,
                     data={"ends_at": order.ends_at.isoformat(), "hours_before": int(before.total_seconds() // 3600)})
        if before == WARN_LAST_HOUR:
            notify.term_ending_hour(pk)
        else:
            notify.term_ending(pk)
        return True


def terms_warn_due(now: datetime | None = None) -> int:
    """Tell the customer that an active term ends: 24 hours before, then 1 hour before, each once per end,
    with what will be erased, how to extend, and where the off-machine storage is if they bought it."""
    now = now or timezone.now()
    changed = 0
    for field, before, _kind in REMINDERS:
        due = Order.objects.filter(state=S.ACTIVE.value, ends_at__gt=now, ends_at__lte=now + before,
                                   **{f"{field}__isnull": True})
        for pk in list(due.order_by("ends_at", "pk").values_list("pk", flat=True)[:BATCH]):
            changed += _warn_one(pk, field=field, before=before, now=now)
    return changed


def _end(order: Order, now: datetime, *, actor: str = SYSTEM, reason: str = "the term ended") -> None:
    # The order leaves its active state before its booking goes: the database refuses an active order without one.
    order_transition(order=order, to=S.COMPLETED, actor=actor, reason=reason)
    wipe_mark_due(order, now=now, always=True, actor=actor)  # the worker wipes, outside this transaction
    _release(order, reason=reason)
    _drop_pending_extensions(order, actor=actor)


def _drop_pending_extensions(order: Order, *, actor: str) -> None:
    """An extension still awaiting payment, with nothing received, has no term left to extend: cancelled, its
    hold released. Its row is taken only if free (the payment path locks the extension before its order: no
    waiting here, so no deadlock); one left behind expires with its quote, or is refunded if paid after all."""
    pending = (Order.objects.select_for_update(skip_locked=True, of=("self",))
               .filter(extends=order, state=S.AWAITING_PAYMENT.value, transfers__isnull=True))
    for extension in pending:
        order_transition(order=extension, to=S.CANCELLED, actor=actor,
                         reason=f"order {order.reference} ended before this extension was paid")
        _release(extension, reason=f"order {order.reference} ended")


def order_end_now(*, order: Order, actor: str, reason: str, now: datetime | None = None) -> Order:
    """An operator ends an active term before its time (a customer's request, abuse, a host that must go): the
    order is completed and its cards released in one transaction, and its machine's wipe is due at once (the
    worker's ``wipes.wipes_due``, or "wipe now"). Money is a separate, recorded decision (a refund of part of
    the price)."""
    reason = (reason or "").strip()
    if not reason:
        raise InvalidOrder(_("Say why: a manual decision is recorded with its reason."), code="reason_required")
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(order)
        if locked.order_state is not S.ACTIVE:
            raise NotAllowedNow(_("Only an active term can be ended now; this order is %(state)s.")
                                % {"state": locked.state_label})
        _end(locked, now, actor=actor, reason=f"ended early by an operator: {reason}")
    return locked


def terms_end_due(now: datetime | None = None) -> int:
    """Active orders whose term has ended: COMPLETED, the booking released and the wipe due, in one
    transaction each; the wipe itself is the worker's next sweep (``wipes.wipes_due``), with no transaction
    open, and no new term starts on those cards until it is recorded.

    Orders whose term ended before access was delivered go to the
    operator's queue (see ``_strand_due``)."""
    now = now or timezone.now()
    changed = 0
    due = Order.objects.filter(state=S.ACTIVE.value, ends_at__lte=now, extends__isnull=True)
    for pk in list(due.order_by("ends_at", "pk").values_list("pk", flat=True)[:BATCH]):
        try:
            with transaction.atomic():
                order = _claim(pk)
                if order is None or order.state != S.ACTIVE.value or order.ends_at > now:
                    continue
                _end(order, order.ends_at)
                changed += 1
        except (OperationalError, InterfaceError):
            raise  # the database went away: the sweep stops here and the worker's next one resumes
        except Exception:  # noqa: BLE001 - one order's failure must not stop the others
            log.exception("order #%s: could not end the term; it stays active and is retried", pk)
    changed += _strand_due(now)
    changed += _failed_wipes_due(now)
    return changed


def _failed_wipes_due(now: datetime) -> int:
    """A FAILED order whose term is over can no longer be retried (``order_retry_provisioning``): whatever its
    steps left on the machine is to be wiped, from the term's end. Its booking stays until the operator
    refunds it; its period has passed."""
    changed = 0
    due = (Order.objects.filter(state=S.FAILED.value, ends_at__lte=now, wipe_due_at__isnull=True,
                                steps__isnull=False).exclude(steps__step=WIPE).distinct())
    for pk in list(due.order_by("ends_at", "pk").values_list("pk", flat=True)[:BATCH]):
        with transaction.atomic():
            order = _claim(pk)
            if order is None or order.state != S.FAILED.value or order.ends_at > now:
                continue
            changed += wipe_mark_due(order, now=order.ends_at)
    return changed


def _strand_due(now: datetime) -> int:
    """Orders whose term ended before access was delivered go to the
    operator's queue: a PROVISIONING order becomes FAILED and its cards are
    released; a PAID one is flagged for a refund (or a new term, the
    operator's call) and keeps its booking, whose period has passed, until
    then. Nothing is refunded automatically."""
    changed = 0
    # An extension is never left paid (it is added to its order in the payment's transaction); excluded anyway.
    due = Order.objects.filter(state__in=(S.PAID.value, S.PROVISIONING.value), ends_at__lte=now,
                               extends__isnull=True)
    for pk in list(due.order_by("ends_at", "pk").values_list("pk", flat=True)[:BATCH]):
        with transaction.atomic():
            order = _claim(pk)
            if order is None or order.state not in (S.PAID.value, S.PROVISIONING.value) or order.ends_at > now:
                continue
            wipe_mark_due(order, now=now)  # whatever the steps put on the machine goes, after this
            if order.state == S.PROVISIONING.value:
                order_transition(order=order, to=S.FAILED, actor=SYSTEM,
                                 reason="the term ended before access was delivered")
                _release(order, reason="term ended before access was delivered")
            elif not order.refund_due:
                # A paid order keeps its booking until it is refunded (the database insists): the booking's
                # period has passed, so it holds back no card from anyone.
                order.refund_due = True
                order.save(update_fields=["refund_due", "updated_at"])
                booking = order.booking
                if booking is not None and booking.state == booking.State.LIVE and booking.ends_at > order.ends_at:
                    # The room an as-soon-as-possible term kept to start later is not needed any more.
                    allocation.booking_trim(booking=booking, end=order.ends_at, actor=SYSTEM,
                                            reason="the term ended before access was prepared")
                audit_record(actor=SYSTEM, action="term_missed", obj=order,
                             reason="the term ended before access was prepared; refund or offer a new term")
                operator_events.on_refund_due(order, why="The paid term ended before access was prepared: refund, "
                                                         "or offer the customer a new term.")
            else:
                continue
            log.warning("order %s: the term ended before access was delivered", order.reference)
            changed += 1
    return changed
