"""A real browser (Debian's Chromium driven by Playwright) against a live shop.

Playwright cannot download its own browsers here, so it drives
/usr/bin/chromium. Where Chromium or Playwright is missing the tests skip and
say so; CI installs both (.ci/run), and under CI a missing browser is an error.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("ANCHORGPU_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("ANCHORGPU_TEST_ARTIFACTS", "test-artifacts"))
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync"]


def _missing() -> str | None:
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install '.[test]')"
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    return None


@pytest.fixture(scope="session")
def browser():
    problem = _missing()
    if problem:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"{problem}: under CI the browser tests must run")
        pytest.skip(problem)
    # Playwright's sync API keeps an event loop in this thread; Django's
    # guard against ORM calls from async code would otherwise trip on it.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh page. Every test using it also checks that nothing it visited broke the
    Content-Security-Policy (an inline script or style would show up here as a console error)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-GB")
    page = context.new_page()
    page.set_default_timeout(15_000)
    refused = []
    page.on("console", lambda msg: refused.append(f"{page.url}: {msg.text}")
            if "Content Security Policy" in msg.text else None)
    yield page
    context.close()
    assert not refused, "the Content-Security-Policy refused:\n" + "\n".join(refused)


@pytest.fixture
def shot(request):
    """Save a screenshot under test-artifacts/ named after the test and a step."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(page, step: str) -> Path:
        path = ARTIFACTS / f"{request.node.name}-{step}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
