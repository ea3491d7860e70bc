"""`anchorgpu plan` answers for the published configs of the models most fine-tuned today."""

from __future__ import annotations

import json

import pytest

from anchorgpu.planner.params import parameter_counts
from anchorgpu.planner.presets import PRESETS, preset_spec
from tests.planner.test_command import plan
from tests.planner.test_published_counts import TOTALS


@pytest.mark.parametrize("key", sorted(TOTALS))
def test_plan_reads_the_config_file_and_recommends(key, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(PRESETS[key].config), encoding="utf-8")
    code, out, err = plan("--config", str(path), "--method", "lora", "--grad-checkpointing", "--seq-len", "4096",
                          "--json")
    assert code == 0, err
    data = json.loads(out)
    # The frozen bf16 base alone is two bytes per parameter: the peak can only be above it.
    assert data["peak_bytes_per_device"] > 2 * parameter_counts(preset_spec(key)).total
    assert data["recommendations"], data


def test_a_moe_model_keeps_every_expert_on_the_card_but_routes_only_top_k():
    """Qwen3-30B-A3B: all 30.5 B parameters are weights on the card, whatever few a token runs through."""
    code, out, _ = plan("--preset", "qwen3-30b-a3b", "--method", "lora", "--precision", "bf16", "--json")
    data = json.loads(out)
    assert code == 0 and data["breakdown"]["weights"] >= 2 * TOTALS["qwen3-30b-a3b"]


def test_lora_targets_follow_the_layout_of_fused_and_latent_attention():
    from anchorgpu.planner.model_spec import resolve_targets
    from anchorgpu.planner.setup import DEFAULT_LORA_TARGETS

    assert resolve_targets(preset_spec("phi-4"), DEFAULT_LORA_TARGETS) == ("qkv_proj", "o_proj")
    assert resolve_targets(preset_spec("deepseek-v2-lite"), DEFAULT_LORA_TARGETS) == (
        "q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
    code, out, err = plan("--preset", "phi-4", "--method", "lora", "--lora-targets", "attention", "--json")
    assert code == 0, err
    code, out, err = plan("--preset", "deepseek-v2-lite", "--method", "lora", "--json")
    assert code == 0, err


def test_an_expert_target_on_a_dense_model_is_refused():
    code, _, err = plan("--preset", "qwen3-8b", "--method", "lora", "--lora-targets", "experts")
    assert code == 2 and "experts" in err and "dense" in err
