"""Chain alerts as the operators meet them: raised once per finding, emailed
by the outbox to the configured addresses (else the staff's; with none, kept
as failed and said), and cleared with a reason by the admin's tool."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.models import Order, OrderEmail
from anchorgpu.orders.notify import NO_OPERATOR_ADDRESS, emails_send_due
from anchorgpu.orders.queue import PaymentQueueEntry
from anchorgpu.orders.transitions import order_lock
from anchorgpu.payments.chain_alerts import chain_alert_raise
from tests import shop

pytestmark = pytest.mark.django_db
SUBJECT = "evm:0xabc:0 in block 7 (0xdef)"


@pytest.fixture
def order():
    shop.load_shop()
    return shop.place(shop.customer(), asset="eth")


def raise_alert(order, subject=SUBJECT) -> bool:
    with transaction.atomic():
        return chain_alert_raise(order=order_lock(order), subject=subject, actor="chain-watcher",
                                 now=timezone.now(), text=f"Transfer {subject} is no longer on chain.")


def operator_emails(order):
    return OrderEmail.objects.filter(order=order, kind=OrderEmail.Kind.OPERATOR_ALERT)


def test_one_finding_is_raised_once_and_another_is_added(order):
    assert raise_alert(order) and not raise_alert(order)
    assert raise_alert(order, subject="evm:0x999:0 in block 9 (0x111)")
    alert = Order.objects.get(pk=order.pk).chain_alert
    assert alert.splitlines() == [f"Transfer {SUBJECT} is no longer on chain.",
                                  "Transfer evm:0x999:0 in block 9 (0x111) is no longer on chain."]
    assert operator_emails(order).count() == 2
    assert AuditEntry.objects.filter(action="chain_alert_raised", object_id=str(order.pk)).count() == 2
    assert PaymentQueueEntry.objects.filter(pk=order.pk).exists()


def test_without_any_operator_address_the_alert_is_kept_as_failed(order, settings):
    settings.ANCHORGPU_OPERATOR_EMAILS = ""
    get_user_model().objects.filter(is_staff=True).update(email="")
    raise_alert(order)
    mail.outbox.clear()
    emails_send_due()
    email = operator_emails(order).get()
    assert email.failed_at is not None and email.sent_at is None and email.last_error == NO_OPERATOR_ADDRESS
    assert "no operator address configured" in email.last_error
    assert not [m for m in mail.outbox if SUBJECT in m.body]


def test_without_a_setting_the_active_staff_are_told(order, settings):
    settings.ANCHORGPU_OPERATOR_EMAILS = ""
    users = get_user_model().objects
    users.create_user("op", email="op@anchorgpu.example", password="x", is_staff=True)
    users.create_user("gone", email="gone@anchorgpu.example", password="x", is_staff=True, is_active=False)
    raise_alert(order)
    mail.outbox.clear()
    emails_send_due()
    [sent] = [m for m in mail.outbox if SUBJECT in m.body]
    assert sent.to == ["op@anchorgpu.example"]
    assert reverse("admin:orders_order_change", args=[order.pk]) in sent.body


def test_the_operator_clears_the_alert_with_a_reason(order, admin_client):
    raise_alert(order)
    url = reverse("admin:orders_order_clear_chain_alert", args=[order.pk])
    assert admin_client.post(url, {"reason": ""}).status_code == 200  # a reason is required
    assert Order.objects.get(pk=order.pk).chain_alert
    response = admin_client.post(url, {"reason": "customer paid again in 0x123"})
    assert response.status_code == 302
    order = Order.objects.get(pk=order.pk)
    assert order.chain_alert == "" and order.chain_alert_at is None
    entry = AuditEntry.objects.get(action="chain_alert_cleared", object_id=str(order.pk))
    assert entry.reason == "customer paid again in 0x123" and SUBJECT in entry.data["alert_was"]
    assert entry.actor == "admin"
    assert not PaymentQueueEntry.objects.filter(pk=order.pk).exists()
    again = admin_client.post(url, {"reason": "twice"})
    assert again.status_code == 200 and "This order has no chain alert to clear." in again.content.decode()


def test_metrics_count_the_flagged_orders(order, client, settings):
    settings.ANCHORGPU_METRICS_TOKEN = "token-for-the-alert-test"
    auth = {"HTTP_AUTHORIZATION": "Bearer token-for-the-alert-test"}
    assert "anchorgpu_orders_chain_alert 0.0" in client.get("/metrics", **auth).content.decode()
    raise_alert(order)
    assert "anchorgpu_orders_chain_alert 1.0" in client.get("/metrics", **auth).content.decode()


def test_a_flagged_paid_order_waits_for_the_operator_before_access_is_prepared(order):
    from anchorgpu.orders.fulfilment import provision_due
    from anchorgpu.payments.chain_alerts import chain_alert_clear

    shop.pay(order, txid=shop.TXID_EVM, confirmations=order.quote.confirmations_required)
    raise_alert(order)
    assert provision_due() == 0 and Order.objects.get(pk=order.pk).state == "paid"
    chain_alert_clear(order=order, actor="operator", reason="the customer paid again; transfer checked")
    assert provision_due() == 1 and Order.objects.get(pk=order.pk).state == "active"
