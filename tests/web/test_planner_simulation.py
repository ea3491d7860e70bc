"""The planner's simulation from the shop: queued from the results, a page that follows it, the options priced
from the simulated steps with links to checkout, and clear refusals."""

import json
import re
from urllib.parse import urlencode

import pytest
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import translation

from anchorgpu.planner.presets import preset
from anchorgpu.simulations import runner
from anchorgpu.simulations.models import SimulationJob
from tests import shop

pytest.importorskip("torch")
pytestmark = pytest.mark.django_db

TINY = json.dumps(preset("tiny-llama").config)
FIELDS = {"config": TINY, "method": "lora", "lora_rank": "8", "optimizer": "adamw", "precision": "bf16_mixed",
          "seq_len": "64", "micro_batch": "1", "parallel": "single", "gpus": "1", "headroom": "10", "term": "7"}


@pytest.fixture
def shop_loaded():
    shop.load_shop()


@pytest.fixture(autouse=True)
def english():
    """reverse() follows the active language, which an earlier test's /pt/ request may have left on."""
    with translation.override("en"):
        yield


def simulate(client, **changes):
    """Presses "Run the simulation": a POST to the address the results' form gives (the inputs in its query)."""
    return client.post(reverse("planner_simulate") + "?" + urlencode({**FIELDS, **changes}))


def test_the_results_offer_a_simulation_that_runs_in_the_background(client, shop_loaded):
    page = client.get(reverse("planner"), FIELDS).content.decode()
    assert "Run the simulation" in page and reverse("planner_simulate") in page

    response = simulate(client)
    assert response.status_code == 302
    job = SimulationJob.objects.get()
    assert response["Location"] == reverse("planner_simulation", kwargs={"job_id": job.pk}) + "?headroom=10&term=7"
    assert job.state == "queued" and job.model_source == {"config": json.loads(TINY)}
    assert 1 in job.card_counts and max(job.card_counts) >= 2

    waiting = client.get(response["Location"]).content.decode()
    assert "Queued" in waiting and 'hx-trigger="every 2s"' in waiting
    assert "0 simulations run before this one" in waiting

    assert runner.run_next("test-runner") == "done"
    status_url = reverse("planner_simulation_status", kwargs={"job_id": job.pk}) + "?headroom=10&term=7"
    fragment = client.get(status_url)
    html = fragment.content.decode()
    assert fragment.status_code == 200 and "Done" in html and "hx-trigger" not in html  # polling stops
    assert "Simulated" in html and "Instant estimate" in html and "GB of device memory per card at the peak" in html
    context = fragment.context
    assert context["engine"] == "simulate"
    simulated_peak = SimulationJob.objects.get().result[0]["peak"]
    assert context["breakdown_object"].live == simulated_peak  # the headline is the simulated step
    best = next(row for row in context["options"] if row["best"])
    assert best["option"].fits and reverse("checkout", kwargs={"slug": best["option"].offer.slug}) in best["checkout"]
    assert best["checkout"].replace("&", "&amp;") in html
    assert abs(context["difference_percent"]) < 25  # the instant estimate is near the simulation


def test_the_same_request_reuses_the_job_and_its_result(client, shop_loaded):
    first = simulate(client)
    second = simulate(client)
    assert first["Location"] == second["Location"] and SimulationJob.objects.count() == 1


def test_settings_the_simulation_cannot_run_are_refused_before_queueing(client, shop_loaded):
    page = client.get(reverse("planner"), {**FIELDS, "method": "qlora"}).content.decode()
    assert "Run the simulation" not in page and "bitsandbytes" in page
    response = simulate(client, method="qlora")
    assert response.status_code == 400 and "bitsandbytes" in response.content.decode()
    assert not SimulationJob.objects.exists()


@pytest.mark.parametrize("changes, text", [
    ({"seq_len": "999999"}, "longer than"),
    ({"config": "{not json"}, "not valid JSON"),
    ({"config": "", "preset": ""}, "Choose a model"),
])
def test_bad_input_is_a_400_with_the_reason_and_queues_nothing(client, shop_loaded, changes, text):
    response = simulate(client, **changes)
    assert response.status_code == 400 and text in response.content.decode()
    assert not SimulationJob.objects.exists()


@override_settings(ANCHORGPU_SIMULATION_PER_REQUESTER=1)
def test_a_visitor_with_a_simulation_waiting_is_told_to_wait(client, shop_loaded):
    assert simulate(client).status_code == 302
    refused = simulate(client, seq_len="128")
    assert refused.status_code == 429 and "already have 1" in refused.content.decode()


@override_settings(ANCHORGPU_SIMULATION_PER_REQUESTER=1, ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY=True)
def test_visitors_behind_the_proxy_each_have_their_own_quota(shop_loaded):
    def visitor(forwarded: str) -> Client:  # the proxy on the same machine appends the visitor's address
        return Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert simulate(visitor("198.51.100.1")).status_code == 302
    assert simulate(visitor("203.0.113.2"), seq_len="128").status_code == 302  # not the first one's quota
    spoofed = simulate(visitor("203.0.113.77, 198.51.100.1"), seq_len="256")  # a first hop written by the client
    assert spoofed.status_code == 429 and SimulationJob.objects.count() == 2


def test_a_simulation_only_answers_to_post(client, shop_loaded):
    assert client.get(reverse("planner_simulate"), FIELDS).status_code == 405


def test_an_unknown_job_is_a_404(client, shop_loaded):
    assert client.get("/en/planner/simulations/00000000-0000-4000-8000-000000000000/").status_code == 404
    assert client.get("/en/planner/simulations/not-a-uuid/").status_code == 404


def test_a_failed_job_says_why(client, shop_loaded):
    location = simulate(client)["Location"]
    job = SimulationJob.objects.get()
    SimulationJob.objects.filter(pk=job.pk).update(state="failed", failure="timeout",
                                                   error="The simulation ran longer than 600 s and was stopped.")
    html = client.get(location).content.decode()
    assert "Failed" in html and "ran past its time limit" in html and "600 s" in html


def test_the_job_page_speaks_the_visitors_language(client, shop_loaded):
    location = simulate(client)["Location"]
    korean = client.get(re.sub(r"^/en/", "/ko/", location)).content.decode()
    assert "Queued" not in korean
