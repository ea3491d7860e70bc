"""A provisioning step that raised, recorded in the step's record transaction (``fulfilment``).

- ``ProvisioningError``: a failed attempt (``provisioning_attempts``), tried again after a back-off, FAILED
  (the operator's queue) after ``retry.MAX_FAILURES``;
- ``HostUnavailable``: counted apart (``unreachable_attempts``), a longer back-off, FAILED after
  ``retry.MAX_UNREACHABLE`` with the reason "host X unreachable: …";
- ``HostRefused``: FAILED at once with its reason; the host is taken off sale when the provisioner asks, and
  the operators are alerted about the host (``operator_events.on_host_refused``);
- anything else (a bug in the provisioner): counted like a ``ProvisioningError`` and logged with its trace.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from anchorgpu.audit.services import SYSTEM, audit_record

from . import operator_events, step_lease
from .host_refusal import host_sale_block, refused_host
from .models import Order
from .provisioner import HostRefused, HostUnavailable, Provisioner, ProvisioningError
from .retry import MAX_FAILURES, MAX_UNREACHABLE, UNREACHABLE_BACKOFF, backoff
from .states import OrderState
from .transitions import order_transition

log = logging.getLogger(__name__)
S = OrderState
# ``last_error`` of a step that waits for something other than itself (not a failure, not counted).
WAITING = "waiting for "


def error_text(error: Exception) -> str:
    text = str(error) if isinstance(error, ProvisioningError) else f"{type(error).__name__}: {error}"
    return text[:2000] or type(error).__name__


def host_label(order: Order | None, error: Exception) -> str:
    named = getattr(error, "host", "") or ""
    host = refused_host(order, named)
    return host.name if host is not None else (named or "?")


def refuse_host(order: Order | None, error: HostRefused, message: str) -> None:
    """Take the refused host off sale if the provisioner asked, and alert the operators (caller's transaction)."""
    host = refused_host(order, error.host)
    if host is None:
        log.error("order %s: host %r refused, and no fleet record matches it", order, error.host)
        return
    if error.block_host:
        host_sale_block(host=host, why=f"refused during access preparation of {order}: {message}"
                        if order is not None else message, actor=SYSTEM)
    operator_events.on_host_refused(host=host, why=message, order=order)


def record_failure(claim, error: Exception, provisioner: Provisioner, now: datetime) -> None:
    """Count the failed attempt of ``claim`` (a ``fulfilment.Claim``) if its lease is still ours."""
    message, step = error_text(error), claim.name
    if isinstance(error, ProvisioningError):
        log.warning("order #%s: step %s failed: %s", claim.order.pk, step, message)
    else:
        log.error("order #%s: step %s crashed", claim.order.pk, step, exc_info=error)
    with transaction.atomic():
        order = Order.objects.select_for_update(of=("self",)).get(pk=claim.order.pk)
        if order.lease_owner != claim.owner:
            log.warning("order %s: the lease on %s was taken over; this worker's failure is not counted", order, step)
            return
        step_lease.clear(order)
        if order.state not in (S.PAID.value, S.PROVISIONING.value):
            order.save(update_fields=[*step_lease.FIELDS, "updated_at"])
            return
        order.last_error = f"{step}: {message}"
        fail_reason = ""
        if isinstance(error, HostRefused):
            order.provisioning_attempts += 1
            order.retry_at = None
            fail_reason = f"host {host_label(order, error)} refused: {message}"
        elif isinstance(error, HostUnavailable):
            order.unreachable_attempts += 1
            order.retry_at = now + backoff(order.unreachable_attempts, UNREACHABLE_BACKOFF)
            if order.unreachable_attempts >= MAX_UNREACHABLE:
                fail_reason = (f"host {host_label(order, error)} unreachable {order.unreachable_attempts} times: "
                               f"{message}")
        else:
            order.provisioning_attempts += 1
            order.retry_at = now + backoff(order.provisioning_attempts)
            if order.provisioning_attempts >= MAX_FAILURES:
                fail_reason = f"access preparation failed {order.provisioning_attempts} times"
        audit_record(actor=SYSTEM, action="provisioning_error", obj=order, reason=message,
                     data={"step": step, "attempt": order.provisioning_attempts,
                           "unreachable": order.unreachable_attempts, "kind": type(error).__name__,
                           "provisioner": provisioner.name, "started_at": claim.started_at.isoformat(),
                           "failed_at": now.isoformat(),
                           "retry_at": order.retry_at.isoformat() if order.retry_at else None})
        order.save(update_fields=[*step_lease.FIELDS, "provisioning_attempts", "unreachable_attempts",
                                  "last_error", "retry_at", "updated_at"])
        if fail_reason:
            order.retry_at = None
            order_transition_failed(order, fail_reason, step, message)
        if isinstance(error, HostRefused):
            refuse_host(order, error, message)


def order_transition_failed(order: Order, reason: str, step: str, message: str) -> None:
    order_transition(order=order, to=S.FAILED, actor=SYSTEM, reason=reason, data={"step": step, "error": message},
                     update_fields=("retry_at",))
