"""Access preparation after payment (DESIGN §6): the worker's ``provision_due`` sweep.

An order is due once it is PAID and its term has started, or while it is
PROVISIONING. For each due order the sweep runs the next unfinished step
of ``provisioning.PLAN``, then the next, and so on. A step is three parts:

1. **claim**, a short transaction: lock the order's row, skipping it if
   another worker holds it (``SELECT … FOR UPDATE SKIP LOCKED``), re-check
   that it is due, that its back-off has passed and that no live lease is on
   it (``step_lease``); work out the next step from the ``ProvisioningStep``
   rows; write a lease naming this worker and the step; the first step also
   moves the order PAID → PROVISIONING. Commit.
2. **work**, with no transaction open and no row locked: the provisioner's
   method for the step (SSH, containers: seconds to minutes).
3. **record**, a short transaction: lock the row, check the lease is still
   this worker's (else another worker has taken over and the result is thrown
   away), insert the step's row (start, end, the provisioner's detail), clear
   the lease, write the audit row; the last step stores the SSH login and
   moves the order PROVISIONING → ACTIVE. Commit.

A worker killed anywhere loses at most the step under way: its lease is
taken over at once by a worker on the same machine (the holder's process is
gone) and otherwise after it expires; the step is idempotent by name, so the
repeat finds what the first try left and carries on. A step whose record is
committed is never started again: the next step is worked out from the rows.

A step whose provisioner call raises is recorded in the record transaction
instead (``step_failures``): counted, with its error and a back-off before
the next try; after the limits of ``retry`` the order goes to FAILED, the
operator's queue. BaseException (KeyboardInterrupt, SystemExit) is not
counted: the lease is handed back and the exception propagates. Neither is
a lost database connection: the sweep fails as a whole and the worker's next
sweep takes the abandoned lease over (it is this process's own, unheld).

The first step waits, without counting as a failure, while an earlier order
that had any of the same cards has not been wiped yet (``wipes.wipe_blocker``):
the previous tenant's container may still hold the card.

Lead time: none. Provisioning starts when the term starts, not before: until
then the cards belong to whatever booking precedes this one. An
as-soon-as-possible order is due as soon as it is paid, and its term starts
when the last step delivers access (``term_slide``, in that step's record
transaction).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation.selectors import current_slots
from anchorgpu.audit.services import SYSTEM, audit_record
from anchorgpu.fleet.models import HostFault

from . import step_lease
from .errors import InvalidOrder, NotAllowedNow
from .models import Order, ProvisioningStep
from .provisioner import Provisioner, get_provisioner
from .provisioning import PLAN, WIPE, Step, next_step
from .retry import MAX_FAILURES  # noqa: F401 - re-exported: tests and the admin read it here
from .states import OrderState
from .step_failures import WAITING, record_failure
from .step_lease import Claim
from .term_slide import term_slide
from .transitions import order_lock, order_transition
from .wipes import wipe_blocker

log = logging.getLogger(__name__)

S = OrderState
LEAD_TIME = timedelta(0)


def _due(now: datetime) -> Q:
    # A chain alert (money counted for the order is gone from the chain) holds access until an operator decides.
    # An extension has no access of its own: its days are added to the order it extends (``orders.extensions``).
    return ((Q(state=S.PAID.value, starts_at__lte=now + LEAD_TIME) | Q(state=S.PROVISIONING.value))
            & Q(ends_at__gt=now) & Q(chain_alert="") & (Q(retry_at__isnull=True) | Q(retry_at__lte=now))
            & Q(extends__isnull=True))


def _is_due(order: Order, now: datetime) -> bool:
    if order.extends_id:
        return False
    if order.ends_at <= now:
        return False  # the term is over; ``lifecycle.terms_end_due`` reports it
    if order.chain_alert:
        return False
    if order.state == S.PAID.value:
        return order.starts_at <= now + LEAD_TIME
    return order.state == S.PROVISIONING.value


def _faulty_host(order: Order) -> str:
    """The name of a host of the order's cards with an open fault (``orders.faults``), or "". The cards it holds
    now (``current_slots``): a term moved off a faulty host is prepared on its new cards."""
    if not order.booking_id:
        return ""
    hosts = current_slots(order.booking_id).values_list("device__host_id", flat=True)
    fault = HostFault.objects.filter(cleared_at__isnull=True, host_id__in=hosts).select_related("host").first()
    return fault.host.name if fault is not None else ""


def _claim_row(order_pk: int) -> Order | None:
    """The order's row locked for this transaction, or None when another worker holds it.
    Only the order's own row: related rows (the product) must stay free for others."""
    return Order.objects.select_for_update(skip_locked=True, of=("self",)).filter(pk=order_pk).first()


