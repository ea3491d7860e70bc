"""Moving an order's term to other cards (issue 25): what the shop offers, and the move itself.

``order_move`` locks the order, moves its booking (``allocation.moves.booking_move``: the operator's cards or
the shop's proposal), records the move (``Move``), writes the audit row and queues the customer's email, in one
transaction.

* An order whose access preparation has not touched a machine yet (awaiting payment, paid, or preparing with
  no step recorded) only changes cards.
* An order whose access was (partly) prepared goes back to preparing access, on the new cards: the round of
  steps done on the old cards is kept on the move, the login is cleared, and the worker wipes the old cards
  outside any transaction (``move_wipes``) before it prepares the new ones (``fulfilment``, which waits for that
  wipe like for any other tenant's, ``wipes.wipe_blocker``). An active order goes ACTIVE → PROVISIONING → ACTIVE.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation.models import Booking
from anchorgpu.allocation.moves import MoveProposal, booking_move, move_proposal
from anchorgpu.audit.services import audit_record
from anchorgpu.fleet.models import Device

from . import notify, step_lease
from .errors import InvalidOrder, NotAllowedNow
from .models import Move, Order, OrderEmail
from .provisioning import WIPE
from .states import OrderState
from .transitions import order_lock, order_transition

S = OrderState
# States whose order may be moved: those that hold cards for a term still to run.
MOVABLE = frozenset({S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED, S.UNDERPAID, S.PAID, S.PROVISIONING, S.ACTIVE})


def move_offer(*, order: Order, now: datetime | None = None) -> MoveProposal:
    """Where the shop would move ``order``'s term now, without moving it: a ``MoveProposal`` whose
    ``to_devices`` are the proposed device ids, or None with ``reason`` (no free cards, the order cannot be
    moved). For the operator's tools and the faulty-host flow."""
    now = now or timezone.now()
    order = Order.objects.select_related("booking__product").get(pk=order.pk)
    problem = _problem(order, now)
    if problem:
        booking = order.booking
        return MoveProposal(booking.pk if booking else 0, now, order.ends_at, (), None, problem)
    return move_proposal(order.booking, now=now)


def _problem(order: Order, now: datetime) -> str:
    if order.order_state not in MOVABLE:
        return _("This order is %(state)s; only a term still to run can be moved.") % {"state": order.state_label}
    booking = order.booking
    if booking is None or booking.state != Booking.State.LIVE:
        return _("The order's cards are no longer booked for it.")
    if order.ends_at <= now:
        return _("The term has already ended.")
    return ""


def _hosts(device_ids) -> str:
    names = (Device.objects.filter(pk__in=list(device_ids)).order_by("host__name")
             .values_list("host__name", flat=True).distinct())
    return ", ".join(names)[:300]


def _steps_of(order: Order) -> list[dict]:
    return [{"step": s.step, "started_at": s.started_at.isoformat() if s.started_at else None,
             "finished_at": s.finished_at.isoformat(), "detail": s.detail}
            for s in order.steps.exclude(step=WIPE).order_by("finished_at", "id")]


def order_move(*, order: Order, devices=None, actor: str, reason: str, now: datetime | None = None) -> Move:
    """Move ``order``'s term to ``devices`` (device ids), or to the shop's proposal when None, from now (or its
    start) to its end. Refused with a clear message (``AllocationError`` or ``OrderError``) when the cards are not
    free, the order cannot be moved now, or no reason is given."""
    reason = (reason or "").strip()
    if not reason:
        raise InvalidOrder(_("Say why the term is moved."), code="reason_required")
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(order)
        problem = _problem(locked, now)
        if problem:
            raise NotAllowedNow(problem)
        if not step_lease.is_free(locked, now):
            raise NotAllowedNow(_("A worker is running a step of this order now; try the move again in a moment."))
        if locked.moves.filter(wipe_due_at__isnull=False, wiped_at__isnull=True).exists():
            raise NotAllowedNow(_("The cards of this order's last move are not wiped yet; move it again once "
                                  "they are."))
        touched = locked.steps.exclude(step=WIPE).exists()
        delivered = locked.order_state is S.ACTIVE
        moved = booking_move(booking=locked.booking, devices=devices, actor=actor, reason=reason, now=now,
                             for_order=True)
        locked.booking = moved.booking
        move = Move.objects.create(
            order=locked, booking=moved.booking, at=moved.at, from_devices=list(moved.from_devices),
            to_devices=list(moved.to_devices), from_hosts=_hosts(moved.from_devices),
            to_hosts=_hosts(moved.to_devices), reason=reason, actor=actor, access_moved=touched,
            access_delivered=delivered, previous_steps=_steps_of(locked) if touched else [],
            wipe_due_at=now if touched else None)
        if touched:
            locked.steps.exclude(step=WIPE).delete()
            locked.access_host, locked.access_port, locked.access_user = "", None, ""
            locked.provisioning_attempts = locked.unreachable_attempts = 0
            locked.last_error, locked.retry_at = "", None
            fields = ("access_host", "access_port", "access_user", "provisioning_attempts",
                      "unreachable_attempts", "last_error", "retry_at")
            if delivered:
                order_transition(order=locked, to=S.PROVISIONING, actor=actor,
                                 reason=f"moved to other cards: access is prepared on them ({reason})",
                                 update_fields=fields)
            else:
                locked.save(update_fields=[*fields, "updated_at"])
        audit_record(actor=actor, action="order_move", obj=locked, reason=reason,
                     data={"move": move.pk, "booking": moved.booking.pk, "at": moved.at.isoformat(),
                           "from": list(moved.from_devices), "to": list(moved.to_devices),
                           "from_hosts": move.from_hosts, "to_hosts": move.to_hosts, "access_moved": touched})
        # The move's email tells what the "preparing access" one queued by the transition above would: one is enough.
        OrderEmail.objects.filter(order=locked, kind=OrderEmail.Kind.STATE_CHANGED, state=S.PROVISIONING.value,
                                  sent_at__isnull=True).delete()
        notify.order_moved(locked.pk)
    return move

