"""An order's chain alert: money the watcher had credited is no longer on
chain (a reorganisation deeper than the confirmations, or a deposit address
holding less than its settled transfers and never having sent anything).

The alert is for a person. Nothing here moves the order back (there is no
such transition), revokes access or cancels an invoice: the order keeps its
state, ``Order.chain_alert`` says what was found, the operators hear once
per finding (an ``order.reorged`` event of ``orders.operator_events``: an
email and the webhooks, queued in the same transaction), the order's page and its admin page say so, and the
payment queue lists it until an operator clears the alert with a reason.

Each finding has a *subject* (a short key such as ``evm:0x…:0 in block 12
0xab…``) that is part of its sentence: a finding whose subject was already
emailed about for the order is not raised again, even after an operator
cleared the alert (the same evidence is not news).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.audit.services import audit_record
from anchorgpu.orders.errors import NotAllowedNow
from anchorgpu.orders.models import OperatorEvent, Order, OrderEmail
from anchorgpu.orders.operator_events import next_key, operator_event_raise
from anchorgpu.orders.transitions import order_lock

from .services import need_reason

log = logging.getLogger("anchorgpu.watch")


def _require_atomic() -> None:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("a chain alert is written inside the transaction of the finding, with the order locked")


def already_told(order: Order, subject: str) -> bool:
    """Whether the operators were already told about ``subject`` for this order (an event of that key, or, from
    before events, an alert email naming it)."""
    return (OperatorEvent.objects.filter(order=order, kind=OperatorEvent.Kind.REORGED, key=subject).exists()
            or OrderEmail.objects.filter(order=order, kind=OrderEmail.Kind.OPERATOR_ALERT, event__isnull=True,
                                         note__contains=subject).exists())


def chain_alert_raise(*, order: Order, subject: str, text: str, actor: str, now: datetime,
                      data: dict | None = None) -> bool:
    """Flag ``order`` (locked by the caller) with ``text``, which names ``subject``. False when this subject
    was raised for the order before (nothing is written then)."""
    _require_atomic()
    if subject not in text:
        raise ValueError("the alert's sentence must name its subject")
    if already_told(order, subject):
        return False
    order.chain_alert = f"{order.chain_alert}\n{text}" if order.chain_alert else text
    order.chain_alert_at = order.chain_alert_at or now
    order.save(update_fields=["chain_alert", "chain_alert_at", "updated_at"])
    audit_record(actor=actor, action="chain_alert_raised", obj=order, reason=text,
                 data={"subject": subject, **(data or {})})
    log.warning("order %s flagged for the operators: %s", order.reference, text)
    operator_event_raise(order=order, kind=OperatorEvent.Kind.REORGED, key=subject, text=text, now=now,
                         data={"subject": subject})
    return True


def chain_alert_resolved(*, order: Order, subject: str, text: str, actor: str, now: datetime,
                         still_open: bool) -> None:
    """What was found gone is back (``text`` says where). The alert keeps a trace: amended while other
    findings are ``still_open``, cleared otherwise; the operators are told either way."""
    _require_atomic()
    before = order.chain_alert
    if still_open:
        order.chain_alert = f"{before}\n{text}" if before else text
        action = "chain_alert_amended"
    else:
        order.chain_alert, order.chain_alert_at = "", None
        action = "chain_alert_cleared"
    order.save(update_fields=["chain_alert", "chain_alert_at", "updated_at"])
    audit_record(actor=actor, action=action, obj=order, reason=text, data={"subject": subject, "alert_was": before})
    log.warning("order %s: %s", order.reference, text)
    kind = OperatorEvent.Kind.REORG_RESOLVED
    operator_event_raise(order=order, kind=kind, key=f"{subject} {next_key(order, kind)}", text=text, now=now,
                         data={"subject": subject, "still_open": still_open})


def chain_alert_clear(*, order: Order, actor: str, reason: str, now: datetime | None = None) -> Order:
    """An operator has checked the alert and clears it, saying why (e.g. "customer paid again, tx …")."""
    reason = need_reason(reason)
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(order)
        if not locked.chain_alert:
            raise NotAllowedNow(_("This order has no chain alert to clear."), code="no_alert")
        before, raised_at = locked.chain_alert, locked.chain_alert_at
        locked.chain_alert, locked.chain_alert_at = "", None
        locked.save(update_fields=["chain_alert", "chain_alert_at", "updated_at"])
        audit_record(actor=actor, action="chain_alert_cleared", obj=locked, reason=reason,
                     data={"alert_was": before, "raised_at": raised_at.isoformat() if raised_at else None,
                           "cleared_at": now.isoformat()})
    return locked


__all__ = ["chain_alert_raise", "chain_alert_resolved", "chain_alert_clear", "already_told"]
