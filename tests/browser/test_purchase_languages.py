"""Buying in Portuguese and in Korean in Chromium, from the catalog to "I've paid",
with no English left on the way; the language switcher; the pages at phone width.

Fields are found by their id and buttons by their text in the language's catalog
(read with polib), never by English text. Screenshots go to test-artifacts/ as
purchase-<lang>-<n>-<step>.png. Only Playwright's own waiting is used; no sleeps.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from anchorgpu.orders.models import Order
from tests import shop
from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.django_db(transaction=True)

LOCALE_DIR = Path(__file__).resolve().parents[2] / "src" / "anchorgpu" / "locale"
BROWSER_LANGUAGE = {"pt": ("pt-PT", "pt-PT,pt;q=0.9,en;q=0.5"), "ko": ("ko-KR", "ko-KR,ko;q=0.9,en;q=0.5")}
PHONE = {"width": 390, "height": 844}
PASSWORD = "correct horse battery staple"
PLACEHOLDER = re.compile(r"%\(\w+\)[sdi]|%[sdi]|\{\{[^}]*\}\}|<[^>]+>")
PROSE_WORD = re.compile(r"\b[a-z]{4,}\b")


@cache
def catalog(lang: str):
    import polib

    return polib.pofile(str(LOCALE_DIR / lang / "LC_MESSAGES" / "django.po"))


def tr(lang: str, msgid: str, context: str | None = None) -> str:
    """The translation of ``msgid`` in ``lang``'s catalog; a missing one fails the test."""
    entry = catalog(lang).find(msgid, msgctxt=context)
    assert entry is not None and entry.msgstr, f"{msgid!r} ({context}) is not translated in {lang}"
    return entry.msgstr


def _squash(text: str) -> str:
    return " ".join(text.split())


@cache
def english_fragments(lang: str) -> frozenset[str]:
    """Pieces (12+ characters) of the English prose the catalog translates into something else.

    A piece that the translations themselves contain (a name, a command kept in
    English) is left out: seeing it on the page does not mean English was left.
    """
    entries = [e for e in catalog(lang) if not e.obsolete and e.translated()]
    translations = " ".join(_squash(s) for e in entries for s in [e.msgstr, *e.msgstr_plural.values()])
    pieces = set()
    for entry in entries:
        translated = [entry.msgstr] if not entry.msgid_plural else list(entry.msgstr_plural.values())
        for english in filter(None, (entry.msgid, entry.msgid_plural)):
            if len(PROSE_WORD.findall(PLACEHOLDER.sub(" ", english))) < 2 or english in translated:
                continue
            for piece in PLACEHOLDER.split(english):
                piece = _squash(piece).strip(" :;,.()")
                if len(piece) >= 12 and piece not in translations:
                    pieces.add(piece)
    return frozenset(pieces)


def assert_no_english(page, lang: str, step: str) -> None:
    text = _squash(page.inner_text("body"))
    left = sorted(piece for piece in english_fragments(lang) if piece in text)
    assert not left, f"English left on the {lang} {step} page ({page.url}): {left}"


def screenshot(page, lang: str, step: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"purchase-{lang}-{step}.png"), full_page=True)


def step(page, lang: str, name: str) -> None:
    """Every step of the purchase: a screenshot, then no English on the page."""
    screenshot(page, lang, name)
    assert_no_english(page, lang, name)


def new_page(browser, lang: str, **options):
    locale, accept = BROWSER_LANGUAGE[lang]
    context = browser.new_context(locale=locale, extra_http_headers={"Accept-Language": accept}, **options)
    page = context.new_page()
    page.set_default_timeout(15_000)
    return page


# The deepest elements that reach past the right edge: what to fix when a page scrolls sideways.
WIDE_ELEMENTS = """(limit) => [...document.querySelectorAll("body *")]
  .filter(el => el.getBoundingClientRect().right > limit + 1 && ![...el.children].some(
    child => child.getBoundingClientRect().right > limit + 1))
  .slice(0, 8)
  .map(el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && el.className.baseVal === undefined
    ? "." + el.className.trim().replace(/ +/g, ".") : "") + " right=" + Math.round(el.getBoundingClientRect().right))"""


def at_phone_width(browser, page, lang: str, name: str) -> None:
    """The page open now, in a phone-sized context with the same session: it must not scroll sideways."""
    from playwright.sync_api import expect

    phone = new_page(browser, lang, viewport=PHONE, is_mobile=True, has_touch=True,
                     storage_state=page.context.storage_state())
    try:
        phone.goto(page.url)
        expect(phone.locator(f"html[lang={lang}] h1")).to_be_visible()
        screenshot(phone, lang, name)
        widths = phone.evaluate("({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})")
        if widths["scroll"] > PHONE["width"] + 1 or widths["inner"] > PHONE["width"] + 1:
            wide = phone.evaluate(WIDE_ELEMENTS, PHONE["width"])
            pytest.fail(f"{phone.url} scrolls sideways at phone width ({widths}); too wide: {wide}")
    finally:
        phone.context.close()


@pytest.fixture
def store(live_server):
    shop.load_shop()
    return live_server.url


