"""The planner in Chromium: plan, run the simulation in the background, watch the page fill in by itself, and
follow the cheapest fit to checkout."""

import json

import pytest

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

from anchorgpu.demo import load_demo
from anchorgpu.planner.presets import preset

pytest.importorskip("torch")
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop(live_server):
    from anchorgpu.simulations.runner import SimulationRunner

    load_demo()
    runner = SimulationRunner(poll=0.5)  # as `anchorgpu serve` runs it: a thread, each job in a child process
    runner.start()
    yield live_server.url
    runner.stop()
    runner.join(120)


def test_a_simulation_runs_in_the_background_and_its_page_updates_itself(shop, page, shot):
    page.goto(f"{shop}/en/planner/")
    page.select_option("#id_preset", "")
    page.fill("#id_config", json.dumps(preset("tiny-llama").config))
    page.select_option("#id_method", "lora")
    page.fill("#id_seq_len", "64")
    page.get_by_role("button", name="Plan").click()
    page.get_by_role("heading", name="Check it with a simulation").wait_for()
    shot(page, "1-analytic")

    page.get_by_role("button", name="Run the simulation").click()
    page.wait_for_url("**/planner/simulations/**")
    page.evaluate("window.__sameDocument = true")  # lost if the page reloads
    assert page.locator("#simulation .state").inner_text() in {"Queued", "Running"}
    shot(page, "2-waiting")

    expect(page.locator("#simulation .state")).to_have_text("Done", timeout=120_000)  # (the CSP forbids eval)
    assert page.evaluate("window.__sameDocument") is True  # htmx swapped the fragment in place
    comparison = page.locator("table.comparison").inner_text()
    assert "simulated" in comparison.lower() and "instant estimate" in comparison.lower()
    assert "llama (2 layers, hidden 64)" in page.locator("h1").inner_text()
    shot(page, "3-done")

    cheapest = page.locator("tr.chosen a.button")
    href = cheapest.get_attribute("href")
    assert "/en/checkout/" in href and "quantity=" in href
    cheapest.click()
    page.wait_for_load_state()
    assert "/checkout/" in page.url or "/account/login/" in page.url  # checkout asks a visitor to sign in first
