"""The customer's billing details the VAT rules need, refused clearly (4xx, translated) when they cannot work;
the operator's rates in the admin, audited; the seller's details required in production."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.urls import reverse
from django.utils import translation

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.audit.models import AuditEntry
from anchorgpu.billing import pdf
from anchorgpu.billing.models import CreditNote, Invoice, VatRate
from anchorgpu.billing.services import credit_note_issue, invoice_issue
from anchorgpu.orders.models import Order
from anchorgpu.production import PLACEHOLDER_COMPANY_ADDRESS, company_problems, problems
from tests import shop
from tests.web.test_api_orders import Api, order_body
from tests.web.test_checkout import checkout_url, form_data

from .test_vat_documents import SELLER, read

pytestmark = pytest.mark.django_db


@pytest.fixture
def registered(settings):
    for name, value in SELLER.items():
        setattr(settings, name, value)
    VatRate.objects.create(country="PT", rate=Decimal(23))
    VatRate.objects.create(country="FR", rate=Decimal(20))
    shop.load_shop()
    return shop.customer()


@pytest.fixture
def customer_client(client, registered):
    client.force_login(registered)
    return client


@pytest.mark.parametrize(("overrides", "field", "text"), [
    ({"business": "on", "company": ""}, "company", "name of the business"),
    ({"vat_id": "FR40303265045", "country": "FR"}, "vat_id", "for a business"),
    ({"vat_id": "FR40303265045", "country": "PT", "business": "on", "company": "Acme"}, "vat_id", "PT"),
    ({"vat_id": "PT12", "country": "PT", "business": "on", "company": "Acme"}, "vat_id", "shape"),
])
def test_the_checkout_refuses_details_the_vat_rules_cannot_use(customer_client, overrides, field, text):
    response = customer_client.post(checkout_url(), form_data(**overrides))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors and text in " ".join(errors[field]), errors
    assert not Order.objects.exists()


def test_a_country_without_a_rate_is_refused_at_checkout_not_guessed(customer_client):
    response = customer_client.post(checkout_url(), form_data(country="IT"))
    assert response.status_code == 400
    assert "cannot take orders billed to this country" in response.content.decode()
    assert not Order.objects.exists()
    # the same customer as a business with an Italian VAT id: reverse charge, no rate needed
    response = customer_client.post(checkout_url(), form_data(country="IT", business="on", company="Calcolo Srl",
                                                              vat_id="IT 00743110157"))
    assert response.status_code == 302
    order = Order.objects.get()
    assert order.business and order.vat_id == "IT00743110157"
    assert order.tax == {"treatment": "reverse_charge", "rate": "0", "country": "IT"}


def test_the_refusals_are_translated(customer_client):
    with translation.override("pt"):
        url = checkout_url()  # /pt/…
    response = customer_client.post(url, form_data(business="on", company=""))
    assert response.status_code == 400
    assert "Informe o nome da empresa" in " ".join(response.context["form"].errors["company"])


def test_the_api_takes_the_business_flag_and_answers_4xx(client, registered):
    _token, secret = api_token_create(user=registered, name="test")
    api = Api(client, secret)
    url = reverse("api-orders")
    response = api.post(url, order_body(vat_id="FR40303265045", country="FR"), key="k1")
    assert response.status_code == 400 and "vat_id" in response.json()["error"]["fields"]
    response = api.post(url, order_body(country="IT"), key="k2")
    assert response.status_code == 400 and response.json()["error"]["code"] == "vat_not_set_up"
    response = api.post(url, order_body(country="FR", business=True, company="Exemple SAS",
                                        vat_id="FR40303265045"), key="k3")
    assert response.status_code == 201, response.content
    assert Order.objects.get().tax["treatment"] == "reverse_charge"
    response = api.post(url, order_body(business="yes"), key="k4")
    assert response.status_code == 400


def test_an_unregistered_seller_charges_no_vat_and_says_so(client):
    shop.load_shop()  # the development defaults: no seller VAT id
    order = shop.place(shop.customer(), country="FR")
    shop.pay(order)
    invoice = Order.objects.get(pk=order.pk).invoice
    assert invoice.tax_treatment == "not_registered" and invoice.tax_amount == 0 and invoice.net_total == invoice.total
    assert "the seller is not registered for VAT" in read(pdf.invoice_pdf(invoice))


def test_an_invoice_from_before_vat_shows_its_total_only(registered):
    order = shop.place(registered)
    Order.objects.filter(pk=order.pk).update(tax={})
    with transaction.atomic():
        invoice = invoice_issue(order=Order.objects.get(pk=order.pk), crypto_amount=1, actor="test")
    Invoice.objects.filter(pk=invoice.pk).update(tax_treatment="", net_total=None, tax_amount=0, seller={})
    invoice.lines.update(net_amount=None, period_start=None, period_end=None)
    text = read(pdf.invoice_pdf(Invoice.objects.get(pk=invoice.pk)))
    assert "excl. VAT" not in text and "Term:" not in text and "Total:" in text
    # a credit note from before keeps printing the reason it was sent with (migration billing 0003)
    with transaction.atomic():
        note = credit_note_issue(invoice=invoice, amount=Decimal("1.00"), reason="x", customer_reason="goodwill",
                                 actor="test")
    CreditNote.objects.filter(pk=note.pk).update(customer_reason="other", customer_reason_text="Old words")
    assert "Old words" in read(pdf.credit_note_pdf(CreditNote.objects.get(pk=note.pk)))


def test_a_credit_note_needs_a_reason_for_the_customer(registered):
    order = shop.place(registered)
    shop.pay(order)
    invoice = Order.objects.get(pk=order.pk).invoice
    for reason, words in (("", ""), ("because", ""), ("other", "  ")):
        with pytest.raises(ValueError), transaction.atomic():
            credit_note_issue(invoice=invoice, amount=Decimal("1.00"), reason="internal", customer_reason=reason,
                              customer_reason_text=words, actor="test")
    assert not CreditNote.objects.exists()


def test_production_refuses_the_placeholder_seller():
    good = {"name": "AnchorGPU, Lda.", "address": "Rua A 1|1000-001 Lisboa", "country": "PT", "vat_id": "PT501964843"}
    assert company_problems(**good) == []
    assert any("ANCHORGPU_COMPANY_ADDRESS" in p for p in company_problems(**{**good, "address": None}))
    assert any("ANCHORGPU_COMPANY_ADDRESS" in p
               for p in company_problems(**{**good, "address": PLACEHOLDER_COMPANY_ADDRESS}))
    assert any("ANCHORGPU_COMPANY_COUNTRY" in p for p in company_problems(**{**good, "country": ""}))
    assert any("ANCHORGPU_COMPANY_VAT_ID" in p for p in company_problems(**{**good, "vat_id": "PT12"}))
    assert any("ANCHORGPU_COMPANY_NAME" in p for p in company_problems(**{**good, "name": " "}))
    found = problems(secret_key="k" * 10 + "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH", debug=False,
                     allowed_hosts="shop.example", email_disabled=True, behind_proxy=False,
                     company={**good, "address": PLACEHOLDER_COMPANY_ADDRESS})
    assert len(found) == 1 and "placeholder" in found[0]


def test_in_production_no_invoice_is_issued_with_the_placeholder(settings, registered):
    order = shop.place(registered)
    settings.PRODUCTION = True
    settings.ANCHORGPU_COMPANY_ADDRESS = PLACEHOLDER_COMPANY_ADDRESS
    with pytest.raises(ImproperlyConfigured, match="placeholder"), transaction.atomic():
        invoice_issue(order=order, crypto_amount=1, actor="test", now=datetime(2031, 1, 1, tzinfo=UTC))
    assert not Invoice.objects.exists()


def test_operators_edit_rates_in_the_admin_and_each_change_is_audited(client, registered):
    operator = get_user_model().objects.create_superuser(username="ops", email="ops@example.com",
                                                         password="x" * 12)
    client.force_login(operator)
    assert client.get(reverse("admin:billing_vatrate_changelist")).status_code == 200
    response = client.post(reverse("admin:billing_vatrate_add"), {"country": "DE", "rate": "19", "note": "2026"})
    assert response.status_code == 302
    rate = VatRate.objects.get(country="DE")
    response = client.post(reverse("admin:billing_vatrate_change", args=[rate.pk]),
                           {"country": "DE", "rate": "21", "note": "changed"})
    assert response.status_code == 302
    assert client.post(reverse("admin:billing_vatrate_add"), {"country": "ES", "rate": "100"}).status_code == 200
    entries = AuditEntry.objects.filter(object_type="billing.vatrate").order_by("id")
    actions = [(e.actor, e.action, Decimal(e.data["rate"]), e.data["before"].get("rate")) for e in entries]
    assert actions == [("ops", "vat_rate_add", Decimal(19), None), ("ops", "vat_rate_change", Decimal(21), "19.00")]
    client.force_login(registered)
    assert client.get(reverse("admin:billing_vatrate_changelist")).status_code == 302


def test_the_order_page_says_what_vat_the_total_holds(client, registered):
    from anchorgpu.billing.tax import tax_inside
    from anchorgpu.formats import display

    client.force_login(registered)
    private = shop.place(registered)  # Portugal, the seller's country: 23 %
    business = shop.place(registered, country="FR", business=True, company="Exemple SAS", vat_id="FR40303265045")
    with translation.override("en"):
        page = client.get(reverse("order", kwargs={"reference": private.reference})).content.decode()
        vat = display.money(tax_inside(private.fiat_total, Decimal(23), private.currency), private.currency)
        assert f"Includes VAT 23% (Portugal): {vat}" in page
        page = client.get(reverse("order", kwargs={"reference": business.reference})).content.decode()
        assert "Reverse charge — VAT to be accounted for by the recipient" in page


def test_the_api_order_states_its_vat(client, registered):
    _token, secret = api_token_create(user=registered, name="test")
    api = Api(client, secret)
    response = api.post(reverse("api-orders"), order_body(), key="v1")  # Portugal, the seller's country
    assert response.status_code == 201, response.content
    vat = response.json()["vat"]
    order = Order.objects.get()
    assert vat["treatment"] == "standard" and Decimal(vat["rate"]) == 23 and vat["country"] == "PT"
    assert Decimal(vat["amount"]) == (order.fiat_total * 23 / 123).quantize(Decimal("0.01"))
    assert vat["note"].startswith("Includes VAT 23%")
    Order.objects.update(tax={})  # placed before VAT was stated
    assert api.get(reverse("api-order", kwargs={"reference": order.reference})).json()["vat"] is None
