"""The order page leaves nothing to guess after "I've paid": the confirmations the asset needs and about how
long they take, the e-mails that follow; a claimed order whose quote has expired says the transfer is being
checked until the watch window ends (no live QR code or countdown); an expired order's "contact us" leads
to the contact page, made from the operator's settings."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import formats, timezone, translation

from anchorgpu.payments.models import PaymentSettings
from anchorgpu.payments.services import payment_claim
from tests import shop

pytestmark = pytest.mark.django_db



def order_page(client, order) -> str:
    return client.get(reverse("order", kwargs={"reference": order.reference})).content.decode()


@pytest.mark.parametrize("asset, confirmations, network, wait", [
    ("btc", 2, "Bitcoin", "about 20 minutes"), ("eth", 12, "Ethereum mainnet", "about 3 minutes")])
def test_after_ive_paid_the_page_says_what_follows_and_about_how_long(client, alice, asset, confirmations,
                                                                      network, wait):
    order = shop.place(alice, asset=asset)
    before = order_page(client, order)
    assert "After you press “I&#x27;ve paid”" in before or "After you press “I've paid”" in before
    claimed = client.post(reverse("order_claim_payment", kwargs={"reference": order.reference}), {"txid": ""})
    assert claimed.status_code == 302
    page = order_page(client, order)
    assert "What happens next" in page
    assert f"Your transfer needs {confirmations} confirmations on {network}: that usually takes {wait}" in page
    assert "an estimate" in page
    assert f"we e-mail {alice.email} with the invoice, and again when your access is ready" in page


def test_a_claimed_order_whose_quote_expired_explains_itself_without_a_live_qr_code(client, alice):
    order = shop.place(alice)
    payment_claim(order=order, actor=alice.email)
    quote = order.quote
    quote.expires_at = timezone.now() - timedelta(minutes=5)
    quote.save(update_fields=["expires_at"])

    page = order_page(client, order)

    with translation.override("en"):
        until = formats.date_format(quote.monitor_until, "SHORT_DATETIME_FORMAT")
    assert "the quote’s time ran out" in page and f"the deposit address is watched until {until} UTC" in page
    assert "Do not send it again" in page
    assert "<svg" not in page and 'class="countdown"' not in page and "Open in a wallet" not in page
    assert f'{reverse("contact")}?order={order.reference}' in page
    live = client.get(reverse("order_status", kwargs={"reference": order.reference})).content.decode()
    assert "<svg" not in live and "watched until" in live  # the part the page polls says the same


def test_an_open_quote_still_shows_its_qr_code(client, alice):
    order = shop.place(alice)
    payment_claim(order=order, actor=alice.email)
    page = order_page(client, order)
    assert "<svg" in page and "the quote’s time ran out" not in page


def test_an_expired_orders_contact_us_leads_to_the_contact_page(client, alice):
    order = shop.place(alice)
    order.state = "expired"
    order.save(update_fields=["state"])
    page = order_page(client, order)
    link = f'{reverse("contact")}?order={order.reference}'
    assert "contact us with its transaction id" in page and link in page
    contact = client.get(link).content.decode()
    assert f"About order {order.reference}" in contact


@pytest.mark.parametrize("language", ["en", "pt", "fr", "ko"])
def test_the_contact_page_shows_the_operators_settings_in_every_language(client, language):
    settings_row = PaymentSettings.current()
    settings_row.contact_email = "help@anchorgpu.example"
    settings_row.contact_other = "Signal +351 900 000 000"
    settings_row.contact_hours = "Mon–Fri 09:00–18:00 UTC"
    settings_row.save()
    with translation.override(language):
        url = reverse("contact")
    assert url == f"/{language}/contact/"
    response = client.get(url)
    page = response.content.decode()
    assert response.status_code == 200 and f'lang="{language}"' in page
    assert 'href="mailto:help@anchorgpu.example"' in page
    assert "Signal +351 900 000 000" in page and "Mon–Fri 09:00–18:00 UTC" in page


def test_without_settings_the_contact_page_gives_the_shops_sender_address(client, settings):
    settings.DEFAULT_FROM_EMAIL = "AnchorGPU <orders@anchorgpu.example>"
    page = client.get(reverse("contact")).content.decode()
    assert 'href="mailto:orders@anchorgpu.example"' in page
