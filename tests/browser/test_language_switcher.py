"""The language switcher in Chromium reaches every language from every page type, in browsers
that speak another language (Accept-Language and the browser's locale): the same page and query
in the chosen language. Django's own switch resolved the address in the browser's language, so a
Korean or English browser on a /pt/ page only reloaded the Portuguese page."""

from __future__ import annotations

import re
import time
from urllib.parse import unquote

import pytest

from tests.browser.customer_walk import LANGUAGES, walk

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop_walk(live_server):
    return walk(live_server)


def _switch_around(page, base: str, pages: dict[str, str], speaks: str) -> int:
    """From each page in the browser's own language, choose each other language in turn. The
    remembered choice is forgotten before each switch, so the switch request arrives in the
    browser's language while the page is in another one."""
    from playwright.sync_api import expect

    switches = 0
    for name, path in pages.items():
        page.goto(base + path)
        expect(page.locator("html")).to_have_attribute("lang", speaks)
        for target in (code for code in LANGUAGES if code != speaks):
            page.context.clear_cookies(name="django_language")
            page.locator("#language-select").select_option(target)
            wanted = re.sub(r"^/[a-z]{2}/", f"/{target}/", path).replace(f"next=/{speaks}/", f"next=/{target}/")
            expect(page.locator("html"), f"{name}: a {speaks} browser chose {target}").to_have_attribute(
                "lang", target)
            # The same page and query; the query may come back re-encoded (next=%2Fpt%2F...).
            assert unquote(page.url) == unquote(base + wanted), (name, speaks, target)
            expect(page.locator("#language-select")).to_have_value(target)
            switches += 1
    return switches


@pytest.mark.parametrize("speaks", LANGUAGES)
def test_every_language_from_every_page_in_a_browser_of_another_language(shop_walk, browser, speaks):
    started = time.monotonic()
    switches = 0
    for signed_in, pages in ((True, shop_walk.pages(speaks)), (False, shop_walk.anonymous_pages(speaks))):
        context = shop_walk.context(browser, speaks, signed_in=signed_in, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.on("dialog", lambda dialog: dialog.accept())  # a draft-keeping page may ask first
        refused = []
        page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
        try:
            switches += _switch_around(page, shop_walk.url, pages, speaks)
        finally:
            context.close()
        assert not refused, refused
    pages = len(shop_walk.pages(speaks)) + len(shop_walk.anonymous_pages(speaks))
    assert switches == pages * (len(LANGUAGES) - 1)
    print(f"{switches} switches from {pages} pages in a {speaks} browser in {time.monotonic() - started:.1f} s")