def _start(order: Order, provisioner: Provisioner, *, reason: str, fields: tuple[str, ...] = ()) -> None:
    order.provisioner = provisioner.name[:40]
    order_transition(order=order, to=S.PROVISIONING, actor=SYSTEM, reason=reason,
                     update_fields=("provisioner", *fields))


def _wait(order: Order, step: Step, why: str) -> None:
    """The step cannot start yet for a reason that is no failure: said on the order, not counted."""
    text = f"{step.value}: {WAITING}{why}"
    if order.last_error != text:
        order.last_error = text
        order.save(update_fields=["last_error", "updated_at"])
        log.info("order %s: %s", order.reference, text)


def _claim(order_pk: int, provisioner: Provisioner, now: datetime) -> Claim | None:
    """Part 1: the lease on the order's next step, committed. None when there is nothing to start now."""
    with transaction.atomic():
        order = _claim_row(order_pk)
        if order is None or not _is_due(order, now):
            return None
        if order.retry_at is not None and order.retry_at > now:
            return None
        if not step_lease.is_free(order, now):
            return None
        try:
            step = next_step(order.steps.exclude(step=WIPE).values_list("step", flat=True))
        except ValueError as exc:  # a gap in the record: not something to retry blindly
            log.error("order %s: provisioning record is inconsistent (%s); left for the operator", order, exc)
            return None
        if step is None:
            log.error("order %s is %s with every step finished; left for the operator", order, order.state)
            return None
        if step is PLAN[0]:
            blocker = wipe_blocker(order)
            if blocker:
                _wait(order, step, blocker)
                return None
        faulty = _faulty_host(order)
        if faulty:  # access is not prepared on a host marked faulty: the term is moved, or the fault cleared
            _wait(order, step, f"host {faulty} is marked faulty; move the term to other cards or clear the fault")
            return None
        if order.lease_owner:
            log.warning("order %s: taking over the lease on %s from %s", order, order.lease_step, order.lease_owner)
        owner = step_lease.take(order, step.value, now)
        try:
            if order.state == S.PAID.value:
                _start(order, provisioner, reason="access preparation started", fields=step_lease.FIELDS)
            else:
                order.save(update_fields=[*step_lease.FIELDS, "updated_at"])
        except BaseException:
            step_lease.forget(owner)
            raise
    return Claim(order, step, owner, now)


def _record_step(claim: Claim, detail: dict, provisioner: Provisioner, now: datetime) -> bool:
    """Part 3: the finished step, recorded if the lease is still ours. True when recorded."""
    with transaction.atomic():
        order = order_lock(claim.order.pk)
        if order.lease_owner != claim.owner:
            log.warning("order %s: the lease on %s was taken over (now %r); this worker's result is dropped",
                        order, claim.step.value, order.lease_owner)
            return False
        step_lease.clear(order)
        fields = [*step_lease.FIELDS, "retry_at", "updated_at"]
        order.retry_at = None
        if not _is_due(order, now):  # the term ended or an operator ended the order meanwhile
            order.save(update_fields=fields)
            log.warning("order %s is no longer due (%s): step %s is not recorded", order, order.state,
                        claim.step.value)
            return False
        if order.last_error.startswith(f"{claim.step.value}: {WAITING}"):
            order.last_error = ""
            fields.append("last_error")
        try:
            with transaction.atomic():
                ProvisioningStep.objects.create(order=order, step=claim.step.value, started_at=claim.started_at,
                                                finished_at=now, detail=detail)
        except IntegrityError:  # cannot happen while the lease holds; the constraint is the backstop
            log.error("order %s: step %s was already recorded by someone else", order, claim.step.value)
            order.save(update_fields=fields)
            return False
        audit_record(actor=SYSTEM, action="provisioning_step", obj=order, to_state=claim.step.value,
                     data={"step": claim.step.value, "provisioner": provisioner.name, "detail": detail,
                           "started_at": claim.started_at.isoformat(), "finished_at": now.isoformat()})
        if claim.step is PLAN[-1]:
            # Access is ready: an as-soon-as-possible term starts now, whatever the payment and preparation took.
            term_slide(order, at=now, actor=SYSTEM, final=True)
            order.access_host = str(detail["host"])
            order.access_port = int(detail["port"])
            order.access_user = str(detail["user"])
            order_transition(order=order, to=S.ACTIVE, actor=SYSTEM, reason="access delivered",
                             update_fields=("access_host", "access_port", "access_user",
                                            *[f for f in fields if f != "updated_at"]))
        else:
            order.save(update_fields=fields)
    return True


