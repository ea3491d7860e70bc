"""The wipe after a term (DESIGN §6): the customer's container and volume removed, and the proof recorded.

The transaction that ends an order (term over, ended early, refunded whole, stranded) only marks the wipe due
(``wipe_mark_due``: ``Order.wipe_due_at``); it releases the cards at once. The worker's ``wipes_due`` sweep then
wipes like any other step (``fulfilment``): a lease claimed in a short transaction, ``provisioner.run(WIPE)``
with no transaction open, the ``wipe`` step recorded once with the provisioner's detail (its proof) in a second
one, which clears ``wipe_due_at``. A failed wipe is tried again with back-off; after ``MAX_WIPE_FAILURES``
(at once for a refused host) the operators are alerted and the order waits in their queue, where "wipe now"
tries again.

Until an order's wipe is recorded, no later order starts access preparation on any of its cards
(``wipe_blocker``): the previous tenant's container may still hold the card.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation.models import BookingDevice
from anchorgpu.allocation.selectors import current_slots
from anchorgpu.audit.services import SYSTEM, audit_record
from anchorgpu.fleet.models import Device

from . import operator_events, step_lease
from .errors import InvalidOrder, NotAllowedNow
from .models import Move, OperatorEvent, Order, ProvisioningStep
from .provisioner import HostRefused, HostUnavailable, Provisioner, ProvisioningError, get_provisioner
from .provisioning import WIPE
from .retry import MAX_WIPE_FAILURES, UNREACHABLE_BACKOFF, backoff
from .states import OrderState
from .step_failures import error_text, host_label, refuse_host
from .step_lease import Claim
from .transitions import order_lock

log = logging.getLogger(__name__)
S = OrderState
BATCH = 50
STILL_RUNNING = (S.PAID, S.PROVISIONING, S.ACTIVE)


def wipe_mark_due(order: Order, *, now: datetime, always: bool = False, actor: str = SYSTEM) -> bool:
    """In the caller's transaction, the order locked: its machine is to be wiped from ``now``. Without
    ``always``, only when access preparation has touched the machine (a step recorded, or one under way)."""
    if order.wipe_due_at is not None or order.steps.filter(step=WIPE).exists():
        return False
    if not always and not order.lease_owner and not order.steps.exists():
        return False
    order.wipe_due_at, order.wipe_attempts, order.retry_at = now, 0, None
    order.save(update_fields=["wipe_due_at", "wipe_attempts", "retry_at", "updated_at"])
    audit_record(actor=actor, action="wipe_due", obj=order, data={"due_at": now.isoformat()})
    return True


def wipe_blocker(order: Order) -> str:
    """Why access preparation for ``order`` must wait ("" when it need not): another order had one of its cards
    and its machine is not wiped yet (preparation ran or runs there and no wipe is recorded)."""
    if not order.booking_id:
        return ""
    cards = set(current_slots(order.booking_id).values_list("device_id", flat=True))
    moved = _move_wipe_blocker(order, cards)
    if moved:
        return moved
    wiped = ProvisioningStep.objects.filter(order=OuterRef("pk"), step=WIPE)
    touched = ProvisioningStep.objects.filter(order=OuterRef("pk"))
    # The cards another order holds to its booking's end; the cards a move left are wiped by the move.
    shares = BookingDevice.objects.filter(booking_id=OuterRef("booking_id"), device_id__in=cards,
                                          ends_at=OuterRef("booking__ends_at"))
    other = (Order.objects.exclude(pk=order.pk).filter(Exists(shares)).filter(Q(Exists(touched)) | ~Q(lease_owner=""))
             .exclude(Exists(wiped)).order_by("pk").first())
    if other is None:
        return ""
    card = (BookingDevice.objects.filter(booking_id=other.booking_id, device_id__in=cards)
            .select_related("device").order_by("device__host__name", "device__index").first())
    where = card.device.uid if card is not None else "?"
    return f"order {other.reference}'s wipe on {where}"


def _move_wipe_blocker(order: Order, cards: set[int]) -> str:
    """A move whose left cards are not wiped yet: the order's own when its new cards are on a host it left (the
    container there has the same name), or another order's on one of these cards. A move to other hosts does
    not wait for the old host's wipe: a term moved off a faulty host that no longer answers gets its access on
    the new cards while that wipe is retried (and, after its tries, goes to the operators)."""
    hosts = None
    for move in (Move.objects.filter(wipe_due_at__isnull=False, wiped_at__isnull=True).select_related("order")
                 .order_by("pk")):
        if move.order_id == order.pk:
            if hosts is None:
                hosts = set(Device.objects.filter(pk__in=cards).values_list("host__name", flat=True))
            if hosts & set(_host_names(move.from_devices)):
                return f"the wipe of the cards it left on {move.from_hosts} when it was moved"
            continue
        shared = cards & set(move.from_devices)
        if shared:
            uid = Device.objects.filter(pk=min(shared)).values_list("uid", flat=True).first() or "?"
            return f"order {move.order.reference}'s wipe on {uid} after its move"
    return ""


def _host_names(device_ids) -> list[str]:
    return list(Device.objects.filter(pk__in=device_ids).values_list("host__name", flat=True))


def _claim(order_pk: int, now: datetime, *, force: bool) -> Claim | None | str:
    """The lease on the order's wipe, committed; None when there is none to do now; "busy" when a worker runs
    another step of the order (the wipe waits for it)."""
    with transaction.atomic():
        order = (Order.objects.select_for_update(skip_locked=not force, of=("self",)).filter(pk=order_pk).first())
        if order is None or order.wipe_due_at is None or order.wipe_due_at > now:
            return None
        if order.steps.filter(step=WIPE).exists():
            order.wipe_due_at = None
            order.save(update_fields=["wipe_due_at", "updated_at"])
            return None
        if not force and (order.wipe_attempts >= MAX_WIPE_FAILURES
                          or (order.retry_at is not None and order.retry_at > now)):
            return None
        if not step_lease.is_free(order, now):
            return "busy"
        owner = step_lease.take(order, WIPE, now)
        order.save(update_fields=[*step_lease.FIELDS, "updated_at"])
    return Claim(order, WIPE, owner, now)


def _record(claim: Claim, detail: dict, provisioner: Provisioner, now: datetime) -> bool:
    with transaction.atomic():
        order = order_lock(claim.order.pk)
        if order.lease_owner != claim.owner:
            log.warning("order %s: the lease on its wipe was taken over; this worker's result is dropped", order)
            return False
        step_lease.clear(order)
        fields = [*step_lease.FIELDS, "wipe_due_at", "retry_at", "updated_at"]
        if order.steps.filter(step=WIPE).exists():
            order.wipe_due_at = None
            order.save(update_fields=fields)
            return False
        ProvisioningStep.objects.create(order=order, step=WIPE, started_at=claim.started_at, finished_at=now,
                                        detail=detail)
        order.wipe_due_at, order.retry_at = None, None
        if order.last_error.startswith(f"{WIPE}: "):
            order.last_error = ""
            fields.append("last_error")
        order.save(update_fields=fields)
        audit_record(actor=SYSTEM, action="provisioning_step", obj=order, to_state=WIPE,
                     data={"step": WIPE, "provisioner": provisioner.name, "detail": detail,
                           "started_at": claim.started_at.isoformat(), "finished_at": now.isoformat()})
    return True


def _record_failure(claim: Claim, error: Exception, provisioner: Provisioner, now: datetime) -> None:
    message = error_text(error)
    log.warning("order #%s: the wipe failed: %s", claim.order.pk, message,
                exc_info=not isinstance(error, ProvisioningError))
    with transaction.atomic():
        order = order_lock(claim.order.pk)
        if order.lease_owner != claim.owner:
            return
        step_lease.clear(order)
        order.wipe_attempts += 1
        order.last_error = f"{WIPE}: {message}"
        if isinstance(error, HostRefused):
            order.wipe_attempts = max(order.wipe_attempts, MAX_WIPE_FAILURES)
            order.retry_at = None
            why = f"host {host_label(order, error)} refused: {message}"
        elif isinstance(error, HostUnavailable):
            order.retry_at = now + backoff(order.wipe_attempts, UNREACHABLE_BACKOFF)
            why = f"host {host_label(order, error)} unreachable: {message}"
        else:
            order.retry_at = now + backoff(order.wipe_attempts)
            why = message
        order.save(update_fields=[*step_lease.FIELDS, "wipe_attempts", "last_error", "retry_at", "updated_at"])
        audit_record(actor=SYSTEM, action="wipe_error", obj=order, reason=message,
                     data={"attempt": order.wipe_attempts, "kind": type(error).__name__,
                           "provisioner": provisioner.name, "started_at": claim.started_at.isoformat(),
                           "failed_at": now.isoformat(),
                           "retry_at": order.retry_at.isoformat() if order.retry_at else None})
        if order.wipe_attempts >= MAX_WIPE_FAILURES:
            kind = OperatorEvent.Kind.WIPE_FAILED
            operator_events.operator_event_raise(
                order=order, kind=kind, key=operator_events.next_key(order, kind),
                text=f"The machine could not be wiped after the order ended ({why}). Its cards are released but no "
                     f"new term starts on them until the wipe is recorded: fix the cause, then use \"Wipe now\" on "
                     f"the order's page.")
        if isinstance(error, HostRefused):
            refuse_host(order, error, message)


def wipe_run(order_pk: int, *, provisioner: Provisioner, clock: Callable[[], datetime], force: bool = False) -> str:
    """Claim, wipe, record: "done", "failed", "busy" (another step holds the order) or "" (nothing to do)."""
    claim = _claim(order_pk, clock(), force=force)
    if not isinstance(claim, Claim):
        return claim or ""
    return step_lease.run_leased(order_pk, claim.owner, lambda: provisioner.run(WIPE, claim.order),
                                 failed=lambda exc: _record_failure(claim, exc, provisioner, clock()),
                                 done=lambda detail: _record(claim, detail, provisioner, clock()))


def wipes_due(*, provisioner: Provisioner | None = None, now: datetime | None = None, limit: int = BATCH) -> int:
    """The worker's sweep: run the wipes that are due. Returns how many were recorded or failed."""
    clock: Callable[[], datetime] = (lambda: now) if now is not None else timezone.now
    at = clock()
    due = (Order.objects.filter(wipe_due_at__isnull=False, wipe_due_at__lte=at, wipe_attempts__lt=MAX_WIPE_FAILURES)
           .filter(Q(retry_at__isnull=True) | Q(retry_at__lte=at)).order_by("wipe_due_at", "pk")
           .values_list("pk", flat=True)[:limit])
    pks = list(due)
    if not pks:
        return 0
    provisioner = provisioner or get_provisioner()
    return sum(1 for pk in pks if wipe_run(pk, provisioner=provisioner, clock=clock) in ("done", "failed"))


