"""On a phone, a customer pays in USDT on TRON: picks the coin, sees only that coin's networks, picks TRON,
and the order page warns, next to a QR code that holds the address alone, that only TRON pays the order."""

from __future__ import annotations

import re

import pytest

from anchorgpu.orders.models import Order
from tests import shop
from tests.browser.test_purchase import ACCEPT, PASSWORD, _no_sideways_scroll

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 360, "height": 740}


def test_usdt_then_tron_on_a_phone_and_the_order_page_names_tron(live_server, browser, shot):
    from playwright.sync_api import expect

    shop.load_shop()
    shop.customer(email="dana@example.com", password=PASSWORD)
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, locale="en-GB")
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{live_server.url}/en/account/login/?next=/en/checkout/h100-sxm-80gb/")
        page.get_by_label("Email").fill("dana@example.com")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_label("Password").press("Enter")
        expect(page.get_by_role("heading", level=1)).to_have_text("Order H100 SXM 80 GB")

        # BTC is chosen to begin with: no network list shows. Choosing USDT shows USDT's networks only.
        usdt_networks = page.get_by_role("group", name="Network for USDT")
        usdc_networks = page.get_by_role("group", name="Network for USDC", include_hidden=True)
        expect(usdt_networks).to_be_hidden()
        page.get_by_role("radio", name=re.compile(r"^USDT · Tether USD")).check()
        expect(usdt_networks).to_be_visible()
        expect(usdc_networks).to_be_hidden()
        tron = usdt_networks.get_by_role("radio", name=re.compile(r"^TRON \(TRC-20\) · confirmed in about 1 minute"))
        tron.check()
        expect(tron).to_be_checked()
        shot(page, "1-usdt-tron")
        _no_sideways_scroll(page)

        page.get_by_label("Full name").fill("Dana Example")
        page.get_by_label("Country").select_option(label="Portugal")
        page.get_by_label("SSH public keys").fill(shop.ED25519)
        page.get_by_label(ACCEPT).check()
        page.get_by_role("button", name="Place the order").click()

        expect(page).to_have_url(re.compile(r"/en/orders/[^/]+/$"))
        quote = Order.objects.select_related("quote__asset").get(user__email="dana@example.com").quote
        assert quote.asset.code == "usdt-tron" and quote.address.startswith("T")
        expect(page.locator(".network-warning")).to_have_text(
            "Send USDT on TRON (TRC-20) only. A transfer on any other network does not pay this order.")
        expect(page.get_by_role("img", name="QR code of the deposit address").locator("svg")).to_be_visible()
        expect(page.locator(".qr-box figcaption")).to_contain_text("type the amount in USDT in your wallet yourself")
        expect(page.locator("code.address")).to_have_text(quote.address)
        expect(page.get_by_role("link", name="Open in a wallet")).to_have_count(0)
        shot(page, "2-order-tron")
        _no_sideways_scroll(page)
    finally:
        context.close()
