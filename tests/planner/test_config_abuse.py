"""Configs a customer may paste that must end in a message, fast: never a traceback, a hang or a 500."""

from __future__ import annotations

import time

import pytest

from anchorgpu.planner import TrainingSetup, preset_spec
from anchorgpu.planner.analytic import estimate
from anchorgpu.planner.errors import PlannerInputError
from anchorgpu.planner.model_spec import model_spec_from_config
from anchorgpu.planner.presets import PRESETS
from tests.planner.test_command import plan


def _config(key, **changes):
    return {**PRESETS[key].config, **changes}


@pytest.mark.parametrize("key, changes, field", [
    ("tiny-llama", {"num_hidden_layers": 10**12}, "config.num_hidden_layers"),
    ("tiny-qwen3-moe", {"num_hidden_layers": 10**7}, "config.num_hidden_layers"),
    ("tiny-qwen3", {"use_sliding_window": True, "max_window_layers": "x"}, "config.max_window_layers"),
    ("tiny-qwen3-moe", {"mlp_only_layers": 5}, "config.mlp_only_layers"),
    ("tiny-qwen3-moe", {"mlp_only_layers": [[1]]}, "config.mlp_only_layers"),
    ("tiny-qwen3-moe", {"num_experts_per_tok": 9}, "config.num_experts_per_tok"),
    ("gemma-3-27b", {"text_config": {**PRESETS["gemma-3-27b"].config["text_config"], "hidden_size": "512"}},
     "config.hidden_size"),
])
def test_a_malformed_config_is_refused_quickly_by_field(key, changes, field):
    started = time.perf_counter()
    with pytest.raises(PlannerInputError) as refused:
        model_spec_from_config(_config(key, **changes))
    assert refused.value.field == field
    assert time.perf_counter() - started < 5  # refused before any per-layer work


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, '{"rope_theta": 1' + "0" * 5000 + "}"])
def test_json_the_reader_cannot_take_is_exit_code_2(tmp_path, text):
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    code, out, err = plan("--config", str(path))
    assert code == 2 and out == "" and "Traceback" not in err and "config" in err


def test_accumulation_never_lowers_what_the_allocator_reserves():
    spec = preset_spec("llama-3.1-8b")
    one = estimate(spec, TrainingSetup(method="full")).measures("h100")
    four = estimate(spec, TrainingSetup(method="full", grad_accumulation=4)).measures("h100")
    assert four.reserved_peak_bytes >= one.reserved_peak_bytes
    assert four.allocated_peak_bytes >= one.allocated_peak_bytes
