"""Phone, tablet and desktop widths in Chromium, in all four languages: no page of the walk pans
sideways, and the price and the order button of every catalog row and planner option can be
reached by scrolling down only. Korean keeps its words whole.

One test per width, the languages and pages looped inside it, in one browser; every problem is
collected and reported together. Screenshots of the walk (pt and ko at 390 and 1366 px) go to
test-artifacts/walk-<lang>-<width>-<page>.png.
"""

from __future__ import annotations

import time

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.customer_walk import LANGUAGES, walk

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = (390, 768, 1366, 1920)
WALK = ("catalog", "product", "planner", "checkout", "guides", "guide-blackwell-lots", "order")
SCREENSHOTS = {("pt", 390), ("pt", 1366), ("ko", 390), ("ko", 1366)}
SHOT_PAGES = ("catalog", "product", "planner", "checkout", "order")
# What must stay in view on each page: (what, selector, how many at least).
MUST_SHOW = {
    "catalog": [("price", "#offers tbody td.price", 15), ("configure button", "#offers tbody a.button", 5)],
    "planner": [("price", "table.options tbody td.price", 5), ("order button", "table.options tbody a.button", 3)],
}

# The document's widths, the elements that reach past the right edge (the deepest ones), and for
# each thing that must show, whether it lies inside the viewport and inside every box that clips it.
MEASURE = """(mustShow) => {
  const doc = document.documentElement, vw = doc.clientWidth;
  const describe = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
    + (typeof el.className === "string" && el.className.trim()
      ? "." + el.className.trim().split(/\\s+/).join(".") : "");
  const wide = [...document.querySelectorAll("body *")]
    .filter(el => el.getBoundingClientRect().right > vw + 1
      && ![...el.children].some(c => c.getBoundingClientRect().right > vw + 1))
    .slice(0, 6).map(el => describe(el) + " right=" + Math.round(el.getBoundingClientRect().right));
  const problems = [], counts = {};
  for (const [what, selector] of mustShow) {
    const found = [...document.querySelectorAll(selector)];
    counts[what] = found.length;
    for (const el of found) {
      const r = el.getBoundingClientRect();
      const label = `${what} "${el.textContent.trim().replace(/\\s+/g, " ")}"`;
      if (r.width < 2 || r.height < 2) { problems.push(`${label} is not shown`); continue; }
      if (r.left < -0.5 || r.right > vw + 0.5) {
        problems.push(`${label} spans ${Math.round(r.left)}..${Math.round(r.right)} px of ${vw}`); continue; }
      for (let box = el.parentElement; box && box !== doc; box = box.parentElement) {
        if (getComputedStyle(box).overflowX === "visible") continue;
        const b = box.getBoundingClientRect();
        if (r.left < b.left - 0.5 || r.right > b.right + 0.5) {
          problems.push(`${label} (${Math.round(r.left)}..${Math.round(r.right)}) is cut off by ${describe(box)}`
            + ` (${Math.round(b.left)}..${Math.round(b.right)}): it needs a sideways scroll`);
          break;
        }
      }
    }
  }
  return {scroll: doc.scrollWidth, client: vw, inner: window.innerWidth, wide, problems, counts};
}"""

# Korean words (runs of Hangul) that the layout splits over two lines or more.
BROKEN_WORDS = """(selector) => {
  const broken = [];
  for (const el of document.querySelectorAll(selector)) {
    if (el.getBoundingClientRect().width < 2) continue;  // a header hidden in the stacked layout
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/[\\uac00-\\ud7a3]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        const wide = Math.round(el.getBoundingClientRect().width);
        if (lines.size > 1) broken.push(`${m[0]} (${lines.size} lines, ${wide} px wide)`);
      }
    }
  }
  return broken;
}"""
KOREAN_WORDS = ("table.options th, table.options td", "#offers th, #offers td", "main h1, main h2, main p")


@pytest.fixture
def shop_walk(live_server):
    return walk(live_server)


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_pans_sideways_and_prices_and_order_buttons_stay_in_view(shop_walk, browser, width):
    from playwright.sync_api import expect

    started = time.monotonic()
    phone = width < 500
    problems, checked = [], 0
    for lang in LANGUAGES:
        context = shop_walk.context(browser, lang, viewport={"width": width, "height": 900}, is_mobile=phone,
                                    has_touch=phone)
        page = context.new_page()
        page.set_default_timeout(15_000)
        try:
            for name in WALK:
                page.goto(shop_walk.url + shop_walk.pages(lang)[name])
                expect(page.locator(f"html[lang={lang}] main h1").first).to_be_visible()
                page.evaluate("document.querySelectorAll('details.advanced').forEach(d => { d.open = true; })")
                found = page.evaluate(MEASURE, [list(m) for m in MUST_SHOW.get(name, [])])
                where = f"{lang} {name} at {width} px"
                print(f"{where}: document {found['scroll']} px wide in {found['client']} px")
                if found["scroll"] > found["client"] or found["client"] > width or found["inner"] > width:
                    problems.append(f"{where} pans sideways: {found['scroll']} px of content in {found['client']} px"
                                    f" (window {found['inner']} px); too wide: {found['wide']}")
                for what, _selector, least in MUST_SHOW.get(name, []):
                    if found["counts"][what] < least:
                        problems.append(f"{where}: {found['counts'][what]} {what}s found, {least} expected")
                problems += [f"{where}: {p}" for p in found["problems"]]
                if lang == "ko":
                    body = page.evaluate("getComputedStyle(document.querySelector('main p, main td')).wordBreak")
                    if body != "keep-all":
                        problems.append(f"{where}: body text has word-break {body}, not keep-all")
                    for selector in KOREAN_WORDS:
                        broken = page.evaluate(BROKEN_WORDS, selector)
                        if broken:
                            problems.append(f"{where}: Korean words broken inside ({selector}): {broken[:6]}")
                if (lang, width) in SCREENSHOTS and name in SHOT_PAGES:
                    ARTIFACTS.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(ARTIFACTS / f"walk-{lang}-{width}-{name}.png"), full_page=True)
                checked += 1
        finally:
            context.close()
    print(f"{checked} pages at {width} px checked in {time.monotonic() - started:.1f} s")
    assert checked == len(LANGUAGES) * len(WALK)
    assert not problems, f"{len(problems)} layout problems at {width} px:\n" + "\n".join(problems)


def test_the_korean_fits_column_holds_its_words(shop_walk, browser):
    """The planner's "fits" column in Korean, at phone and desktop width: its header and cells are as
    wide as their words (the header once showed one syllable a line)."""
    from playwright.sync_api import expect

    for width in (390, 1366):
        context = shop_walk.context(browser, "ko", viewport={"width": width, "height": 900})
        page = context.new_page()
        try:
            page.goto(shop_walk.url + shop_walk.pages("ko")["planner"])
            fits = page.locator("table.options tbody td.fits")
            expect(fits.first).to_be_visible()
            assert page.evaluate("getComputedStyle(document.body).wordBreak") == "keep-all"
            assert fits.count() >= 5
            for cell in fits.all():
                box = cell.bounding_box()
                assert box["width"] >= 40, f"the fits cell {cell.inner_text()!r} is {box['width']} px wide at {width}"
            assert page.evaluate(BROKEN_WORDS, "table.options td.fits, table.options th.fits") == []
        finally:
            context.close()