@pytest.mark.parametrize("lang", ["pt", "ko"])
def test_a_new_customer_buys_an_h100_in_their_language(store, browser, lang):
    from playwright.sync_api import expect

    page = new_page(browser, lang, viewport={"width": 1280, "height": 900})
    try:
        # A first visit to the bare root follows the browser's language.
        page.goto(f"{store}/")
        expect(page).to_have_url(f"{store}/{lang}/")
        expect(page.locator("html")).to_have_attribute("lang", lang)
        expect(page.locator("#offers tbody tr").first).to_be_visible()
        step(page, lang, "1-catalog")

        # The product page: two cards for seven days; the order link follows the controls.
        page.locator("#offers a.button[href*='/products/h100-sxm-80gb/']").click()
        expect(page).to_have_url(re.compile(rf"/{lang}/products/h100-sxm-80gb/"))
        page.locator("#id_quantity").fill("2")
        page.locator("#id_quantity").press("Tab")  # leaving the field fires "change", as a person's edit does
        page.locator("#id_term").select_option("7")
        order_link = page.locator("#quote").get_by_role("link", name=tr(lang, "Order", "verb, button"), exact=True)
        expect(order_link).to_have_attribute("href", re.compile(r"quantity=2.*term=7|term=7.*quantity=2"))
        step(page, lang, "2-product")
        order_link.click()

        # Not logged in: the login page, and from there to sign-up, keeping where we were going.
        expect(page).to_have_url(re.compile(rf"/{lang}/account/login/\?next="))
        page.get_by_role("main").get_by_role("link", name=tr(lang, "Create an account")).click()
        expect(page).to_have_url(re.compile(rf"/{lang}/account/signup/\?next="))
        page.locator("#id_email").fill(f"bob-{lang}@example.com")
        page.locator("#id_password1").fill(PASSWORD)
        page.locator("#id_password2").fill(PASSWORD)
        step(page, lang, "3-signup")
        page.get_by_role("button", name=tr(lang, "Create the account")).click()

        # Checkout, with the quantity and term chosen on the product page.
        expect(page).to_have_url(re.compile(rf"/{lang}/checkout/h100-sxm-80gb/\?.*quantity=2"))
        expect(page.locator("#id_quantity")).to_have_value("2")
        expect(page.locator("#id_term")).to_have_value("7")
        expect(page.locator("#id_email")).to_have_value(f"bob-{lang}@example.com")
        step(page, lang, "4-checkout")
        at_phone_width(browser, page, lang, "5-checkout-phone")

        # Sent with only a name: the errors, in the language.
        place = page.get_by_role("button", name=tr(lang, "Place the order"))
        page.locator("#id_name").fill("Bob Example")
        place.click()
        expect(page.get_by_role("alert")).to_contain_text(tr(lang, "Please correct the following:"))
        expect(page.locator("#id_ssh_keys")).to_have_attribute("aria-invalid", "true")
        step(page, lang, "6-checkout-errors")

        page.locator("#id_country").select_option("PT")
        page.locator("#id_ssh_keys").fill(shop.ED25519)
        page.locator("input[name=coin][value=BTC]").check()
        page.locator("#id_accept").check()
        place.click()

        # The order page: where and how much to pay.
        expect(page).to_have_url(re.compile(rf"/{lang}/orders/[^/]+/$"))
        order = Order.objects.select_related("quote").get(user__email=f"bob-{lang}@example.com")
        assert (order.quantity, order.term_days, order.country.code) == (2, 7, "PT")
        expect(page.locator(".status .state")).to_have_text(tr(lang, "awaiting payment", "order state"))
        expect(page.locator("code.address")).to_have_text(order.quote.address)
        expect(page.locator(".qr svg")).to_be_visible()
        step(page, lang, "7-order")
        at_phone_width(browser, page, lang, "8-order-phone")

        # "I've paid": the payment is being checked.
        page.locator("#id_txid").fill(shop.TXID_BTC)
        page.get_by_role("button", name=tr(lang, "I've paid")).click()
        expect(page.locator(".status .state")).to_have_text(tr(lang, "payment being checked", "order state"))
        expect(page.locator("#id_txid")).to_have_count(0)
        step(page, lang, "9-claimed")
        order.refresh_from_db()
        assert order.state == "payment_claimed" and order.claimed_txid == shop.TXID_BTC
    finally:
        page.context.close()


@pytest.mark.parametrize("javascript", [True, False], ids=["auto", "no-js"])
def test_the_language_switcher_keeps_the_page_and_its_query(store, browser, javascript):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-GB",
                                  java_script_enabled=javascript)
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        page.goto(f"{store}/en/products/h100-sxm-80gb/?quantity=2&term=30")
        expect(page.locator("html")).to_have_attribute("lang", "en")
        change = page.locator("form.language button[type=submit]")
        if javascript:  # language.js hides the button: choosing is enough
            expect(change).to_be_hidden()
            page.locator("#language-select").select_option(label="한국어")
        else:
            page.locator("#language-select").select_option(label="한국어")
            change.click()
        expect(page).to_have_url(f"{store}/ko/products/h100-sxm-80gb/?quantity=2&term=30")
        expect(page.locator("html")).to_have_attribute("lang", "ko")
        expect(page.locator("#language-select")).to_have_value("ko")
        expect(page.locator("#id_quantity")).to_have_value("2")
        expect(page.locator("#id_term")).to_have_value("30")
        screenshot(page, "switcher", "ko-" + ("auto" if javascript else "no-js"))
        assert_no_english(page, "ko", "switched product")
    finally:
        context.close()
