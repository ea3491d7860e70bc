"""Emails to the customer, in the language the order was placed in, and alerts about an order to the
operators, in English (queued by ``operator_events.operator_event_raise``: to ``ANCHORGPU_OPERATOR_EMAILS``,
else the active staff users; the same events go to the operators' webhooks, ``webhooks``).

The services queue an email (an ``OrderEmail`` row) inside the transaction of the change it is about; the
worker sends what is due (``emails_send_due``). An order request therefore neither waits for the mail server
nor renders the email, a rolled-back change sends nothing, and a committed one is not forgotten when the
mail server is down: a failed send is tried again later (``RETRY_AFTER``), and given up after the last
attempt, logged and kept for the operator (the order's admin page lists its emails).

A send is at least once: a worker that dies after the mail server took the email and before its row is
marked sent sends it again. Two workers never send the same row at once: each takes the rows it sends with
``FOR UPDATE SKIP LOCKED`` (PostgreSQL; SQLite runs one writer at a time).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone, translation

from .models import STATE_LABELS, OrderEmail
from .move_page import move_facts
from .states import OrderState

log = logging.getLogger(__name__)

# After the n-th failed attempt, the next one waits RETRY_AFTER[n - 1]; after the last, the email is given up.
RETRY_AFTER = (timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2),
               timedelta(hours=6))
BATCH = 50


NO_OPERATOR_ADDRESS = "no operator address configured (set ANCHORGPU_OPERATOR_EMAILS, or give a staff user an email)"


def _queue(order_pk: int, kind: str, state: str = "", note: str = "") -> OrderEmail:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("an order email is queued inside the transaction of the change it is about")
    return OrderEmail.objects.create(order_id=order_pk, kind=kind, state=state, note=note, due_at=timezone.now())


def state_changed(order_pk: int, state: OrderState, *, note: str = "") -> None:
    """About the move to ``state`` (the order may have moved on by the time it is sent); ``note``: the
    operator's words to the customer about it (why a claim was marked invalid)."""
    _queue(order_pk, OrderEmail.Kind.STATE_CHANGED, OrderState(state).value, note=note)


def order_placed(order_pk: int) -> None:
    _queue(order_pk, OrderEmail.Kind.ORDER_PLACED)


def term_ending(order_pk: int) -> None:
    """A day before the term ends."""
    _queue(order_pk, OrderEmail.Kind.TERM_ENDING)


def term_ending_hour(order_pk: int) -> None:
    """An hour before the term ends."""
    _queue(order_pk, OrderEmail.Kind.TERM_ENDING_HOUR)


def service_credit(order_pk: int, *, notes: list[str]) -> None:
    """Service credit notes were issued for the order (``credits.order_credit_issue``): ``notes``, their numbers."""
    _queue(order_pk, OrderEmail.Kind.SERVICE_CREDIT, note=", ".join(notes))


def order_moved(order_pk: int) -> None:
    """The term was moved to other cards (``moves.order_move``); the email tells the move made before it."""
    _queue(order_pk, OrderEmail.Kind.MOVED)


def refund_sent(order_pk: int) -> None:
    """A refund of a watched asset was found on chain paying the customer."""
    _queue(order_pk, OrderEmail.Kind.REFUND_SENT)


def operator_addresses() -> list[str]:
    """Where operator alerts go: ``ANCHORGPU_OPERATOR_EMAILS``, else every active staff user with an address."""
    listed = getattr(settings, "ANCHORGPU_OPERATOR_EMAILS", "") or ""
    configured = [a.strip() for a in listed.split(",") if a.strip()]
    if configured:
        return configured
    from django.contrib.auth import get_user_model

    staff = get_user_model().objects.filter(is_staff=True, is_active=True).exclude(email="")
    return sorted({email for email in staff.values_list("email", flat=True)})


def _about(email: OrderEmail) -> str:
    """For the logs: the order's reference, or the host an alert is about."""
    if email.order_id:
        return f"order {email.order.reference}"
    return email.event.subject if email.event_id else "?"


def _operator_message(email: OrderEmail) -> tuple[str, str]:
    order = email.order
    with translation.override("en"):  # the operators' language
        if order is not None:
            link = settings.ANCHORGPU_SITE_URL.rstrip("/") + reverse("admin:orders_order_change", args=[order.pk])
        else:  # an alert about a host alone
            link = settings.ANCHORGPU_SITE_URL.rstrip("/") + reverse("admin:fleet_host_change",
                                                                     args=[email.event.host_id])
        context = {"order": order, "link": link, "note": email.note, "event": email.event,
                   "host": email.event.host if email.event_id else None}
        subject = " ".join(render_to_string("orders/email/operator_alert_subject.txt", context).split())
        body = render_to_string("orders/email/operator_alert.txt", context)
    return subject, body


