"""Access preparation after payment (DESIGN §6): the worker's ``provision_due`` sweep.

An order is due once it is PAID and its term has started, or while it is
PROVISIONING. For each due order the sweep runs the next unfinished step
of ``provisioning.PLAN``, then the next, and so on, each step in its own
transaction:

1. lock the order's row, skipping it if another worker holds it
   (``SELECT … FOR UPDATE SKIP LOCKED``), and re-check that it is still due;
2. work out the next step from the ``ProvisioningStep`` rows recorded;
3. call the provisioner, insert the step's row (when it finished, and the
   provisioner's detail) and an audit row; the first step also moves the
   order PAID → PROVISIONING, the last one stores the SSH login and moves
   it PROVISIONING → ACTIVE;
4. commit.

So a crash of any kind between two steps (or inside one) loses only the
unfinished step; the next sweep resumes there and never repeats a step
that finished. Two workers never run one step twice: the row lock is the
claim, and the unique (order, step) constraint is the backstop.

A step whose provisioner call raises is rolled back; the failure is then
recorded in a transaction of its own (``provisioning_attempts``,
``last_error``, an audit row) and the step is retried on a later sweep.
After ``MAX_FAILURES`` failures the order goes to FAILED, the operator's
queue. BaseException (KeyboardInterrupt, SystemExit) is not recorded: it
rolls the step back and propagates. Neither is a lost database connection
(``OperationalError``, ``InterfaceError``): the transaction is gone with
it, nothing of the step remains, and the sweep fails as a whole; the
worker's next sweep starts the step again on a fresh connection.

Lead time: none. Provisioning starts when the term starts, not before:
until then the cards belong to whatever booking precedes this one, and that
term's end (release and wipe, see ``lifecycle``) runs at the same instant.
The worker sweeps term ends before provisioning for that reason. An
as-soon-as-possible order is due as soon as it is paid (its provisional
start is the payment, or the end of the booking before it), and its term
starts when the last step delivers access (``term_slide``, in that step's
transaction).

The provisioner runs while the order's row is locked and the transaction
is open; a provisioner whose steps take minutes should be driven another
way (a job queue that reports back), which this module does not do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.audit.services import SYSTEM, audit_record

from .errors import InvalidOrder, NotAllowedNow
from .models import Order, ProvisioningStep
from .provisioner import Provisioner, ProvisioningError, get_provisioner
from .provisioning import PLAN, WIPE, Step, next_step
from .states import OrderState
from .term_slide import term_slide
from .transitions import order_lock, order_transition

log = logging.getLogger(__name__)

S = OrderState
MAX_FAILURES = 3
LEAD_TIME = timedelta(0)


class _StepFailed(Exception):
    def __init__(self, step: Step, error: Exception):
        super().__init__(f"{step.value}: {error}")
        self.step, self.error = step, error


def _due(now: datetime) -> Q:
    # A chain alert (money counted for the order is gone from the chain) holds access until an operator decides.
    return ((Q(state=S.PAID.value, starts_at__lte=now + LEAD_TIME) | Q(state=S.PROVISIONING.value))
            & Q(ends_at__gt=now) & Q(chain_alert=""))


def _is_due(order: Order, now: datetime) -> bool:
    if order.ends_at <= now:
        return False  # the term is over; ``lifecycle.terms_end_due`` reports it
    if order.chain_alert:
        return False
    if order.state == S.PAID.value:
        return order.starts_at <= now + LEAD_TIME
    return order.state == S.PROVISIONING.value


def _claim(order_pk: int) -> Order | None:
    """The order's row locked for this transaction, or None when another worker holds it.
    Only the order's own row: related rows (the product) must stay free for others."""
    return Order.objects.select_for_update(skip_locked=True, of=("self",)).filter(pk=order_pk).first()


def _message(error: Exception) -> str:
    text = str(error) if isinstance(error, ProvisioningError) else f"{type(error).__name__}: {error}"
    return text[:2000] or type(error).__name__


def _start(order: Order, provisioner: Provisioner, *, reason: str, fields: tuple[str, ...] = ()) -> None:
    order.provisioner = provisioner.name[:40]
    order_transition(order=order, to=S.PROVISIONING, actor=SYSTEM, reason=reason,
                     update_fields=("provisioner", *fields))


