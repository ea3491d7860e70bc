"""The live catalog in Chromium: the controls update the table in place."""

import pytest

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

from anchorgpu.demo import load_demo

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop(live_server):
    load_demo()
    return live_server.url


def test_term_and_quantity_update_the_table_without_a_reload(shop, page, shot):
    page.goto(f"{shop}/en/")
    caption = page.locator("#offers caption")
    assert "7-day term" in caption.inner_text()
    page.evaluate("window.__sameDocument = true")  # lost if the page reloads
    shot(page, "1-initial")

    with page.expect_response(lambda r: "term=30" in r.url and r.request.headers.get("hx-request") == "true"):
        page.select_option("#id_term", "30")
    expect(page.locator("#offers caption")).to_contain_text("30-day")  # (no wait_for_function: the CSP forbids eval)
    page.fill("#id_quantity", "3")
    with page.expect_response(lambda r: "quantity=3" in r.url):
        page.locator("#id_quantity").dispatch_event("change")
    expect(page.locator("#offers caption")).to_contain_text("3 units")

    assert page.evaluate("window.__sameDocument") is True
    assert "term=30" in page.url and "quantity=3" in page.url  # the address can be shared
    rows = page.locator("#offers tbody tr")
    assert rows.count() == 5
    assert "B200 lot" in page.locator("#offers tbody").inner_text()
    shot(page, "2-updated")


def test_bad_quantity_shows_a_form_error_in_place(shop, page, shot):
    page.goto(f"{shop}/en/")
    page.evaluate("window.__sameDocument = true")
    page.fill("#id_quantity", "0")
    with page.expect_response(lambda r: "quantity=0" in r.url and r.status == 400):
        page.locator("#id_quantity").dispatch_event("change")
    alert = page.locator("#offers [role=alert]")
    alert.wait_for()
    assert "Quantity must be at least 1" in alert.inner_text()
    assert page.evaluate("window.__sameDocument") is True
    shot(page, "bad-quantity")


def test_phone_width_keeps_the_page_usable(shop, browser, shot):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    try:
        page.goto(f"{shop}/en/products/h100-sxm-80gb/?quantity=2&term=7")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways ({width}px)"
        assert page.locator("#quote").inner_text().count("Total for the term") == 1
        shot(page, "phone")
    finally:
        context.close()
