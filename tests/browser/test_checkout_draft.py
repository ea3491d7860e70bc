"""Nothing typed at checkout is lost, in Chromium: a customer types a checkout, switches the language (the
draft keeper puts it all back on the Portuguese page), loses the session and sends it (the log-in page says
why, and the checkout comes back with it), then sends it into the order limit (the 429 form holds it). A
pasted private key never reaches the browser's storage, and the draft is dropped once the order is placed.
The price summary follows the choice as it is typed. Fields are found by id (the language changes)."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from anchorgpu.ops.models import RateEvent
from anchorgpu.ops.ratelimit import LIMITS
from anchorgpu.orders.models import Order
from tests import shop
from tests.browser.test_purchase import PASSWORD, PRIVATE_KEY
from tests.ops.test_rate_limits import _account_key

pytestmark = pytest.mark.django_db(transaction=True)

TYPED = {"#id_name": "Dana Typed", "#id_company": "Typed Lda", "#id_billing_address": "Rua do Teste 12\nLisboa",
         "#id_vat_id": "PT123456789", "#id_ssh_keys": shop.ED25519}
OPTION = "input[name=options][value='extra-nvme-4tb']"


@pytest.fixture
def store(live_server, settings):
    settings.ANCHORGPU_RATE_LIMITS = True
    shop.load_shop()
    return live_server.url


def _storage(page) -> str:
    return page.evaluate("JSON.stringify(Object.assign({}, sessionStorage))")


def _log_in(page, email: str) -> None:
    page.locator("#id_username").fill(email)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("form.account-form button[type=submit]").click()


def _expect_kept(page) -> None:
    from playwright.sync_api import expect

    for selector, value in TYPED.items():
        expect(page.locator(selector)).to_have_value(value)
    expect(page.locator("#id_quantity")).to_have_value("2")
    expect(page.locator("#id_term")).to_have_value("7")
    expect(page.locator("#id_country")).to_have_value("PT")
    expect(page.locator(OPTION)).to_be_checked()
    expect(page.locator("#id_accept")).to_be_checked()
    expect(page.locator("#id_business")).to_be_checked()


def test_a_typed_checkout_survives_a_language_switch_a_lost_session_and_a_refusal(store, page, shot):
    from playwright.sync_api import expect

    user = shop.customer(email="dana@example.com", password=PASSWORD)
    page.goto(f"{store}/en/account/login/?next=/en/checkout/h100-sxm-80gb/%3Fquantity%3D1%26term%3D3")
    _log_in(page, "dana@example.com")
    expect(page).to_have_url(re.compile(r"/en/checkout/h100-sxm-80gb/"))
    total = page.locator("#checkout-total")
    before = total.inner_text()
    priced = []  # the summary's requests: what of the form leaves the page for them
    page.on("request", lambda request: priced.append(request.url) if "/price/" in request.url else None)

    # Typed as a customer types it; the price summary follows the quantity, term and option.
    page.locator("#id_quantity").fill("2")
    page.locator("#id_quantity").press("Tab")
    page.locator("#id_term").select_option("7")
    page.locator(OPTION).check()
    for selector, value in TYPED.items():
        page.locator(selector).fill(value)
    page.locator("#id_country").select_option("PT")
    page.locator("#id_business").check()  # a VAT id is for a business's purchase
    page.locator("#id_accept").check()
    expect(page.locator("#checkout-price tr[data-option='extra-nvme-4tb']")).to_have_class("chosen")
    expect(total).not_to_have_text(before)
    expect(page.locator("#checkout-price")).to_contain_text("7 days")
    shot(page, "1-typed")
    assert priced and all(set(parse_qs(urlsplit(url).query)) <= {"quantity", "term", "start_mode", "start", "options"}
                          for url in priced), priced

    # A language switch: the Portuguese checkout, with everything typed.
    page.locator("#language-select").select_option("pt")
    expect(page).to_have_url(re.compile(r"/pt/checkout/h100-sxm-80gb/"))
    expect(page.locator("html")).to_have_attribute("lang", "pt")
    _expect_kept(page)
    expect(page.locator("#checkout-price tr[data-option='extra-nvme-4tb']")).to_have_class("chosen")
    shot(page, "2-switched")

    # The session goes (expired, logged out elsewhere) and the form is sent: the log-in page says why, and
    # the checkout comes back with the choice in its address and the rest from the draft.
    page.context.clear_cookies(name="sessionid")
    page.locator("form.checkout button[type=submit]").click()
    expect(page).to_have_url(re.compile(r"/pt/account/login/\?next="))
    expect(page.locator(".to-checkout")).to_be_visible()
    shot(page, "3-login")
    _log_in(page, "dana@example.com")
    expect(page).to_have_url(re.compile(r"/pt/checkout/h100-sxm-80gb/\?.*quantity=2"))
    _expect_kept(page)

    # The order limit is reached meanwhile: the 429 is the form again, with everything typed.
    RateEvent.objects.bulk_create([RateEvent(scope="order:account", key=_account_key(user), at=timezone.now())
                                   for _ in range(LIMITS["order"][0].count)])
    page.locator("form.checkout button[type=submit]").click()
    expect(page.locator(".refusal")).to_be_visible()
    _expect_kept(page)
    shot(page, "4-refused")
    assert Order.objects.count() == 0

    # A private key pasted over the public one is never stored in the browser (the server refuses it too).
    assert "ssh-ed25519" in _storage(page)
    page.locator("#id_ssh_keys").fill(PRIVATE_KEY)
    page.locator("#id_name").fill("Dana Typed Again")  # typing goes on: the draft is written again
    page.wait_for_function("JSON.stringify(sessionStorage).includes('Dana Typed Again')")
    stored = _storage(page)
    assert "PRIVATE KEY" not in stored and "b3BlbnNzaC1rZXkt" not in stored and "ssh-ed25519" not in stored
    assert "csrfmiddlewaretoken" not in stored and "submission" not in stored
    drafts = [key for key in json.loads(stored) if key.startswith("anchorgpu:draft:")]
    # One draft, whatever the language, kept under its customer.
    assert drafts == [f"anchorgpu:draft:{user.pk}:/checkout/h100-sxm-80gb/"]
    assert "PRIVATE KEY" not in page.evaluate("JSON.stringify(Object.assign({}, localStorage))")

    # The order placed (limit cleared): the draft is dropped.
    RateEvent.objects.all().delete()
    page.locator("#id_ssh_keys").fill(shop.ED25519)
    page.locator("#id_name").fill("Dana Typed")
    page.locator("form.checkout button[type=submit]").click()
    expect(page).to_have_url(re.compile(r"/pt/orders/[^/]+/$"))
    page.wait_for_function("!Object.keys(sessionStorage).some(k => k.startsWith('anchorgpu:draft:'))")
    order = Order.objects.get()
    assert (order.name, order.quantity, order.term_days, order.company) == ("Dana Typed", 2, 7, "Typed Lda")
    shot(page, "5-placed")


def test_a_draft_stays_with_the_customer_who_typed_it(store, page):
    """Dana types a checkout and logs out without ordering; Eve logs in in the same tab and opens the same
    checkout: nothing of Dana's is put back, and logging out emptied the tab's drafts."""
    from playwright.sync_api import expect

    shop.customer(email="dana@example.com", password=PASSWORD)
    shop.customer(email="eve@example.com", password=PASSWORD)
    checkout = "/en/checkout/h100-sxm-80gb/?quantity=1&term=3"
    page.goto(f"{store}/en/account/login/?next={checkout.replace('?', '%3F').replace('&', '%26')}")
    _log_in(page, "dana@example.com")
    expect(page).to_have_url(re.compile(r"/en/checkout/h100-sxm-80gb/"))
    page.locator("#id_company").fill("Dana Lda")
    page.locator("#id_ssh_keys").fill(shop.ED25519)
    page.wait_for_function("JSON.stringify(sessionStorage).includes('Dana Lda')")

    page.locator("details.account-menu summary, header details summary").first.click()
    page.locator("form.logout button[type=submit]").click()
    page.wait_for_load_state()
    assert "Dana Lda" not in _storage(page) and "anchorgpu:draft:" not in _storage(page)

    page.goto(f"{store}/en/account/login/?next={checkout.replace('?', '%3F').replace('&', '%26')}")
    _log_in(page, "eve@example.com")
    expect(page).to_have_url(re.compile(r"/en/checkout/h100-sxm-80gb/"))
    expect(page.locator("#id_company")).to_have_value("")
    expect(page.locator("#id_ssh_keys")).to_have_value("")
