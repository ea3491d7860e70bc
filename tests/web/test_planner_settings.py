"""The planner page's advanced settings: closed at first, named as the JSON fields, passed on to the setup only
when changed, and bad input (gradient accumulation 0, an MoE-only target on a dense model, a config the
planner cannot build) a 400 with the reason, in the reader's language."""

import json
import re

import pytest

from anchorgpu.planner_pages.form import ADVANCED, ADVANCED_DEFAULTS
from tests import shop

pytestmark = pytest.mark.django_db

URL = "/en/planner/"
BASE = {"preset": "llama-3.2-1b", "method": "lora", "lora_rank": "16", "optimizer": "adamw",
        "precision": "bf16_mixed", "seq_len": "2048", "micro_batch": "1", "parallel": "single", "gpus": "1",
        "headroom": "10", "term": "7"}


@pytest.fixture
def shop_loaded():
    shop.load_shop()


def _advanced_part(page: str) -> str:
    match = re.search(r'<details class="advanced"[^>]*>.*?</details>', page, re.S)
    assert match, "no advanced settings on the page"
    return match.group(0)


def test_the_empty_form_has_every_setting_in_a_closed_advanced_part(client, shop_loaded):
    page = client.get(URL).content.decode()
    part = _advanced_part(page)
    assert part.startswith('<details class="advanced">')  # closed: a newcomer sees the usual fields first
    for name in ADVANCED:
        assert f'name="{name}"' in part, name
    assert 'value="zero3"' in page and 'value="paged_adamw8bit"' in page


def test_a_link_without_the_new_settings_plans_as_before(client, shop_loaded):
    response = client.get(URL, BASE)
    assert response.status_code == 200
    form = response.context["form"]
    assert not set(form.setup_fields()) & set(ADVANCED)
    assert _advanced_part(response.content.decode()).startswith('<details class="advanced">')


def test_settings_left_at_their_default_are_not_passed_on(client, shop_loaded):
    def as_sent(value):  # what a browser sends for the default: an unticked box sends nothing
        return {True: "true", False: None}[value] if isinstance(value, bool) else value

    sent = {name: as_sent(value) for name, value in ADVANCED_DEFAULTS.items()}
    response = client.get(URL, {**BASE, **{name: value for name, value in sent.items() if value is not None}})
    assert response.status_code == 200
    assert not set(response.context["form"].setup_fields()) & set(ADVANCED)


def test_changed_settings_reach_the_setup_and_open_the_advanced_part(client, shop_loaded):
    changed = {"method": "qlora", "grad_accumulation": "4", "lora_targets": "attention, lm_head", "lora_dropout": "0.1",
               "adapter_dtype": "bf16", "attention": "eager", "packed": "on", "cross_entropy": "chunked",
               "activation_offload": "on", "offload": "optimizer", "double_quant": "false",
               "prepare_kbit_training": "on"}
    response = client.get(URL, {**BASE, **changed})
    assert response.status_code == 200, response.context["form"].errors
    fields = response.context["form"].setup_fields()
    assert fields["grad_accumulation"] == 4 and fields["lora_dropout"] == 0.1 and fields["packed"] is True
    assert fields["attention"] == "eager" and fields["double_quant"] is False and fields["offload"] == "optimizer"
    assert fields["prepare_kbit_training"] is True
    assert _advanced_part(response.content.decode()).startswith('<details class="advanced" open>')
    plain = client.get(URL, {**BASE, "method": "qlora"}).context["peak_gb"]
    assert response.context["peak_gb"] != plain  # eager attention and the rest move the peak


def test_the_forms_choices_are_the_setups():
    from anchorgpu.planner import setup
    from anchorgpu.planner_pages.form import PlannerForm

    fields = PlannerForm.base_fields
    for name, allowed in [("attention", setup.ATTENTION), ("cross_entropy", setup.CROSS_ENTROPY),
                          ("offload", setup.OFFLOAD), ("adapter_dtype", setup.ADAPTER_DTYPES),
                          ("parallel", setup.PARALLEL), ("optimizer", setup.OPTIMIZERS)]:
        assert {key for key, _label in fields[name].choices} == set(allowed), name
    assert set(ADVANCED_DEFAULTS) == set(ADVANCED)
    defaults = setup.TrainingSetup()
    for name, value in ADVANCED_DEFAULTS.items():
        if name != "lora_targets":  # the form's empty targets stand for the setup's default ones
            assert getattr(defaults, name) == value, name


@pytest.mark.parametrize("params, text", [
    ({"grad_accumulation": "0"}, "1 or more"),
    ({"grad_accumulation": "two"}, "whole number"),
    ({"lora_targets": "experts"}, "experts"),
    ({"lora_dropout": "1"}, "0.99"),
    ({"double_quant": "maybe"}, "maybe"),
    ({"double_quant": "false"}, "qlora"),
    ({"prepare_kbit_training": "on"}, "qlora"),
    ({"method": "full", "lora_dropout": "0.1"}, "leave it at 0"),
    ({"preset": "", "config": "{not json"}, "not valid JSON"),
    ({"preset": "", "config": '{"model_type": "bert", "hidden_size": 768}'}, "bert"),
    ({"preset": "", "config": json.dumps({"model_type": "llama", "num_attention_heads": 32})}, "hidden_size"),
])
def test_bad_input_is_a_400_with_the_reason(client, shop_loaded, params, text):
    response = client.get(URL, {**BASE, **params})
    page = response.content.decode()
    assert response.status_code == 400 and text in page and "Traceback" not in page


def test_experts_as_lora_targets_on_a_mixture_of_experts(client, shop_loaded):
    response = client.get(URL, {**BASE, "preset": "qwen3-30b-a3b", "seq_len": "1024",
                                "lora_targets": "attention, experts"})
    assert response.status_code == 200, response.context["form"].errors
    assert response.context["form"].setup_fields()["lora_targets"] == "attention, experts"


@pytest.mark.parametrize("lang, expected", [("pt", "Configurações avançadas"), ("fr", "Réglages avancés"),
                                            ("ko", "고급 설정")])
def test_the_advanced_part_reads_in_the_readers_language(client, shop_loaded, lang, expected):
    response = client.get(f"/{lang}/planner/", {**BASE, "grad_accumulation": "0"})
    page = response.content.decode()
    assert response.status_code == 400 and expected in page
    assert "Gradient accumulation counts" not in page and "Advanced settings" not in page


def test_the_simulation_queued_from_the_page_keeps_the_changed_settings(client, shop_loaded):
    pytest.importorskip("torch")
    from urllib.parse import urlencode

    from django.urls import reverse
    from django.utils import translation

    from anchorgpu.planner.presets import preset
    from anchorgpu.planner.setup import setup_from_mapping
    from anchorgpu.simulations.models import SimulationJob

    fields = {**BASE, "preset": "", "config": json.dumps(preset("tiny-llama").config), "lora_rank": "8",
              "seq_len": "64", "grad_accumulation": "2", "lora_dropout": "0.05"}
    with translation.override("en"):
        response = client.post(reverse("planner_simulate") + "?" + urlencode(fields))
    assert response.status_code == 302, response.content.decode()[:2000]
    job = SimulationJob.objects.get()
    assert job.setup["grad_accumulation"] == 2 and job.setup["lora_dropout"] == 0.05
    assert "attention" not in job.setup  # left at its default: not stored
    setup = setup_from_mapping(job.setup)  # and it reads back
    assert setup.grad_accumulation == 2 and setup.attention == "auto"
