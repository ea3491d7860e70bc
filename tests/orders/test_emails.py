"""Customer emails go through an outbox: queued in the transaction of the change they are about, sent by the
worker (``notify.emails_send_due``), tried again when the mail server fails, sent once."""

from __future__ import annotations

import smtplib
import threading
import time
from datetime import timedelta

import pytest
from django.core import mail
from django.core.mail.backends.locmem import EmailBackend
from django.db import connection, transaction
from django.utils import timezone

from anchorgpu.orders import notify
from anchorgpu.orders.models import OrderEmail
from anchorgpu.orders.states import OrderState
from anchorgpu.orders.transitions import order_lock, order_transition
from tests import shop


class RefusingBackend(EmailBackend):
    def send_messages(self, messages):
        raise smtplib.SMTPServerDisconnected("the mail server went away")


class SlowBackend(EmailBackend):
    def send_messages(self, messages):
        time.sleep(0.02)  # long enough for two workers to overlap
        return super().send_messages(messages)


@pytest.mark.django_db
def test_an_order_queues_its_email_and_the_worker_sends_it_once(mailoutbox):
    shop.load_shop()
    order = shop.place(shop.customer())
    queued = order.emails.get()
    assert (queued.kind, queued.sent_at, queued.attempts) == ("order_placed", None, 0)
    assert mailoutbox == []  # the order request sends nothing itself
    assert notify.emails_send_due() == 1
    (message,) = mailoutbox
    assert message.to == [order.email] and order.reference in message.subject
    assert order.quote.address in message.body and "payment details" in message.subject
    queued.refresh_from_db()
    assert queued.sent_at is not None and queued.attempts == 1 and queued.last_error == ""
    assert notify.emails_send_due() == 0 and len(mailoutbox) == 1


@pytest.mark.django_db
def test_a_change_that_is_rolled_back_queues_no_email(mailoutbox):
    shop.load_shop()
    order = shop.place(shop.customer())
    with pytest.raises(RuntimeError), transaction.atomic():
        order_transition(order=order_lock(order), to=OrderState.CANCELLED, actor="alice", reason="changed mind")
        assert order.emails.filter(kind="state_changed").count() == 1  # queued inside the transaction...
        raise RuntimeError("something later in the same transaction failed")
    assert list(order.emails.values_list("kind", flat=True)) == ["order_placed"]  # ...and gone with it
    assert notify.emails_send_due() == 1 and "payment details" in mailoutbox[0].subject


def _refused_once(settings):
    """An order whose email the mail server has refused once; the moment of that attempt."""
    shop.load_shop()
    order = shop.place(shop.customer())
    settings.EMAIL_BACKEND = "tests.orders.test_emails.RefusingBackend"
    now = timezone.now() + timedelta(seconds=1)
    assert notify.emails_send_due(now=now) == 0
    return order, now


@pytest.mark.django_db
def test_a_failing_mail_server_is_tried_again_later_then_given_up(settings, mailoutbox):
    order, now = _refused_once(settings)
    email = order.emails.get()
    assert email.attempts == 1 and email.due_at == now + notify.RETRY_AFTER[0]
    assert email.last_error == "SMTPServerDisconnected: the mail server went away"
    assert email.sent_at is None and email.failed_at is None
    order.refresh_from_db()
    assert order.state == "awaiting_payment"  # the order does not depend on its email
    assert notify.emails_send_due(now=now + timedelta(seconds=30)) == 0  # not due yet: not tried
    email.refresh_from_db()
    assert email.attempts == 1
    for _ in notify.RETRY_AFTER:
        now = email.due_at
        notify.emails_send_due(now=now)
        email.refresh_from_db()
        if email.failed_at is None:
            assert email.due_at - now == notify.RETRY_AFTER[email.attempts - 1]
    assert email.attempts == len(notify.RETRY_AFTER) + 1 and email.failed_at == now and email.sent_at is None
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert notify.emails_send_due(now=now + timedelta(days=1)) == 0  # given up: the operator sees it
    assert mailoutbox == []


@pytest.mark.django_db
def test_an_email_that_failed_once_is_sent_once_when_the_server_is_back(settings, mailoutbox):
    order, now = _refused_once(settings)
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert notify.emails_send_due(now=now + notify.RETRY_AFTER[0]) == 1
    assert notify.emails_send_due(now=now + timedelta(days=1)) == 0
    assert len(mailoutbox) == 1 and mailoutbox[0].to == [order.email]
    email = order.emails.get()
    assert email.attempts == 2 and email.sent_at is not None and email.failed_at is None


@pytest.mark.django_db(transaction=True)
def test_an_email_is_queued_only_inside_the_change_it_is_about():
    shop.load_shop()
    order = shop.place(shop.customer())
    with pytest.raises(RuntimeError, match="inside the transaction"):
        notify.order_placed(order.pk)
    assert order.emails.count() == 1


@pytest.mark.postgres_only
@pytest.mark.db_race
@pytest.mark.django_db(transaction=True)
def test_two_workers_never_send_the_same_email(settings, monkeypatch):
    """Two workers at once, each on its own connection, taking two emails at a time: every queued email is sent
    exactly once."""
    monkeypatch.setattr(notify, "BATCH", 2)
    shop.load_shop()
    user = shop.customer()
    orders = [shop.place(user) for _ in range(12)]
    settings.EMAIL_BACKEND = "tests.orders.test_emails.SlowBackend"
    mail.outbox = []
    counts, errors = [], []
    start = threading.Barrier(2)

    def worker():
        try:
            start.wait()
            counts.append(notify.emails_send_due())
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(counts) == 12 and all(counts), counts  # both took some: they ran side by side
    sent_to = sorted(m.subject for m in mail.outbox)
    assert sent_to == sorted({m.subject for m in mail.outbox}) and len(sent_to) == 12
    assert {o.reference for o in orders} == {s.split()[1].rstrip(":") for s in sent_to}
    assert not OrderEmail.objects.filter(sent_at__isnull=True).exists()
    assert set(OrderEmail.objects.values_list("attempts", flat=True)) == {1}
