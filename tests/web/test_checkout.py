"""Checkout through the shop's pages: form validation, order placement, the
order page, "I've paid" and cancellation, and that customers see only their own orders."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from anchorgpu.allocation.models import Booking
from anchorgpu.orders.models import Order
from anchorgpu.payments.models import Quote
from tests import shop

pytestmark = pytest.mark.django_db

PRIVATE_KEY = """-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
-----END OPENSSH PRIVATE KEY-----"""


@pytest.fixture
def customer_client(client):
    shop.load_shop()
    user = shop.customer()
    client.force_login(user)
    client.user = user
    return client


def form_data(**overrides):
    data = {"quantity": "1", "term": "3", "start_mode": "asap", "start": "", "environment": "pytorch-cuda124",
            "name": "Alice Example", "email": "alice@example.com", "company": "", "country": "PT",
            "billing_address": "", "vat_id": "", "ssh_keys": shop.ED25519, "asset": "btc", "accept": "on"}
    data.update(overrides)
    return data


def checkout_url(slug="h100-sxm-80gb"):
    return reverse("checkout", kwargs={"slug": slug})


def test_checkout_requires_login(client):
    shop.load_shop()
    response = client.get(checkout_url())
    assert response.status_code == 302 and "/account/login/" in response.url


def test_checkout_page_offers_only_environments_of_the_stack(customer_client):
    response = customer_client.get(checkout_url("mi300x-192gb") + "?quantity=2&term=7")
    body = response.content.decode()
    assert response.status_code == 200
    assert "pytorch-rocm63" in body and "pytorch-cuda124" not in body
    assert 'value="2"' in body  # the quantity carried over from the catalog


def test_place_order_holds_cards_and_shows_the_quote(customer_client):
    response = customer_client.post(checkout_url(), form_data(options=["checkpoint-storage-1tb"]))
    assert response.status_code == 302
    order = Order.objects.get()
    assert response.url == reverse("order", kwargs={"reference": order.reference})
    assert order.user == customer_client.user and order.state == "awaiting_payment"
    assert order.booking.kind == Booking.Kind.HOLD and order.booking.state == Booking.State.LIVE
    assert order.booking.expires_at == order.quote.expires_at
    assert [line["kind"] for line in order.lines] == ["cards", "option"]
    page = customer_client.get(response.url).content.decode()
    assert order.quote.address in page and order.quote.display_amount in page
    assert "<svg" in page  # the QR code of the payment URI
    assert "I&#x27;ve paid" in page or "I've paid" in page
    assert order.ssh_keys.get().fingerprint in page


def test_each_order_gets_its_own_deposit_address(customer_client):
    for _ in range(3):
        assert customer_client.post(checkout_url(), form_data()).status_code == 302
    quotes = Quote.objects.order_by("address_index")
    assert [q.address_index for q in quotes] == [0, 1, 2]
    assert len({q.address for q in quotes}) == 3


@pytest.mark.parametrize("overrides, field, text", [
    ({"ssh_keys": PRIVATE_KEY}, "ssh_keys", "leaked"),
    ({"ssh_keys": "ssh-ed25519 not-base64!"}, "ssh_keys", "not an SSH public key"),
    ({"ssh_keys": ""}, "ssh_keys", "at least one SSH public key"),
    ({"ssh_keys": "x" * 50_000}, "ssh_keys", "at most"),
    ({"quantity": "two"}, "quantity", "whole number"),
    ({"quantity": "0"}, "quantity", "at least"),
    ({"term": "5"}, "term", "3, 7 or 30"),
    ({"start_mode": "date", "start": "2020-01-01T10:00"}, "start", "past"),
    ({"start_mode": "date", "start": ""}, "start", "start date"),
    ({"start_mode": "date", "start": "tomorrow-ish"}, "start", "date and time"),
    ({"environment": "pytorch-rocm63"}, "environment", "environments listed"),
    ({"asset": "doge"}, "asset", "assets listed"),
    ({"name": "   "}, "name", ""),
    ({"name": "A" * 500}, "name", "at most"),
    ({"email": "not-an-email"}, "email", "valid email"),
    ({"country": "XX"}, "country", "valid choice"),
    ({"vat_id": "123"}, "vat_id", "country prefix"),
    ({"accept": ""}, "accept", "confirm"),
    ({"options": ["no-such-option"]}, "options", "no-such-option"),
])
def test_bad_checkout_input_is_a_form_error_and_saves_nothing(customer_client, overrides, field, text):
    response = customer_client.post(checkout_url(), form_data(**overrides))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors, errors
    assert text.lower() in " ".join(errors[field]).lower()
    assert not Order.objects.exists() and not Booking.objects.exists() and not Quote.objects.exists()


def test_a_private_key_is_not_echoed_back(customer_client):
    response = customer_client.post(checkout_url(), form_data(ssh_keys=PRIVATE_KEY))
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" not in response.content.decode()


def test_last_unit_taken_is_a_clear_message_not_a_500(customer_client):
    # H200: 16 cards in the demo fleet; another customer holds them all.
    other = shop.customer("bob@example.com")
    shop.place(other, product="h200-141gb", quantity=16, term_days=30)
    start = (timezone.now() + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    response = customer_client.post(checkout_url("h200-141gb"), form_data(start_mode="date", start=start))
    assert response.status_code == 409
    assert "taken" in " ".join(response.context["form"].non_field_errors()).lower()
    assert Order.objects.count() == 1


def test_another_customers_order_is_404(customer_client):
    other = shop.customer("bob@example.com")
    order = shop.place(other)
    for name in ("order", "order_status"):
        assert customer_client.get(reverse(name, kwargs={"reference": order.reference})).status_code == 404
    for name in ("order_claim_payment", "order_cancel", "order_refund_address"):
        assert customer_client.post(reverse(name, kwargs={"reference": order.reference})).status_code == 404
    assert customer_client.get(reverse("order", kwargs={"reference": "AG-NOPE"})).status_code == 404
    assert order.reference not in customer_client.get(reverse("orders")).content.decode()
    order.refresh_from_db()
    assert order.state == "awaiting_payment"


def test_ive_paid_with_a_hash_of_the_wrong_format(customer_client):
    order = shop.place(customer_client.user)
    url = reverse("order_claim_payment", kwargs={"reference": order.reference})
    response = customer_client.post(url, {"txid": "0x" + "ab" * 32})  # an EVM hash for a BTC quote
    assert response.status_code == 400
    assert "without “0x”" in response.content.decode()
    order.refresh_from_db()
    assert order.state == "awaiting_payment" and order.claimed_txid == ""
    response = customer_client.post(url, {"txid": "AB" * 32})
    assert response.status_code == 302
    order.refresh_from_db()
    assert order.state == "payment_claimed" and order.claimed_txid == "ab" * 32


def test_ive_paid_twice_is_refused_politely(customer_client):
    order = shop.place(customer_client.user)
    url = reverse("order_claim_payment", kwargs={"reference": order.reference})
    assert customer_client.post(url, {"txid": ""}).status_code == 302
    response = customer_client.post(url, {"txid": ""})
    assert response.status_code == 409
    assert "awaiting payment" in response.content.decode()


def test_cancel_releases_the_hold(customer_client):
    order = shop.place(customer_client.user)
    response = customer_client.post(reverse("order_cancel", kwargs={"reference": order.reference}))
    assert response.status_code == 302
    order.refresh_from_db()
    assert order.state == "cancelled" and order.booking.state == Booking.State.RELEASED


def test_get_on_a_post_only_action_is_405(customer_client):
    order = shop.place(customer_client.user)
    assert customer_client.get(reverse("order_cancel", kwargs={"reference": order.reference})).status_code == 405


@pytest.mark.parametrize("address, text", [
    ("", "required"),
    ("x" * 101, "at most"),
    ("bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyv", "checksum"),
    ("0x9858EfFD232B4033E47d90003D41EC34EcaEda94", "not a valid bitcoin address"),
])
def test_refund_address_form_refuses_bad_addresses(customer_client, address, text):
    order = shop.place(customer_client.user)
    response = customer_client.post(reverse("order_refund_address", kwargs={"reference": order.reference}),
                                    {"address": address})
    assert response.status_code == 400
    assert text in response.content.decode().lower()
    order.refresh_from_db()
    assert order.refund_address == ""


def test_refund_address_is_saved_in_canonical_form(customer_client):
    order = shop.place(customer_client.user, asset="eth")
    response = customer_client.post(reverse("order_refund_address", kwargs={"reference": order.reference}),
                                    {"address": "0x9858effd232b4033e47d90003d41ec34ecaeda94"})
    # The demo's EVM deposit key derives exactly this address at index 0: refused as the deposit address.
    assert response.status_code == 400 and "deposit address" in response.content.decode()
    response = customer_client.post(reverse("order_refund_address", kwargs={"reference": order.reference}),
                                    {"address": "0x52908400098527886e0f7030069857d2e4169ee7"})
    assert response.status_code == 302
    order.refresh_from_db()
    assert order.refund_address == "0x52908400098527886E0F7030069857D2E4169EE7"


def test_placing_the_same_checkout_twice_makes_one_order(customer_client):
    page = customer_client.get(checkout_url())
    token = page.context["form"].initial["submission"]
    assert token.startswith("web-")
    first = customer_client.post(checkout_url(), form_data(submission=token))
    second = customer_client.post(checkout_url(), form_data(submission=token))
    assert first.status_code == second.status_code == 302 and first.url == second.url
    assert Order.objects.count() == 1 and Booking.objects.count() == 1
    assert customer_client.post(checkout_url(), form_data(submission="web-other")).status_code == 302
    assert Order.objects.count() == 2
