"""Buying in Chromium, as a customer does it: from the catalog through sign-up
and checkout to the order page (at desktop and phone width), the checkout form
used from the keyboard, and a checkout form sent twice placing one order.

Only Playwright's own waiting is used (expect(...) with a timeout); no sleeps.
Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from anchorgpu.orders.models import Order
from tests import shop

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}
PASSWORD = "correct horse battery staple"
PRIVATE_KEY = """-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACDjKqp5Fc65tEnRulDqKiiyGm4B+QvaJFotHYdpfRiiZQAAAJgxB1yqMQdc
-----END OPENSSH PRIVATE KEY-----"""
ACCEPT = re.compile(r"I understand that the term is fixed")


@pytest.fixture
def store(live_server):
    shop.load_shop()
    return live_server.url


# The deepest elements that reach past the right edge: what to fix when a page scrolls sideways.
WIDE_ELEMENTS = """(limit) => [...document.querySelectorAll("body *")]
  .filter(el => el.getBoundingClientRect().right > limit + 1 && ![...el.children].some(
    child => child.getBoundingClientRect().right > limit + 1))
  .slice(0, 8)
  .map(el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && el.className.baseVal === undefined
    ? "." + el.className.trim().replace(/ +/g, ".") : "") + " right=" + Math.round(el.getBoundingClientRect().right))"""


def _no_sideways_scroll(page) -> None:
    # A phone shrinks a page that is too wide to fit, which widens window.innerWidth
    # with it; so the page is also held to the phone's own width.
    widths = page.evaluate("({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})")
    if widths["scroll"] > min(widths["inner"], PHONE["width"]) + 1:
        wide = page.evaluate(WIDE_ELEMENTS, PHONE["width"])
        pytest.fail(f"{page.url} scrolls sideways at phone width ({widths}); too wide: {wide}")


def _at_phone_width(browser, page, url: str, shot, step: str) -> None:
    """Open ``url`` in a phone-sized context with the same session, screenshot it, check it fits."""
    from playwright.sync_api import expect

    phone = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, locale="en-GB",
                                storage_state=page.context.storage_state())
    try:
        small = phone.new_page()
        small.set_default_timeout(15_000)
        small.goto(url)
        expect(small.locator("h1")).to_be_visible()
        shot(small, step)
        _no_sideways_scroll(small)
    finally:
        phone.close()


def _log_in_to_checkout(store, page, email: str) -> None:
    """A returning customer logs in on the way to checkout for one H100 for three days."""
    from playwright.sync_api import expect

    shop.customer(email=email, password=PASSWORD)
    page.goto(f"{store}/en/account/login/?next=/en/checkout/h100-sxm-80gb/%3Fquantity%3D1%26term%3D3")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_label("Password").press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Order H100 SXM 80 GB")


def test_a_new_customer_buys_an_h100_from_the_catalog(store, browser, page, shot):
    from playwright.sync_api import expect

    # The catalog: configure the H100.
    page.goto(f"{store}/en/")
    h100 = page.locator("#offers tbody tr").filter(has_text="H100 SXM 80 GB")
    h100.get_by_role("link", name="Configure").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("H100 SXM 80 GB")

    # The product page: two cards for seven days; the Order link follows the controls.
    page.get_by_label("Cards").fill("2")
    page.get_by_label("Cards").press("Tab")  # leaving the field fires "change", as a person's edit does
    page.get_by_label(re.compile(r"^Term:?$")).select_option("7")
    order_link = page.locator("#quote").get_by_role("link", name="Order", exact=True)
    expect(order_link).to_have_attribute("href", re.compile(r"quantity=2"))
    expect(order_link).to_have_attribute("href", re.compile(r"term=7"))
    expect(page.locator("#quote")).to_contain_text("Total for the term")
    order_link.click()

    # Not logged in: the login page, and from there to sign-up, keeping where we were going.
    expect(page).to_have_url(re.compile(r"/en/account/login/\?next="))
    page.get_by_role("main").get_by_role("link", name="Create an account").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Create an account")
    page.get_by_label("Email").fill("bob@example.com")
    page.get_by_label(re.compile(r"^Password:?$")).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Create the account").click()

    # Back on checkout with the quantity and term chosen on the product page.
    expect(page).to_have_url(re.compile(r"/en/checkout/h100-sxm-80gb/\?.*quantity=2"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Order H100 SXM 80 GB")
    expect(page.get_by_label("Cards")).to_have_value("2")
    expect(page.get_by_label(re.compile(r"^Term:?$"))).to_have_value("7")
    expect(page.get_by_label("Email")).to_have_value("bob@example.com")
    shot(page, "1-checkout")
    _at_phone_width(browser, page, page.url, shot, "2-checkout-phone")

    page.get_by_label("Software environment").select_option(label="PyTorch 2.5 · CUDA 12.4 · Ubuntu 22.04")
    page.get_by_role("group", name="Options").get_by_label("Off-machine checkpoint storage, 1 TB").check()
    page.get_by_label("Full name").fill("Bob Example")
    page.get_by_label("Country").select_option(label="Portugal")
    page.get_by_label("SSH public keys").fill(shop.ED25519)
    page.get_by_role("radio", name=re.compile(r"^BTC · Bitcoin")).check()  # one network: no second choice
    page.get_by_label(ACCEPT).check()
    page.get_by_role("button", name="Place the order").click()

    # The order page: where and how much to pay.
    expect(page).to_have_url(re.compile(r"/en/orders/[^/]+/$"))
    order = Order.objects.select_related("quote__asset").get(user__email="bob@example.com")
    quote = order.quote
    assert (order.quantity, order.term_days, order.country.code) == (2, 7, "PT")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Order {order.reference}")
    expect(page.locator(".status .state")).to_have_text("awaiting payment")
    expect(page.locator("code.address")).to_have_text(quote.address)
    expect(page.locator(".amount")).to_have_text(f"{Decimal(quote.amount).scaleb(-8):.8f} BTC")  # 1 sat places
    expect(page.get_by_role("img", name="QR code of the payment request").locator("svg")).to_be_visible()
    expect(page.get_by_role("link", name="Open in a wallet")).to_have_attribute("href", quote.uri)

    # order.js turns the minutes left into a ticking countdown.
    remaining = page.locator(".payment .remaining")
    expect(remaining).to_have_text(re.compile(r"^\((\d+:)?\d+:\d\d\)$"), timeout=3_000)
    before = remaining.inner_text()
    expect(remaining).not_to_have_text(before, timeout=2_500)
    shot(page, "3-order")
    _at_phone_width(browser, page, page.url, shot, "4-order-phone")

    # "I've paid" with an Ethereum-style hash on a Bitcoin quote: the error sits on the field.
    txid = page.get_by_label("Transaction id (optional)")
    txid.fill("0x" + "ab" * 32)
    page.get_by_role("button", name="I've paid").click()
    txid = page.get_by_label("Transaction id (optional)")
    message = "A Bitcoin transaction id is 64 hexadecimal characters, without “0x”."
    expect(page.locator("#id_txid_error")).to_have_text(message)
    expect(txid).to_have_attribute("aria-invalid", "true")
    expect(txid).to_have_accessible_description(re.compile(re.escape(message)))
    expect(page.get_by_role("alert")).to_contain_text("Transaction id")
    expect(page.locator(".status .state")).to_have_text("awaiting payment")
    shot(page, "5-bad-txid")

    txid.fill(shop.TXID_BTC)
    page.get_by_role("button", name="I've paid").click()
    expect(page.locator(".status .state")).to_have_text("payment being checked")
    expect(page.get_by_role("status")).to_contain_text("We are checking your transfer")
    expect(page.get_by_label("Transaction id (optional)")).to_have_count(0)
    order.refresh_from_db()
    assert order.state == "payment_claimed" and order.claimed_txid == shop.TXID_BTC
    shot(page, "6-claimed")


def test_checkout_errors_and_a_pasted_private_key_from_the_keyboard(store, page, shot):
    from playwright.sync_api import expect

    _log_in_to_checkout(store, page, "carol@example.com")

    # Submit from the keyboard with nothing filled in but the name.
    page.get_by_label("Full name").fill("Carol Example")
    page.get_by_label("Full name").press("Enter")
    summary = page.get_by_role("alert")
    expect(summary).to_contain_text("Please correct the following")
    links = summary.get_by_role("link")
    expect(links).to_have_text([re.compile("^Country"), re.compile("^SSH public keys"), re.compile("^I understand")])
    for href in links.evaluate_all("els => els.map(a => a.getAttribute('href'))"):
        assert page.locator(href).count() == 1, f"the summary links to {href}, which is not on the page"
    shot(page, "1-errors")

    # Tab to the SSH keys link in the summary and follow it: the focus lands in the field.
    ssh_link = summary.get_by_role("link", name="SSH public keys")
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.getAttribute('href')") == "#id_ssh_keys":
            break
    expect(ssh_link).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_label("SSH public keys")).to_be_focused()
    assert page.evaluate("document.activeElement.id") == "id_ssh_keys"
    expect(page.get_by_label("SSH public keys")).to_have_attribute("aria-invalid", "true")

    # Paste a private key (typed in one go, as a paste arrives) and submit again.
    page.keyboard.insert_text(PRIVATE_KEY)
    expect(page.get_by_label("SSH public keys")).to_have_value(PRIVATE_KEY)
    page.get_by_label("Country").select_option(label="Portugal")
    page.get_by_label(ACCEPT).check()
    page.get_by_label("Full name").press("Enter")

    warning = "This is a PRIVATE key. Treat it as leaked"
    expect(page.get_by_role("alert")).to_contain_text(warning)
    expect(page.locator("#id_ssh_keys_error")).to_contain_text(warning)
    keys = page.get_by_label("SSH public keys")
    expect(keys).to_have_value("")
    expect(keys).to_have_accessible_description(re.compile(re.escape(warning)))
    assert "PRIVATE KEY-----" not in page.content()
    assert not Order.objects.exists()
    shot(page, "2-private-key")


# Two submissions of the page's form at once, as a double click or a flaky
# connection's retry can send them; Chromium itself cancels one of two quick
# clicks at a point that varies, so the test sends both the same way every time.
SUBMIT_TWICE = """async () => {
  const form = document.querySelector("form.checkout");
  const send = () => fetch(form.action, {method: "POST", body: new FormData(form), redirect: "manual"});
  const answers = await Promise.all([send(), send()]);
  return answers.map(a => a.type === "opaqueredirect" ? "redirect" : String(a.status));
}"""


def test_pressing_place_the_order_again_places_one_order(store, page, shot):
    from playwright.sync_api import expect

    _log_in_to_checkout(store, page, "dave@example.com")
    page.get_by_label("Full name").fill("Dave Example")
    page.get_by_label("Country").select_option(label="Portugal")
    page.get_by_label("SSH public keys").fill(shop.ED25519)
    page.get_by_label(ACCEPT).check()

    assert page.evaluate(SUBMIT_TWICE) == ["redirect", "redirect"]
    page.get_by_role("button", name="Place the order").click()  # and once more by hand
    expect(page).to_have_url(re.compile(r"/en/orders/[^/]+/$"))
    order = Order.objects.get(user__email="dave@example.com")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Order {order.reference}")
    expect(page.locator(".status .state")).to_have_text("awaiting payment")
    shot(page, "order")