def _one_step(order_pk: int, provisioner: Provisioner, clock: Callable[[], datetime]) -> str:
    """Claim, work, record. "done", "failed", or "" when nothing was started."""
    claim = _claim(order_pk, provisioner, clock())
    if claim is None:
        return ""
    return step_lease.run_leased(order_pk, claim.owner, lambda: provisioner.run(claim.step, claim.order),
                                 failed=lambda exc: record_failure(claim, exc, provisioner, clock()),
                                 done=lambda detail: _record_step(claim, detail, provisioner, clock()))


def _advance(order_pk: int, provisioner: Provisioner, clock: Callable[[], datetime]) -> bool:
    """Run the order's steps until it is active, fails, waits, or another worker has it."""
    changed = False
    for _step in PLAN:
        outcome = _one_step(order_pk, provisioner, clock)
        if outcome == "failed":
            return True
        if not outcome:
            break
        changed = True
    return changed


def provision_due(*, provisioner: Provisioner | None = None, now: datetime | None = None, limit: int = 20) -> int:
    """The worker's sweep: advance up to ``limit`` due orders. Returns how many changed."""
    provisioner = provisioner or get_provisioner()
    clock: Callable[[], datetime] = (lambda: now) if now is not None else timezone.now
    due = (Order.objects.filter(_due(clock())).order_by("starts_at", "pk").values_list("pk", flat=True)[:limit])
    return sum(1 for pk in list(due) if _advance(pk, provisioner, clock))


def _need_reason(reason: str) -> str:
    if not (reason or "").strip():
        raise InvalidOrder(_("Say why: a manual decision is recorded with its reason."), code="reason_required")
    return reason.strip()


def order_retry_provisioning(*, order: Order, actor: str, reason: str) -> Order:
    """The operator sends a FAILED order back to access preparation, with a
    fresh count of attempts; finished steps are not repeated."""
    reason = _need_reason(reason)
    with transaction.atomic():
        locked = order_lock(order)
        if locked.ends_at <= timezone.now():
            raise NotAllowedNow(_("The term has already ended; refund the order instead."))
        booking = locked.booking
        if booking is None or booking.state != booking.State.LIVE or booking.kind != booking.Kind.CONFIRMED:
            raise NotAllowedNow(_("The order's cards are no longer booked for it; refund the order instead."))
        locked.provisioning_attempts = 0
        locked.unreachable_attempts = 0
        locked.last_error = ""
        locked.retry_at = None
        order_transition(order=locked, to=S.PROVISIONING, actor=actor, reason=reason,
                         update_fields=("provisioning_attempts", "unreachable_attempts", "last_error", "retry_at"))
    return locked


def order_step_retry(*, order: Order, actor: str, reason: str) -> Order:
    """The operator has the order's next step (or its wipe) tried again now: its back-off is cleared and so is
    a lease the operator judges stuck (a worker still running under it finds it gone and drops its result; the
    step is idempotent, so the next worker repeats it). A FAILED order goes through
    ``order_retry_provisioning`` instead."""
    reason = _need_reason(reason)
    with transaction.atomic():
        locked = order_lock(order)
        waiting_wipe = locked.wipe_due_at is not None
        # The wipe of the cards a move left (``move_wipes``), failing: tried again now too.
        moved_off = locked.moves.filter(wipe_due_at__isnull=False, wiped_at__isnull=True, wipe_attempts__gt=0)
        if locked.order_state not in (S.PAID, S.PROVISIONING) and not waiting_wipe:
            raise NotAllowedNow(_("This order has no step waiting to be tried again (it is %(state)s).")
                                % {"state": locked.state_label})
        if (not locked.lease_owner and locked.retry_at is None and not (waiting_wipe and locked.wipe_attempts)
                and not moved_off.exists()):
            raise NotAllowedNow(_("Nothing holds this order's next step back: the worker takes it on its next "
                                  "sweep."))
        was = {"lease": step_lease.described(locked), "retry_at": locked.retry_at.isoformat()
               if locked.retry_at else None, "wipe_attempts": locked.wipe_attempts}
        step_lease.clear(locked)
        locked.retry_at = None
        was["move_wipes"] = moved_off.update(wipe_attempts=0, wipe_retry_at=None)
        fields = [*step_lease.FIELDS, "retry_at", "updated_at"]
        if waiting_wipe and locked.order_state not in (S.PAID, S.PROVISIONING):
            locked.wipe_attempts = 0
            fields.append("wipe_attempts")
        locked.save(update_fields=fields)
        audit_record(actor=actor, action="step_retry", obj=locked, reason=reason, data=was)
    return locked
