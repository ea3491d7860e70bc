"""The planner page: the analytic estimate, where it fits with prices, links to checkout, clear errors."""

import pytest
from django.urls import reverse

from tests import shop

pytestmark = pytest.mark.django_db

URL = "/en/planner/"


@pytest.fixture
def shop_loaded():
    shop.load_shop()


def test_the_empty_form(client, shop_loaded):
    response = client.get(URL)
    assert response.status_code == 200 and "meta-llama/Llama-3.1-8B" in response.content.decode()


def test_a_plan_lists_every_card_with_fit_price_and_checkout(client, shop_loaded):
    response = client.get(URL, {"preset": "llama-3.1-8b", "method": "lora", "lora_rank": "16", "optimizer": "adamw",
                                "precision": "bf16_mixed", "seq_len": "2048", "micro_batch": "1",
                                "grad_checkpointing": "on", "parallel": "single", "gpus": "1", "headroom": "10",
                                "term": "7"})
    page = response.content.decode()
    assert response.status_code == 200
    assert "GB of device memory per card at the peak" in page and "Optimizer state" in page
    # the three measures, each named after what reports it, and the guide that explains why they differ
    for name in ("torch.cuda.max_memory_allocated", "torch.cuda.max_memory_reserved", "nvidia-smi"):
        assert name in page
    assert "#planner-measures" in page
    allocated, reserved, used = (gb for _label, gb, _what in response.context["measures"])
    assert allocated <= reserved < used
    rows = response.context["options"]
    for row in rows:  # each card's figure is its own generation's device memory, on which "fits" is decided
        assert row["peak_gb"] * 1e9 == row["option"].device_used_bytes
        assert row["option"].fits == (row["option"].device_used_bytes <= row["option"].usable_bytes)
    assert {r["option"].offer.slug for r in rows} >= {"h100-sxm-80gb", "mi300x-192gb"}
    best = next(r for r in rows if r["best"])
    assert best["option"].fits and best["price"] is not None
    assert reverse("checkout", kwargs={"slug": best["option"].offer.slug}) in best["checkout"]
    assert f'href="{best["checkout"].replace("&", "&amp;")}"' in page


def test_a_full_70b_fine_tune_fits_nowhere_and_says_why(client, shop_loaded):
    response = client.get(URL, {"preset": "llama-3.1-70b", "method": "full", "lora_rank": "16", "optimizer": "adamw",
                                "precision": "bf16_mixed", "seq_len": "4096", "micro_batch": "1",
                                "parallel": "single", "gpus": "1", "headroom": "10", "term": "7"})
    assert response.status_code == 200
    assert not any(r["option"].fits for r in response.context["options"])
    assert "overflows at" in response.content.decode()


@pytest.mark.parametrize("params, text", [
    ({}, "Choose a model"),
    ({"config": "{not json"}, "not valid JSON"),
    ({"config": '{"model_type": "bert", "hidden_size": 8}'}, "bert"),
    ({"preset": "llama-3.2-1b", "seq_len": "999999"}, "longer than"),
    ({"preset": "llama-3.2-1b", "seq_len": "-5"}, "greater than or equal to 1"),
    ({"preset": "llama-3.2-1b", "seq_len": "abc"}, "whole number"),
])
def test_bad_input_is_a_400_with_the_reason(client, shop_loaded, params, text):
    base = {"method": "lora", "lora_rank": "16", "optimizer": "adamw", "precision": "bf16_mixed", "seq_len": "2048",
            "micro_batch": "1", "parallel": "single", "gpus": "1", "headroom": "10", "term": "7", "x": "1"}
    response = client.get(URL, {**base, **params})
    assert response.status_code == 400
    assert text in response.content.decode()


@pytest.mark.parametrize("lang, expected", [("ko", "위치보다 깁니다"), ("fr", "plus longue que"), ("pt", "mais longa que")])
def test_the_planners_own_messages_are_in_the_readers_language(client, shop_loaded, lang, expected):
    response = client.get(f"/{lang}/planner/", {"preset": "llama-3.2-1b", "method": "lora", "lora_rank": "16",
                                               "optimizer": "adamw", "precision": "bf16_mixed", "seq_len": "999999",
                                               "micro_batch": "1", "parallel": "single", "gpus": "1",
                                               "headroom": "10", "term": "7"})
    page = response.content.decode()
    assert response.status_code == 400 and expected in page and "999999" in page and "longer than" not in page