def order_wipe_now(*, order: Order, actor: str, reason: str, provisioner: Provisioner | None = None,
                   now: datetime | None = None) -> tuple[bool, str]:
    """The operator wipes an ended order's machine now (its wipe is pending, or failing), outside any
    transaction. Returns (wiped, the error when it failed); a failure is counted and retried like the sweep's."""
    reason = (reason or "").strip()
    if not reason:
        raise InvalidOrder(_("Say why: a manual decision is recorded with its reason."), code="reason_required")
    clock: Callable[[], datetime] = (lambda: now) if now is not None else timezone.now
    with transaction.atomic():
        locked = order_lock(order)
        if locked.steps.filter(step=WIPE).exists():
            raise NotAllowedNow(_("This order's machine is already wiped."))
        if locked.wipe_due_at is None:
            if locked.order_state in STILL_RUNNING or (locked.order_state is S.FAILED and locked.ends_at > clock()):
                raise NotAllowedNow(_("The order is %(state)s: end its term (or refund it) first; the wipe "
                                      "follows.") % {"state": locked.state_label})
            if not wipe_mark_due(locked, now=clock(), actor=actor):
                raise NotAllowedNow(_("Nothing to wipe: no access step ran for this order."))
        audit_record(actor=actor, action="wipe_now", obj=locked, reason=reason,
                     data={"attempts_before": locked.wipe_attempts})
    outcome = wipe_run(locked.pk, provisioner=provisioner or get_provisioner(), clock=clock, force=True)
    if outcome == "busy":
        raise NotAllowedNow(_("A worker is running a step of this order now; the wipe follows it. Try again in a "
                              "moment, or use “Retry the step” if it is stuck."))
    locked.refresh_from_db()
    return outcome == "done", "" if outcome == "done" else locked.last_error