def _run_step(order_pk: int, provisioner: Provisioner, clock: Callable[[], datetime]) -> bool:
    """One step in one transaction. True when a step was recorded."""
    with transaction.atomic():
        order = _claim(order_pk)
        if order is None or not _is_due(order, clock()):
            return False
        try:
            step = next_step(order.steps.exclude(step=WIPE).values_list("step", flat=True))
        except ValueError as exc:  # a gap in the record: not something to retry blindly
            log.error("order %s: provisioning record is inconsistent (%s); left for the operator", order, exc)
            return False
        if step is None:
            log.error("order %s is %s with every step finished; left for the operator", order, order.state)
            return False
        try:
            detail = provisioner.run(step, order)
        except (OperationalError, InterfaceError):
            raise  # the database went away, not the step's fault: nothing is counted, the next sweep retries
        except Exception as exc:
            raise _StepFailed(step, exc) from exc
        try:
            with transaction.atomic():
                ProvisioningStep.objects.create(order=order, step=step.value, finished_at=clock(), detail=detail)
        except IntegrityError:  # cannot happen while the lock holds; the constraint is the backstop
            log.error("order %s: step %s was already recorded by someone else", order, step.value)
            return False
        audit_record(actor=SYSTEM, action="provisioning_step", obj=order, to_state=step.value,
                     data={"step": step.value, "provisioner": provisioner.name, "detail": detail})
        if order.state == S.PAID.value:
            _start(order, provisioner, reason="access preparation started")
        if step is PLAN[-1]:
            # Access is ready: an as-soon-as-possible term starts now, whatever the payment and preparation took.
            term_slide(order, at=clock(), actor=SYSTEM, final=True)
            order.access_host = str(detail["host"])
            order.access_port = int(detail["port"])
            order.access_user = str(detail["user"])
            order_transition(order=order, to=S.ACTIVE, actor=SYSTEM, reason="access delivered",
                             update_fields=("access_host", "access_port", "access_user"))
    return True


def _record_failure(order_pk: int, failed: _StepFailed, provisioner: Provisioner) -> None:
    """Count a failed attempt in a transaction of its own; FAILED after ``MAX_FAILURES``."""
    message = _message(failed.error)
    if isinstance(failed.error, ProvisioningError):
        log.warning("order #%s: step %s failed: %s", order_pk, failed.step.value, message)
    else:
        log.error("order #%s: step %s crashed", order_pk, failed.step.value, exc_info=failed.error)
    with transaction.atomic():
        order = Order.objects.select_for_update(of=("self",)).get(pk=order_pk)
        if order.state not in (S.PAID.value, S.PROVISIONING.value):
            return
        order.provisioning_attempts += 1
        order.last_error = f"{failed.step.value}: {message}"
        fields = ("provisioning_attempts", "last_error")
        audit_record(actor=SYSTEM, action="provisioning_error", obj=order, reason=message,
                     data={"step": failed.step.value, "attempt": order.provisioning_attempts,
                           "provisioner": provisioner.name})
        if order.state == S.PAID.value:  # it has started, even if its first step failed
            _start(order, provisioner, reason="access preparation started", fields=fields)
        else:
            order.save(update_fields=[*fields, "updated_at"])
        if order.provisioning_attempts >= MAX_FAILURES:
            order_transition(order=order, to=S.FAILED, actor=SYSTEM,
                             reason=f"access preparation failed {order.provisioning_attempts} times",
                             data={"step": failed.step.value, "error": message})


def _advance(order_pk: int, provisioner: Provisioner, clock: Callable[[], datetime]) -> bool:
    """Run the order's steps until it is active, fails, or another worker has it."""
    changed = False
    for _step in PLAN:
        try:
            if not _run_step(order_pk, provisioner, clock):
                break
        except _StepFailed as failed:
            _record_failure(order_pk, failed, provisioner)
            return True
        changed = True
    return changed


def provision_due(*, provisioner: Provisioner | None = None, now: datetime | None = None, limit: int = 20) -> int:
    """The worker's sweep: advance up to ``limit`` due orders. Returns how many changed."""
    provisioner = provisioner or get_provisioner()
    clock: Callable[[], datetime] = (lambda: now) if now is not None else timezone.now
    due = (Order.objects.filter(_due(clock())).order_by("starts_at", "pk").values_list("pk", flat=True)[:limit])
    return sum(1 for pk in list(due) if _advance(pk, provisioner, clock))


def order_retry_provisioning(*, order: Order, actor: str, reason: str) -> Order:
    """The operator sends a FAILED order back to access preparation, with a
    fresh count of attempts; finished steps are not repeated."""
    if not (reason or "").strip():
        raise InvalidOrder(_("Say why: a manual decision is recorded with its reason."), code="reason_required")
    with transaction.atomic():
        locked = order_lock(order)
        if locked.ends_at <= timezone.now():
            raise NotAllowedNow(_("The term has already ended; refund the order instead."))
        booking = locked.booking
        if booking is None or booking.state != booking.State.LIVE or booking.kind != booking.Kind.CONFIRMED:
            raise NotAllowedNow(_("The order's cards are no longer booked for it; refund the order instead."))
        locked.provisioning_attempts = 0
        locked.last_error = ""
        order_transition(order=locked, to=S.PROVISIONING, actor=actor, reason=reason.strip(),
                         update_fields=("provisioning_attempts", "last_error"))
    return locked
