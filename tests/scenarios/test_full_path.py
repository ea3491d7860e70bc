"""The whole path through Django's test client, as a customer and an
operator would walk it: catalog → checkout → order → "I've paid" → the
operator records the transfer → paid → access preparation → active → term
end → completed. The invoice, the emails and the audit trail are checked
along the way."""

from __future__ import annotations

from datetime import timedelta
from datetime import timezone as dt_timezone

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from pypdf import PdfReader

from anchorgpu.allocation.models import Booking
from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.lifecycle import terms_end_due, terms_warn_due
from anchorgpu.orders.models import Order
from anchorgpu.orders.notify import emails_send_due
from anchorgpu.orders.provisioning import PLAN, WIPE
from anchorgpu.orders.wipes import wipes_due
from tests import shop

pytestmark = pytest.mark.django_db


def test_catalog_to_completed_term(client, django_capture_on_commit_callbacks, mailoutbox):
    shop.load_shop()
    operator = get_user_model().objects.create_superuser("operator", "ops@anchorgpu.example", "pw-for-tests-only")
    staff = type(client)()
    staff.force_login(operator)

    # The customer finds a card in the catalog and follows "Configure", then "Order".
    catalog = client.get(reverse("catalog") + "?term=7&quantity=2")
    assert catalog.status_code == 200 and "H100 SXM 80 GB" in catalog.content.decode()
    product = client.get(reverse("product", kwargs={"slug": "h100-sxm-80gb"}) + "?quantity=2&term=7")
    checkout_url = reverse("checkout", kwargs={"slug": "h100-sxm-80gb"})
    assert checkout_url in product.content.decode()

    # Sign up (checkout needs an account), then the checkout form.
    response = client.post(reverse("signup"), {"email": "Ana@Example.com", "name": "Ana Lima",
                                               "password1": "a long pass phrase 42", "password2":
                                               "a long pass phrase 42", "next": checkout_url})
    assert response.status_code == 302
    form = client.get(checkout_url + "?quantity=2&term=7")
    assert form.status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(checkout_url, {
            "quantity": "2", "term": "7", "start_mode": "asap", "environment": "pytorch-cuda124",
            "options": ["checkpoint-storage-1tb"], "name": "Ana Lima", "email": "ana@example.com",
            "company": "Lima Labs", "country": "BR", "billing_address": "Rua A, 1\nSão Paulo",
            "vat_id": "", "ssh_keys": shop.ED25519, "asset": "usdc-ethereum", "accept": "on"})
    assert response.status_code == 302, response.content.decode()[:2000]
    order = Order.objects.get()
    assert order.state == "awaiting_payment" and order.quantity == 2 and order.cards == 2
    assert order.booking.kind == Booking.Kind.HOLD
    quote = order.quote
    assert quote.asset.code == "usdc-ethereum" and quote.address.startswith("0x")
    assert quote.amount == int(order.fiat_total * 10**6)  # USDC at 1.00 USD, six decimals, rounded up
    assert emails_send_due() == 1  # the worker sends what the order queued
    assert "payment details" in mailoutbox[-1].subject and quote.address in mailoutbox[-1].body

    # The order page: quote, address, QR code, "I've paid".
    page = client.get(response.url)
    assert page.status_code == 200, page.status_code
    page = page.content.decode()
    assert quote.address in page, page[page.find("<main"):][:3000] and "<svg" in page and "I&#x27;ve paid" in page

    # "I've paid", with the transaction hash.
    txid = "0x" + "5e" * 32
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("order_claim_payment", kwargs={"reference": order.reference}),
                               {"txid": txid.upper().replace("0X", "0x")})
    assert response.status_code == 302
    order.refresh_from_db()
    assert order.state == "payment_claimed" and order.claimed_txid == txid

    # The operator finds it in the payment queue and records the transfer.
    queue = staff.get(reverse("admin:orders_paymentqueueentry_changelist")).content.decode()
    assert order.reference in queue
    seen = (quote.created_at + timedelta(minutes=3)).astimezone(dt_timezone.utc)
    with django_capture_on_commit_callbacks(execute=True):
        response = staff.post(reverse("admin:orders_order_record_transfer", args=[order.pk]), {
            "txid": txid, "index": "17", "amount": str(quote.amount), "confirmations": "12",
            "seen_at_0": f"{seen:%Y-%m-%d}", "seen_at_1": f"{seen:%H:%M:%S}", "sender": "", "note": "log 17"})
    assert response.status_code == 302
    order.refresh_from_db()
    assert order.state == "paid" and order.booking.kind == Booking.Kind.CONFIRMED
    invoice = order.invoice
    assert invoice.number.startswith(f"INV-{invoice.issued_at.year}-") and invoice.total == order.fiat_total
    assert [line.kind for line in invoice.lines.all()] == ["cards", "discount", "option"]
    assert invoice.crypto_amount == quote.amount and invoice.asset_symbol == "USDC"
    pdf = client.get(reverse("invoice_pdf", kwargs={"reference": order.reference}))
    assert pdf.status_code == 200 and pdf["Content-Type"] == "application/pdf"
    text = "".join(p.extract_text() for p in PdfReader(__import__("io").BytesIO(pdf.content)).pages)
    assert invoice.number in text and "Ana Lima" in text

    # The worker prepares access when the term starts.
    with django_capture_on_commit_callbacks(execute=True):
        assert provision_due(now=order.starts_at) == 1
    order.refresh_from_db()
    assert order.state == "active" and order.access_host and order.access_port and order.access_user
    steps = list(order.steps.order_by("finished_at", "id").values_list("step", flat=True))
    assert steps == [step.value for step in PLAN]
    page = client.get(reverse("order", kwargs={"reference": order.reference})).content.decode()
    assert f"ssh -p {order.access_port} {order.access_user}@{order.access_host}" in page
    assert "simulated fleet" in page
    emails_send_due()
    assert order.access_host in mailoutbox[-1].body

    # A day before the end, a warning; at the end, release, wipe, completed.
    with django_capture_on_commit_callbacks(execute=True):
        assert terms_warn_due(now=order.ends_at - timedelta(hours=23)) == 1
        assert terms_end_due(now=order.ends_at) == 1
    order.refresh_from_db()
    assert order.state == "completed" and order.booking.state == Booking.State.RELEASED
    assert order.wipe_due_at == order.ends_at  # the worker's next sweep wipes, outside the term-end transaction
    assert wipes_due(now=order.ends_at) == 1 and order.steps.filter(step=WIPE).exists()

    # The audit trail holds every state change, in order, with who made it.
    trail = list(AuditEntry.objects.filter(object_type="orders.order", object_id=str(order.pk),
                                           action="order_state").order_by("at", "id")
                 .values_list("from_state", "to_state", "actor"))
    assert trail == [("awaiting_payment", "payment_claimed", "ana@example.com"),
                     ("payment_claimed", "paid", "operator"),
                     ("paid", "provisioning", "system"),
                     ("provisioning", "active", "system"),
                     ("active", "completed", "system")]
    actions = set(AuditEntry.objects.filter(object_id=str(order.pk), object_type="orders.order")
                  .values_list("action", flat=True))
    assert {"order_place", "quote_create", "transfer_record", "invoice_issue", "provisioning_step",
            "term_warning"} <= actions
    # One email per step of the customer's journey, all to the customer.
    emails_send_due()
    assert not order.emails.filter(sent_at__isnull=True).exists()
    subjects = [m.subject for m in mailoutbox]
    assert all(m.to == ["ana@example.com"] for m in mailoutbox)
    for word in ("payment details", "payment being checked", ": paid", "preparing access", "active", "term ends",
                 "completed"):
        assert any(word in s for s in subjects), (word, subjects)
    # The timeline on the order page tells the same story.
    page = client.get(reverse("order", kwargs={"reference": order.reference})).content.decode()
    for text in ("Order placed", "Transfer received", f"Invoice {invoice.number} issued", "Deliver access: done",
                 "Status: completed"):
        assert text in page, text
