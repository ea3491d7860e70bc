"""The account menu and saved SSH keys in Chromium: from the header's menu to the keys page, a key saved,
then ticked at checkout and found on the order; the pages fit a phone's width. No sleeps: Playwright's
own waiting only."""

from __future__ import annotations

import pytest

from anchorgpu.orders.models import Order
from tests import shop

from .test_purchase import ACCEPT, PASSWORD, PHONE, _at_phone_width, _log_in_to_checkout, _no_sideways_scroll

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def store(live_server):
    shop.load_shop()
    return live_server.url


def test_a_key_saved_from_the_account_menu_is_ticked_at_checkout(store, browser, page, shot):
    from playwright.sync_api import expect

    _log_in_to_checkout(store, page, "keys@example.com")
    menu = page.locator("details.account-menu")
    expect(menu.get_by_role("link", name="SSH keys")).to_be_hidden()  # closed until asked
    menu.locator("summary").click()
    for name in ("My orders", "SSH keys", "API tokens", "Change your password"):
        expect(menu.get_by_role("link", name=name)).to_be_visible()
    expect(menu.get_by_role("button", name="Log out")).to_be_visible()
    shot(page, "menu-open")
    menu.get_by_role("link", name="SSH keys").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("SSH keys")

    page.get_by_label("Label (optional)").fill("work laptop")
    page.get_by_label("SSH public key").fill(shop.ED25519)
    page.get_by_role("button", name="Save the key").click()
    row = page.locator("table.saved-keys tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("work laptop")
    expect(row).to_contain_text("SHA256:")
    shot(page, "keys-saved")
    _at_phone_width(browser, page, page.url, shot, "keys-phone")

    page.goto(f"{store}/en/checkout/h100-sxm-80gb/?quantity=1&term=3")
    saved = page.get_by_label("work laptop", exact=False)
    expect(saved).not_to_be_checked()
    saved.check()
    page.get_by_label("Country").select_option("PT")
    page.get_by_label(ACCEPT).check()
    _at_phone_width(browser, page, page.url, shot, "checkout-saved-key-phone")
    page.get_by_role("button", name="Place the order").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("AG-")
    order = Order.objects.get(user__email="keys@example.com")
    fingerprint = order.ssh_keys.get().fingerprint
    expect(page.locator("main")).to_contain_text(fingerprint)


def test_the_open_account_menu_fits_a_phone(store, browser, shot):
    from playwright.sync_api import expect

    shop.customer(email="phone@example.com", password=PASSWORD)
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, locale="en-GB")
    try:
        small = context.new_page()
        small.set_default_timeout(15_000)
        small.goto(f"{store}/en/account/login/")
        small.get_by_label("Email").fill("phone@example.com")
        small.get_by_label("Password").fill(PASSWORD)
        small.get_by_label("Password").press("Enter")
        menu = small.locator("details.account-menu")
        menu.locator("summary").click()
        expect(menu.get_by_role("link", name="API tokens")).to_be_in_viewport()
        shot(small, "menu-phone")
        _no_sideways_scroll(small)
        menu.get_by_role("link", name="API tokens").click()
        expect(small.get_by_role("heading", level=1)).to_have_text("API tokens")
    finally:
        context.close()
