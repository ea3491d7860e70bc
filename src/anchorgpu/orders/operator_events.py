"""What the operators hear about: an order that needs a person, as one event per happening.

An event is raised inside the transaction of the change it is about (the order locked by the caller) and
is unique on (order, kind, key): the key names the happening (the reorganised transfer, the claimed
transaction and its verdict, the audit row of the state change, the n-th time a refund fell due), so the
same finding seen twice is raised once. Raising it queues, in that same transaction, one email to the
operators (``OrderEmail`` of kind ``operator_alert``, sent by ``notify.emails_send_due``) and one
``WebhookDelivery`` per URL of ``ANCHORGPU_OPERATOR_WEBHOOK_URLS`` (sent by ``webhooks.webhooks_send_due``).

The cases (``OperatorEvent.Kind``), and where each is raised:
- ``order.underpaid``: confirmed transfers short of the quote (``transitions.order_transition``);
- ``order.paid_late``: paid after expiry and the cards are taken (``payments.services.note_excess``);
- ``order.wrong_asset``: the claimed transaction pays in another coin, token or network
  (``payments.claim_check``);
- ``order.reorged`` / ``order.reorg_resolved``: money counted is gone from the chain / back
  (``payments.chain_alerts``);
- ``order.provisioning_failed``: access could not be prepared, or was lost (``transitions.order_transition``);
- ``order.refund_due``: money is owed back, or a paid term ended before access was ready
  (``payments.services.note_excess``, ``lifecycle``);
- ``order.wipe_failed``: an ended order's machine could not be wiped after the last try (``wipes``), or the
  cards a move left (``move_wipes``);
- ``order.maintenance_conflict``: a maintenance window hits the term and no other cards are free for it
  (``maintenance.maintenance_enter``);
- ``host.refused``: a host refused (``HostRefused``) during a step, a wipe or a health re-check
  (``step_failures.refuse_host``), or by fleet discovery with no order: ``on_host_refused``.

An event has an order, except ``host.refused`` raised without one: it is then the host's (``OperatorEvent.host``),
unique on (host, kind, key), and its email (an ``OrderEmail`` with no order) links to the host's admin page.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from anchorgpu.payments.evaluation import EvaluationError
from anchorgpu.payments.selectors import payment_status

from .models import OperatorEvent, Order, OrderEmail, WebhookDelivery
from .states import OrderState

log = logging.getLogger(__name__)
Kind = OperatorEvent.Kind
S = OrderState


def _utc(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment else None


def _order_data(order: Order) -> dict:
    """The order as a receiver needs it to act: reference, state, amounts as integer base-unit strings."""
    data = {"reference": order.reference, "state": order.state, "refund_due": order.refund_due,
            "created_at": _utc(order.created_at),
            "admin_url": settings.ANCHORGPU_SITE_URL.rstrip("/") + reverse("admin:orders_order_change",
                                                                          args=[order.pk])}
    quote = getattr(order, "quote", None)  # None when the order has no quote (RelatedObjectDoesNotExist)
    if quote is None:
        return data
    asset = quote.asset
    data.update({"asset": asset.code, "network": asset.network, "decimals": asset.decimals,
                 "amount_due": str(quote.amount), "deposit_address": quote.address,
                 "quote_expires_at": _utc(quote.expires_at)})
    try:
        ev = payment_status(order)
    except EvaluationError:  # corrupt transfer data: the event still goes, without the sums
        return data
    data.update({"received": str(ev.confirmed_total), "unconfirmed": str(ev.unconfirmed_total),
                 "shortfall": str(ev.shortfall), "excess": str(ev.excess)})
    return data


def operator_event_raise(*, order: Order | None, kind: str, key: str, text: str, data: dict | None = None,
                         now: datetime | None = None, host=None) -> OperatorEvent | None:
    """Raise ``kind`` about ``order`` (locked by the caller, inside its transaction), saying ``text`` (English,
    the operators' language). None when this (order, kind, key) was raised before: nothing is written then.
    With no order, the event is about ``host`` (a ``fleet.Host``) alone, unique on (host, kind, key)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("an operator event is raised inside the transaction of the change it is about")
    if order is None and host is None:
        raise ValueError("an operator event is about an order or a host")
    kind = Kind(kind)
    key = key[:200]
    same = (OperatorEvent.objects.filter(order=order, kind=kind, key=key) if order is not None
            else OperatorEvent.objects.filter(order__isnull=True, host=host, kind=kind, key=key))
    if same.exists():
        return None
    now = now or timezone.now()
    event = OperatorEvent(order=order, host=host, kind=kind, key=key, text=text, created_at=now)
    about = {"order": _order_data(order)} if order is not None else {}
    event.payload = {"id": event.event_id, "type": kind.value, "created_at": _utc(now),
                     "data": {"text": text, **about, **(data or {})}}
    try:
        with transaction.atomic():  # a savepoint: a concurrent raise of the same event loses quietly
            event.save()
    except IntegrityError:
        return None
    OrderEmail.objects.create(order=order, kind=OrderEmail.Kind.OPERATOR_ALERT, note=text, event=event, due_at=now)
    WebhookDelivery.objects.bulk_create(WebhookDelivery(event=event, url=url, due_at=now)
                                        for url in settings.ANCHORGPU_OPERATOR_WEBHOOK_URLS)
    log.warning("%s needs an operator (%s): %s", event.subject, kind.value, text)
    return event


def next_key(order: Order, kind: str) -> str:
    """For a happening that its caller knows to be new (a flag that just rose): the n-th of its kind."""
    return f"#{OperatorEvent.objects.filter(order=order, kind=kind).count() + 1}"


def on_transition(order: Order, target: OrderState, *, audit_id: int, reason: str, data: dict | None) -> None:
    """The states that need a person as soon as they are entered (called by ``order_transition``)."""
    if target is S.UNDERPAID:
        detail = data or {}
        text = ("Confirmed transfers are short of the quote"
                + (f" (received {detail['received']}, short by {detail['shortfall']} base units)"
                   if "received" in detail and "shortfall" in detail else "")
                + ": wait for a top-up, accept it as paid, or refund.")
        operator_event_raise(order=order, kind=Kind.UNDERPAID, key=f"audit:{audit_id}", text=text)
    elif target is S.FAILED:
        error = f" Last error: {order.last_error}" if order.last_error else ""
        operator_event_raise(order=order, kind=Kind.PROVISIONING_FAILED, key=f"audit:{audit_id}",
                             text=f"Access could not be prepared ({reason}): fix the cause and retry access "
                                  f"preparation, or refund.{error}")


def on_refund_due(order: Order, *, why: str = "") -> None:
    """The order's refund flag has just risen (called where it is set)."""
    if order.order_state is S.PAID_LATE:
        kind, text = Kind.PAID_LATE, ("Paid after the quote expired and the cards were taken meanwhile: re-check "
                                      "capacity, offer the earliest free start, or refund.")
    else:
        excess = int((order.excess or {}).get("units", 0) or 0)
        kind = Kind.REFUND_DUE
        text = why or (f"{excess} base units were received that the order does not keep: refund them to the "
                       "customer's refund address." if excess else "A refund is due.")
    operator_event_raise(order=order, kind=kind, key=next_key(order, kind), text=text)


def on_host_refused(*, host, why: str, order: Order | None = None) -> OperatorEvent | None:
    """A host was refused (``HostRefused``: its SSH host key is not the pinned one, or it contradicts the fleet
    record), in the caller's transaction. Raised once per host and finding (the key names both). With an order,
    the event is the order's (found while preparing or wiping it); without one (fleet discovery), the host's
    alone: the same email to the operators and webhooks, linking to the host's admin page."""
    block = f" It is taken off sale: {host.sale_block}" if host.sale_block else ""
    text = (f"Host {host.name} was refused: {why}.{block} Check the host (and its pinned key or fleet record) "
            f"before it is used again; clear its sale block once fixed.")
    key = f"host:{host.pk}:{why}"[:200]
    data = {"host": {"name": host.name, "ssh_address": host.ssh_address, "sale_block": host.sale_block}}
    return operator_event_raise(order=order, host=host, kind=Kind.HOST_REFUSED, key=key, text=text, data=data)
