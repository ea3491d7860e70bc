"""The wipe of the cards a move left (``moves.order_move``), by the worker, outside any transaction.

Like the wipe after a term (``wipes``): a lease on the order claimed in a short transaction (the order's one
step at a time, ``step_lease``), ``provisioner.wipe_cards`` with no transaction open on the old cards only (the
host and devices recorded on the move), and the proof recorded on the move in a second short transaction. A
failed wipe is counted on the move and tried again with back-off; after ``MAX_WIPE_FAILURES`` the operators are
alerted. Until the wipe is recorded, neither the moved order's new cards nor any later term on the old cards
start access preparation (``wipes.wipe_blocker``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from anchorgpu.audit.services import SYSTEM, audit_record

from . import operator_events, step_lease
from .models import Move, OperatorEvent, Order
from .provisioner import HostRefused, HostUnavailable, Provisioner, get_provisioner
from .retry import MAX_WIPE_FAILURES, UNREACHABLE_BACKOFF, backoff
from .step_failures import error_text
from .step_lease import Claim
from .transitions import order_lock

log = logging.getLogger(__name__)
STEP = "move_wipe"
BATCH = 50


def _claim(move_pk: int, now: datetime) -> tuple[Claim, Move] | None:
    with transaction.atomic():
        move = Move.objects.select_for_update().get(pk=move_pk)
        if not move.wipe_pending or move.wipe_due_at > now or move.wipe_attempts >= MAX_WIPE_FAILURES:
            return None
        if move.wipe_retry_at is not None and move.wipe_retry_at > now:
            return None
        order = Order.objects.select_for_update(skip_locked=True, of=("self",)).filter(pk=move.order_id).first()
        if order is None or not step_lease.is_free(order, now):
            return None
        owner = step_lease.take(order, STEP, now)
        order.save(update_fields=[*step_lease.FIELDS, "updated_at"])
    return Claim(order, STEP, owner, now), move


def _record(claim: Claim, move_pk: int, detail: dict, provisioner: Provisioner, now: datetime) -> bool:
    with transaction.atomic():
        order = order_lock(claim.order.pk)
        if order.lease_owner != claim.owner:
            log.warning("order %s: the lease on its move wipe was taken over; this worker's result is dropped", order)
            return False
        step_lease.clear(order)
        order.save(update_fields=[*step_lease.FIELDS, "updated_at"])
        move = Move.objects.select_for_update().get(pk=move_pk)
        if not move.wipe_pending:
            return False
        move.wiped_at, move.wipe_detail, move.wipe_retry_at, move.wipe_error = now, detail, None, ""
        move.save(update_fields=["wiped_at", "wipe_detail", "wipe_retry_at", "wipe_error"])
        audit_record(actor=SYSTEM, action="move_wipe", obj=order, to_state="wiped",
                     data={"move": move.pk, "devices": move.from_devices, "hosts": move.from_hosts,
                           "provisioner": provisioner.name, "detail": detail,
                           "started_at": claim.started_at.isoformat(), "finished_at": now.isoformat()})
    return True


def _failed(claim: Claim, move_pk: int, error: Exception, provisioner: Provisioner, now: datetime) -> None:
    message = error_text(error)
    log.warning("order #%s: the wipe after its move failed: %s", claim.order.pk, message)
    with transaction.atomic():
        order = order_lock(claim.order.pk)
        if order.lease_owner != claim.owner:
            return
        step_lease.clear(order)
        order.save(update_fields=[*step_lease.FIELDS, "updated_at"])
        move = Move.objects.select_for_update().get(pk=move_pk)
        move.wipe_attempts += 1
        if isinstance(error, HostRefused):
            move.wipe_attempts = max(move.wipe_attempts, MAX_WIPE_FAILURES)
        base = UNREACHABLE_BACKOFF if isinstance(error, HostUnavailable) else None
        move.wipe_retry_at = now + (backoff(move.wipe_attempts, base) if base else backoff(move.wipe_attempts))
        move.wipe_error = message
        move.save(update_fields=["wipe_attempts", "wipe_retry_at", "wipe_error"])
        audit_record(actor=SYSTEM, action="move_wipe_error", obj=order, reason=message,
                     data={"move": move.pk, "attempt": move.wipe_attempts, "kind": type(error).__name__,
                           "provisioner": provisioner.name})
        if move.wipe_attempts >= MAX_WIPE_FAILURES:
            operator_events.operator_event_raise(
                order=order, kind=OperatorEvent.Kind.WIPE_FAILED, key=f"move:{move.pk}",
                text=f"The cards this order left when it was moved (on {move.from_hosts}) could not be wiped "
                     f"({message}). The order waits for that wipe before access is prepared on its new cards, "
                     f"and no later term starts on the old ones: fix the cause, then use \"Retry the step\" on the "
                     f"order's page.")


def move_wipe_run(move_pk: int, *, provisioner: Provisioner, clock: Callable[[], datetime]) -> str:
    """Claim, wipe the cards the move left, record: "done", "failed" or "" (nothing to do now)."""
    claimed = _claim(move_pk, clock())
    if claimed is None:
        return ""
    claim, move = claimed
    devices = list(move.from_devices)
    return step_lease.run_leased(claim.order.pk, claim.owner,
                                 lambda: provisioner.wipe_cards(claim.order, devices),
                                 failed=lambda exc: _failed(claim, move_pk, exc, provisioner, clock()),
                                 done=lambda detail: _record(claim, move_pk, detail, provisioner, clock()))


def move_wipes_due(*, provisioner: Provisioner | None = None, now: datetime | None = None, limit: int = BATCH) -> int:
    """The worker's sweep: wipe the cards moves left. Returns how many were recorded or failed."""
    clock: Callable[[], datetime] = (lambda: now) if now is not None else timezone.now
    at = clock()
    due = (Move.objects.filter(wipe_due_at__isnull=False, wiped_at__isnull=True, wipe_due_at__lte=at,
                               wipe_attempts__lt=MAX_WIPE_FAILURES)
           .filter(Q(wipe_retry_at__isnull=True) | Q(wipe_retry_at__lte=at)).order_by("wipe_due_at", "pk")
           .values_list("pk", flat=True)[:limit])
    pks = list(due)
    if not pks:
        return 0
    provisioner = provisioner or get_provisioner()
    return sum(1 for pk in pks if move_wipe_run(pk, provisioner=provisioner, clock=clock) in ("done", "failed"))
