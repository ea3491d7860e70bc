"""The one place an order changes state: checks the transition table, saves,
writes the audit row, queues the customer's email and, for a state that needs a
person, the operators' alert (``operator_events``), all in the caller's transaction."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _

from anchorgpu.audit.services import audit_record

from . import notify, operator_events
from .errors import NotAllowedNow
from .models import Order
from .states import OrderState, TransitionRefused, check_transition


def order_lock(order: Order | int) -> Order:
    """The order's row, locked until the surrounding transaction ends."""
    pk = order if isinstance(order, int) else order.pk
    # of=("self",): lock the order's row only, not the product's (placements take turns on that one).
    return Order.objects.select_for_update(of=("self",)).select_related("product", "environment").get(pk=pk)


def order_transition(*, order: Order, to: OrderState, actor: str, reason: str = "", data: dict | None = None,
                     update_fields: tuple[str, ...] = (), customer_note: str = "") -> Order:
    """Move ``order`` (locked by the caller, inside its transaction) to ``to``. ``customer_note``: what the
    operator tells the customer about it, in the state change's e-mail (``reason`` is the operators' own)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("order_transition runs inside the caller's transaction, with the order locked")
    current = order.order_state
    try:
        target = check_transition(current, to)
    except TransitionRefused:
        raise NotAllowedNow(_("This order is %(state)s; that cannot be done now.")
                            % {"state": order.state_label}) from None
    order.state = target.value
    order.save(update_fields=["state", "updated_at", *update_fields])
    entry = audit_record(actor=actor, action="order_state", obj=order, from_state=current.value,
                         to_state=target.value, reason=reason, data=data)
    notify.state_changed(order.pk, target, note=customer_note)
    operator_events.on_transition(order, target, audit_id=entry.pk, reason=reason, data=data)
    return order
