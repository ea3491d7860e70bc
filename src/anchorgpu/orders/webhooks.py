"""The operators' webhooks: each operator event (``operator_events``) POSTed as JSON to every URL of
``ANCHORGPU_OPERATOR_WEBHOOK_URLS``, signed with ``ANCHORGPU_OPERATOR_WEBHOOK_SECRET(_FILE)``
(``webhook_signature``: ``t=<unix>,v1=<hex HMAC-SHA256 of "t.body">``).

Each delivery is an outbox row (``WebhookDelivery``) written with the event, in the transaction of the change,
and sent by the worker (``webhooks_send_due``): a 2xx answer delivers it; a connection failure, a time-out
(``ANCHORGPU_OPERATOR_WEBHOOK_TIMEOUT``), a redirect (never followed) or any other status is tried again after
``notify.RETRY_AFTER`` (as the customers' emails are), and given up after the last attempt, logged and shown
in the admin (the order's page and the list of webhook deliveries). A delivery whose URL was taken out of the
settings since it was queued is given up at once, unsent.

The HTTP request is made outside any database transaction: a sweep takes its rows with
``FOR UPDATE SKIP LOCKED`` in a short transaction that counts the attempt and leases the row (``LEASE``), then
sends. Two workers never send one row at once, and a worker that dies mid-send leaves the row due again once
its lease runs out. Delivery is at least once: a receiver keeps the event id (``AnchorGPU-Event-Id``) it
handled and acknowledges a repeat without acting on it again.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from . import webhook_signature
from .models import WebhookDelivery
from .notify import RETRY_AFTER
from .webhook_urls import shown_url

log = logging.getLogger(__name__)
BATCH = 20
LEASE = timedelta(minutes=2)
USER_AGENT = "AnchorGPU-Webhooks/1"


def body_of(payload: dict) -> bytes:
    """The exact bytes sent (and signed): compact JSON, keys sorted, UTF-8."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _without_query(text: str, url: str) -> str:
    parts = urlsplit(url)
    if not (parts.query or parts.fragment):
        return text
    full_path = parts.path + (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment
                                                                             else "")
    return text.replace(url, shown_url(url)).replace(full_path, parts.path or "/")


def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """One attempt: (HTTP status or None, error or "")."""
    event = delivery.event
    body = body_of(event.payload)
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
               webhook_signature.HEADER: webhook_signature.sign(body, settings.ANCHORGPU_OPERATOR_WEBHOOK_SECRET),
               webhook_signature.EVENT_ID_HEADER: event.event_id, webhook_signature.EVENT_TYPE_HEADER: event.kind}
    timeout = settings.ANCHORGPU_OPERATOR_WEBHOOK_TIMEOUT
    try:
        with requests.post(delivery.url, data=body, headers=headers, timeout=(min(timeout, 5), timeout),
                           allow_redirects=False, stream=True) as answer:
            status = answer.status_code
    except requests.Timeout:
        return None, f"Timeout: no answer within {timeout} s"
    except requests.RequestException as exc:
        return None, _without_query(f"{type(exc).__name__}: {exc}", delivery.url)
    if 200 <= status < 300:
        return status, ""
    if 300 <= status < 400:
        return status, f"HTTP {status} (redirects are not followed: give the final URL)"
    return status, f"HTTP {status}"


NOT_CONFIGURED = "the URL is no longer in ANCHORGPU_OPERATOR_WEBHOOK_URLS: not sent"


def _attempted(delivery: WebhookDelivery, now: datetime, status: int | None, error: str) -> bool:
    delivery.last_status, delivery.last_error = status, error[:300]
    if not error:
        delivery.sent_at = now
    elif delivery.attempts > len(RETRY_AFTER) or error == NOT_CONFIGURED:
        delivery.failed_at = now
        log.error("gave up the %s webhook of %s to %s after %d attempts: %s", delivery.event.kind,
                  delivery.event.subject, shown_url(delivery.url), delivery.attempts, delivery.last_error)
    else:
        delivery.due_at = now + RETRY_AFTER[delivery.attempts - 1]
        log.warning("the %s webhook of %s to %s failed (attempt %d), trying again at %s: %s",
                    delivery.event.kind, delivery.event.subject, shown_url(delivery.url),
                    delivery.attempts, delivery.due_at.isoformat(), delivery.last_error)
    delivery.save(update_fields=["last_status", "last_error", "sent_at", "failed_at", "due_at"])
    return not error


def webhooks_send_due(*, now: datetime | None = None) -> int:
    """Send the deliveries due by ``now`` (a worker sweep). Returns how many were delivered."""
    now = now or timezone.now()
    due_now = WebhookDelivery.objects.filter(sent_at__isnull=True, failed_at__isnull=True, due_at__lte=now)
    if not due_now.exists():  # a plain read: no write transaction when none is due
        return 0
    delivered = 0
    while True:
        with transaction.atomic():
            batch = list(due_now.select_for_update(skip_locked=True, of=("self",))
                         .select_related("event__order", "event__host").order_by("due_at", "id")[:BATCH])
            for delivery in batch:
                delivery.attempts += 1
                delivery.due_at = now + LEASE
            WebhookDelivery.objects.bulk_update(batch, ["attempts", "due_at"])
        configured = set(settings.ANCHORGPU_OPERATOR_WEBHOOK_URLS)
        for delivery in batch:  # the requests: outside the transaction, no lock held
            # A URL taken out of the settings (a receiver retired, or one that leaked) gets nothing more.
            outcome = _post(delivery) if delivery.url in configured else (None, NOT_CONFIGURED)
            delivered += _attempted(delivery, now, *outcome)
        if len(batch) < BATCH:
            return delivered


def webhook_retry(*, delivery: WebhookDelivery, actor: str) -> bool:
    """An operator sends a given-up delivery again (from the admin): a fresh round of attempts."""
    from anchorgpu.audit.services import audit_record

    with transaction.atomic():
        locked = WebhookDelivery.objects.select_for_update().filter(pk=delivery.pk, failed_at__isnull=False).first()
        if locked is None:
            return False
        locked.failed_at, locked.attempts, locked.due_at = None, 0, timezone.now()
        locked.save(update_fields=["failed_at", "attempts", "due_at"])
        audit_record(actor=actor, action="webhook_retry", obj=locked.event.order or locked.event.host,
                     data={"event": locked.event.event_id, "url": shown_url(locked.url)})
    return True
