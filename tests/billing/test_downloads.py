"""Who may download an order's invoice and credit notes, and the refund that makes a credit note."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.urls import reverse
from django.utils import translation

from anchorgpu.billing.models import CreditNote
from anchorgpu.billing.services import credit_note_issue
from anchorgpu.orders.models import Order
from anchorgpu.payments.models import Refund
from anchorgpu.payments.refunds import RefundInput, refund_record
from anchorgpu.payments.services import refund_address_set
from tests import shop

from .conftest import paid_order

pytestmark = pytest.mark.django_db

REFUND_ADDRESS = "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"


def invoice_url(order: Order) -> str:
    return reverse("invoice_pdf", kwargs={"reference": order.reference})


def note_url(order: Order, number: str) -> str:
    return reverse("credit_note_pdf", kwargs={"reference": order.reference, "number": number})


def goodwill_note(order: Order) -> CreditNote:
    with transaction.atomic():
        return credit_note_issue(invoice=order.invoice, amount=Decimal("1.00"), reason="goodwill", customer_reason="goodwill", actor="operator")


def assert_pdf(response, filename: str) -> None:
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == f'attachment; filename="{filename}"'
    assert "private" in response["Cache-Control"]
    assert response.content.startswith(b"%PDF-")


def test_urls_sit_under_the_order():
    with translation.override("en"):  # whatever language an earlier test's request left active
        assert invoice_url(Order(reference="AG-ABCDEFGH")) == "/en/orders/AG-ABCDEFGH/documents/invoice.pdf"
        assert (note_url(Order(reference="AG-ABCDEFGH"), "CN-2031-000001")
                == "/en/orders/AG-ABCDEFGH/documents/credit-notes/CN-2031-000001.pdf")


def test_the_owner_downloads_the_invoice_and_credit_notes(client, alice, paid):
    note = goodwill_note(paid)
    client.force_login(alice)
    assert_pdf(client.get(invoice_url(paid)), f"{paid.invoice.number}.pdf")
    assert_pdf(client.get(note_url(paid, note.number)), f"{note.number}.pdf")
    assert client.get(note_url(paid, "CN-2031-999999")).status_code == 404


def test_another_customer_gets_404(client, paid):
    note = goodwill_note(paid)
    client.force_login(shop.customer("bob@example.com"))
    assert client.get(invoice_url(paid)).status_code == 404
    assert client.get(note_url(paid, note.number)).status_code == 404


def test_a_credit_note_is_found_only_under_its_own_order(client, alice, paid):
    other = paid_order(alice)
    note = goodwill_note(other)
    client.force_login(alice)
    assert client.get(note_url(paid, note.number)).status_code == 404
    assert client.get(note_url(other, note.number)).status_code == 200


def test_anonymous_is_sent_to_log_in(client, paid):
    response = client.get(invoice_url(paid))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert "next=" in response["Location"]


def test_no_invoice_before_payment(client, alice):
    order = shop.place(alice)
    client.force_login(alice)
    assert client.get(invoice_url(order)).status_code == 404


def test_staff_may_download_any_with_the_permission_to_see_invoices(client, paid):
    from django.contrib.auth.models import Permission

    staff = get_user_model().objects.create_user(username="ops", email="ops@example.com", password="x" * 12,
                                                 is_staff=True)
    client.force_login(staff)
    assert client.get(invoice_url(paid)).status_code == 404  # staff, but not allowed to see invoices
    staff.user_permissions.add(Permission.objects.get(codename="view_invoice", content_type__app_label="billing"))
    staff = get_user_model().objects.get(pk=staff.pk)  # permissions are cached per user object
    client.force_login(staff)
    assert_pdf(client.get(invoice_url(paid)), f"{paid.invoice.number}.pdf")


def test_a_whole_refund_issues_a_credit_note_for_the_invoice_total(client, alice, paid):
    invoice = paid.invoice
    refund_address_set(order=paid, actor=alice.email, address=REFUND_ADDRESS)
    now = datetime.now(UTC)
    refund_record(order=paid, actor="operator", now=now, refund=RefundInput(
        address=REFUND_ADDRESS, amount=paid.quote.amount, rate_choice=Refund.RateChoice.QUOTE, txid="c3" * 32,
        reason="customer changed plans", whole_order=True, customer_reason="refund"))

    paid.refresh_from_db()
    assert paid.state == "refunded"
    note = invoice.credit_notes.get()
    assert note.amount == invoice.total
    assert note.number == f"CN-{now.year}-000001"
    assert note.refund.address == REFUND_ADDRESS
    client.force_login(alice)
    assert_pdf(client.get(note_url(paid, note.number)), f"{note.number}.pdf")


# --- the operators' admin ---------------------------------------------------


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser(username="root", email="root@example.com", password="x" * 12)
    client.force_login(user)
    return user


def test_admin_lists_shows_and_downloads_invoices(client, operator, paid):
    invoice = paid.invoice
    note = goodwill_note(paid)
    listing = client.get(reverse("admin:billing_invoice_changelist"), {"q": paid.reference})
    assert listing.status_code == 200
    assert invoice.number in listing.content.decode()
    page = client.get(reverse("admin:billing_invoice_change", args=[invoice.pk])).content.decode()
    assert note.number in page
    for line in invoice.lines.all():
        assert line.description in page
    assert_pdf(client.get(reverse("admin:billing_invoice_pdf", args=[invoice.pk])), f"{invoice.number}.pdf")
    assert_pdf(client.get(reverse("admin:billing_creditnote_pdf", args=[note.pk])), f"{note.number}.pdf")
    assert reverse("admin:billing_invoice_pdf", args=[invoice.pk]) in page
    notes = client.get(reverse("admin:billing_creditnote_changelist"), {"year": note.year})
    assert note.number in notes.content.decode()
    note_page = client.get(reverse("admin:billing_creditnote_change", args=[note.pk])).content.decode()
    assert invoice.number in note_page and reverse("admin:billing_creditnote_pdf", args=[note.pk]) in note_page


def test_admin_pdf_is_for_staff_only(client, alice, paid):
    client.force_login(alice)
    response = client.get(reverse("admin:billing_invoice_pdf", args=[paid.invoice.pk]))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