def _message(email: OrderEmail) -> tuple[str, str]:
    if email.kind == OrderEmail.Kind.OPERATOR_ALERT:
        return _operator_message(email)
    order = email.order
    context: dict = {}
    if email.kind == OrderEmail.Kind.STATE_CHANGED:
        state = OrderState(email.state)
        # A refund of a watched asset is "sent" only once the chain shows it (payments.refunds.refund_verify).
        on_its_way = state is OrderState.REFUNDED and any(not r.shown_as_sent for r in order.refunds.all())
        context = {"state": state.value, "state_label": STATE_LABELS[state], "refund_on_its_way": on_its_way,
                   "operator_note": email.note}
    elif email.kind in (OrderEmail.Kind.TERM_ENDING, OrderEmail.Kind.TERM_ENDING_HOUR):
        from .reminders import end_reminder  # what to say as the order stands when the email goes

        with translation.override(order.language):
            context = {"reminder": end_reminder(order, within=None)}
    elif email.kind == OrderEmail.Kind.REFUND_SENT:
        # Base units: the template writes them in the order's language (locale_formats).
        context = {"asset": order.quote.asset,
                   "refunds": [(r.amount, r.txid, r.asset) for r in order.refunds.all() if r.verified_at is not None]}
    elif email.kind == OrderEmail.Kind.SERVICE_CREDIT:
        from anchorgpu.billing.models import CreditNote

        numbers = [n.strip() for n in email.note.split(",") if n.strip()]
        notes = CreditNote.objects.filter(invoice__order__in=[order, *order.extensions.all()],
                                          customer_reason="fault")
        # The notes this email is about; an e-mail rendered without its row (the translation checks) shows all.
        context = {"notes": list((notes.filter(number__in=numbers) if numbers else notes).order_by("sequence"))}
    elif email.kind == OrderEmail.Kind.MOVED:
        moves = order.moves.order_by("created_at", "id")
        move = (moves.filter(created_at__lte=email.created_at) if email.created_at else moves).last()
        context = {"move": move_facts(move) if move else None}
    with translation.override(order.language):
        link = settings.ANCHORGPU_SITE_URL.rstrip("/") + reverse("order", kwargs={"reference": order.reference})
        context = {"order": order, "link": link, **context}
        subject = " ".join(render_to_string(f"orders/email/{email.kind}_subject.txt", context).split())
        body = render_to_string(f"orders/email/{email.kind}.txt", context)
    return subject, body


def _send_one(email: OrderEmail, now: datetime) -> bool:
    email.attempts += 1
    recipients = operator_addresses() if email.kind == OrderEmail.Kind.OPERATOR_ALERT else [email.order.email]
    if not recipients:
        # Trying again would not help until someone configures an address: kept, given up, and said.
        email.last_error, email.failed_at = NO_OPERATOR_ADDRESS[:300], now
        log.error("the operator alert about %s has nowhere to go: %s", _about(email), email.last_error)
        email.save(update_fields=["attempts", "last_error", "failed_at"])
        return False
    try:
        subject, body = _message(email)
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, recipients)
    except Exception as exc:  # noqa: BLE001 - the mail server's or a template's: tried again, then given up
        email.last_error = f"{type(exc).__name__}: {exc}"[:300]
        if email.attempts > len(RETRY_AFTER):
            email.failed_at = now
            log.error("gave up the %s email of %s after %d attempts: %s", email.kind,
                      _about(email), email.attempts, email.last_error)
        else:
            email.due_at = now + RETRY_AFTER[email.attempts - 1]
            log.warning("could not send the %s email of %s (attempt %d), trying again at %s: %s",
                        email.kind, _about(email), email.attempts, email.due_at.isoformat(),
                        email.last_error)
        email.save(update_fields=["attempts", "last_error", "due_at", "failed_at"])
        return False
    email.sent_at = now
    email.save(update_fields=["attempts", "sent_at"])
    return True


def emails_send_due(*, now: datetime | None = None) -> int:
    """Send the emails due by ``now`` (a worker sweep). Returns how many were sent."""
    now = now or timezone.now()
    sent = 0
    due_now = OrderEmail.objects.filter(sent_at__isnull=True, failed_at__isnull=True, due_at__lte=now)
    if not due_now.exists():  # a plain read: no write transaction (on SQLite, no write lock) when none is due
        return 0
    while True:
        with transaction.atomic():
            due = list(due_now.select_for_update(skip_locked=True, of=("self",))
                       .select_related("order__product", "order__environment", "order__quote__asset", "event__host")
                       .order_by("due_at", "id")[:BATCH])
            for email in due:
                sent += _send_one(email, now)
        if len(due) < BATCH:
            return sent
