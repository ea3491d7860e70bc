"""The operator re-checks an active order's machine: the provisioner's health check run again, with no
transaction open, and its result recorded as an audit row (``health_recheck``: ok or not, the provisioner's
output or error, start and end). The ``health_check`` step's own row, from access preparation, stays as it was:
a step is recorded once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.audit.models import AuditEntry
from anchorgpu.audit.services import audit_record

from .errors import InvalidOrder, NotAllowedNow
from .models import Order
from .provisioner import HostRefused, Provisioner, get_provisioner
from .provisioning import Step
from .states import OrderState
from .step_failures import error_text, refuse_host
from .transitions import order_lock

ACTION = "health_recheck"


def order_health_recheck(*, order: Order, actor: str, reason: str, provisioner: Provisioner | None = None,
                         now: datetime | None = None) -> AuditEntry:
    """Run the health check of an ACTIVE order again and record what it said. A host refused on the way is
    taken off sale (if the provisioner asks) and the operators alerted, as during preparation."""
    reason = (reason or "").strip()
    if not reason:
        raise InvalidOrder(_("Say why: a manual decision is recorded with its reason."), code="reason_required")
    clock: Callable[[], datetime] = (lambda: now) if now is not None else timezone.now
    current = Order.objects.select_related("product", "environment").get(pk=order.pk)
    if current.order_state is not OrderState.ACTIVE:
        raise NotAllowedNow(_("Only an active order's machine can be re-checked; this order is %(state)s.")
                            % {"state": current.state_label})
    provisioner = provisioner or get_provisioner()
    started = clock()
    error: Exception | None = None
    detail: dict = {}
    try:
        detail = provisioner.run(Step.HEALTH_CHECK, current)
    except Exception as exc:  # noqa: BLE001 - recorded as the check's result
        error = exc
    finished = clock()
    with transaction.atomic():
        locked = order_lock(order)
        data = {"ok": error is None, "provisioner": provisioner.name, "started_at": started.isoformat(),
                "finished_at": finished.isoformat()}
        data.update({"detail": detail} if error is None else {"error": error_text(error),
                                                              "kind": type(error).__name__})
        entry = audit_record(actor=actor, action=ACTION, obj=locked, reason=reason, data=data)
        if isinstance(error, HostRefused):
            refuse_host(locked, error, error_text(error))
    return entry
