"""The order page's copy buttons in Chromium: the deposit address and the exact amount, with a dot as wallets
want it, whatever the page's language; a visible "Copied"; without JavaScript no dead button, and the text
stays selectable."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.conf import settings
from django.test import Client

from tests import shop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def eth_order(live_server):
    shop.load_shop()
    user = shop.customer(email="copier@example.com")
    order = shop.place(user, asset="eth", term_days=7)
    client = Client()
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    return live_server.url, order, session


def _signed_in(browser, url: str, session: str, **options):
    context = browser.new_context(locale="pt-BR", **options)
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": url}])
    return context


def test_copying_the_amount_and_the_address_on_a_portuguese_order_page(browser, eth_order, shot):
    from playwright.sync_api import expect

    url, order, session = eth_order
    quote = order.quote
    wallet = format(Decimal(quote.amount).scaleb(-18), ".6f")  # the quoted six places, a dot
    context = _signed_in(browser, url, session, viewport={"width": 390, "height": 844})
    refused = []
    try:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
        page = context.new_page()
        page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
        page.goto(f"{url}/pt/orders/{order.reference}/")
        shown = page.locator(".amount").inner_text()
        assert shown == wallet.replace(".", ",") + " ETH"  # the page writes it the Portuguese way

        amount_button = page.locator(f'button.copy[data-copy="{wallet}"]')
        expect(amount_button).to_be_visible()
        amount_button.click()
        expect(amount_button.locator("xpath=following-sibling::span[1]")).to_have_text("Copiado")
        assert page.evaluate("navigator.clipboard.readText()") == wallet
        shot(page, "amount-copied")

        address_button = page.locator(f'button.copy[data-copy="{quote.address}"]')
        address_button.click()
        expect(address_button.locator("xpath=following-sibling::span[1]")).to_have_text("Copiado")
        assert page.evaluate("navigator.clipboard.readText()") == quote.address
    finally:
        context.close()
    assert not refused, refused


def test_without_javascript_there_is_no_dead_button_and_the_text_is_there_to_select(browser, eth_order):
    url, order, session = eth_order
    context = _signed_in(browser, url, session, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{url}/pt/orders/{order.reference}/")
        assert page.locator("button.copy").count() == 2
        assert not any(b.is_visible() for b in page.locator("button.copy").all())
        assert page.locator("code.address").inner_text() == order.quote.address
        assert page.locator(".amount").inner_text().endswith(" ETH")
        assert page.locator(".amount").evaluate("el => getComputedStyle(el).userSelect") != "none"
    finally:
        context.close()
