"""Why LitGPT's Gemma-7B LoRA runs ran out of memory on A10Gs, as the bench now models it (issue 21).

LitGPT's own model keeps ``lm_head`` apart from the embedding, so the model it trains is the config.json with
``tie_word_embeddings`` false: one more vocab x hidden matrix of frozen bf16 weights. The table's "4xA10G" LoRA
runs used one GPU of a 4-GPU machine (the YAML's ``devices: 1``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import planner_gpu_published as bench  # noqa: E402
from published_peaks import CARDS, CONFIGS, ROWS  # noqa: E402

from anchorgpu.planner import TrainingSetup, estimate, parameter_counts  # noqa: E402
from anchorgpu.planner.analytic import NO_RESERVE  # noqa: E402
from anchorgpu.planner.model_spec import model_spec_from_config  # noqa: E402
from anchorgpu.planner.setup import setup_from_mapping  # noqa: E402

# A small Gemma: head_size x heads (4 x 16 = 64) differs from hidden (48), as in Gemma 7B (16 x 256 vs 3072).
SMALL_GEMMA = {"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_act": "gelu_pytorch_tanh",
               "hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 4, "head_dim": 16, "vocab_size": 1000, "max_position_embeddings": 256,
               "rms_norm_eps": 1e-06}
LORA_ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")


def _spec(config, tie):
    return model_spec_from_config({**config, "tie_word_embeddings": tie}, name="small-gemma")


def _row(row_id):
    return next(row for row in ROWS if row.id == row_id)


def _breakdown(row):
    spec = model_spec_from_config(dict(CONFIGS[row.config][0]), name=row.model)
    fields, missing = bench.setup_fields(dict(row.settings))
    assert missing == []
    return estimate(spec, setup_from_mapping(fields))


def test_untying_the_head_adds_one_vocab_by_hidden_matrix():
    tied, untied = parameter_counts(_spec(SMALL_GEMMA, True)), parameter_counts(_spec(SMALL_GEMMA, False))
    assert tied.lm_head == 0 and untied.lm_head == 1000 * 48
    assert untied.total - tied.total == 1000 * 48


@pytest.mark.parametrize("method", ["lora", "full"])
def test_an_untied_head_costs_its_bf16_weights_and_for_full_its_gradient_and_adam_state(method):
    setup = TrainingSetup(method=method, precision="bf16", lora_rank=4, lora_targets=LORA_ALL, seq_len=16)
    tied = estimate(_spec(SMALL_GEMMA, True), setup, reserve=NO_RESERVE)
    untied = estimate(_spec(SMALL_GEMMA, False), setup, reserve=NO_RESERVE)
    head = 1000 * 48
    assert untied.weights - tied.weights == 2 * head  # frozen (LoRA) or trained (full), bf16 either way
    if method == "lora":  # the base head is frozen: the adapters are the same, tied or not
        assert (untied.gradients, untied.optimizer) == (tied.gradients, tied.optimizer)
    else:  # bf16 gradient, AdamW's two bf16 moments
        assert untied.optimizer - tied.optimizer == 2 * 2 * head


def test_litgpt_configs_are_the_hugging_face_ones_with_the_head_untied():
    derived = [key for key in CONFIGS if key.endswith("-litgpt")]
    assert derived == ["gemma-7b-litgpt", "gemma-2-9b-litgpt"]
    for key in derived:
        config, where = CONFIGS[key]
        base, _ = CONFIGS[key.removesuffix("-litgpt")]
        assert {k: v for k, v in config.items() if k != "tie_word_embeddings"} == {
            k: v for k, v in base.items() if k != "tie_word_embeddings"}
        assert config["tie_word_embeddings"] is False
        assert "convert_hf_checkpoint.py:206-207" in where


def test_every_litgpt_row_trains_an_untied_model():
    for row in ROWS:
        if row.id.startswith("lg-"):
            assert CONFIGS[row.config][0].get("tie_word_embeddings") is False, row.id


def test_gemma_7b_as_litgpt_builds_it_has_the_head_counted_twice():
    tied = parameter_counts(model_spec_from_config(dict(CONFIGS["gemma-7b"][0]), name="gemma-7b"))
    untied = parameter_counts(model_spec_from_config(dict(CONFIGS["gemma-7b-litgpt"][0]), name="gemma-7b"))
    assert untied.total - tied.total == 256000 * 3072 == 786_432_000
    assert untied.total == 9_324_112_896  # 8,537,680,896 (Hugging Face, tied) + the head


def test_the_4xa10g_lora_run_is_the_one_device_run():
    one, four = _row("lg-gemma-7b-lora-1xa10g-oom"), _row("lg-gemma-7b-lora-4xa10g-oom")
    assert dict(four.settings) == dict(one.settings)
    assert four.gpus == 1 and four.settings["parallel"] == "single"
    for name in ("gpus", "parallel", "grad_checkpointing"):
        assert "devices: 1" in four.trust[name]


def test_the_gemma_7b_run_does_not_fit_an_a10g_even_before_the_cuda_context():
    breakdown = _breakdown(_row("lg-gemma-7b-lora-1xa10g-oom"))
    allocated, _ = bench.measured_bytes(breakdown, "allocated", CARDS["a10g"].generation)
    assert allocated > CARDS["a10g"].memory_bytes


def test_every_judged_oom_run_is_does_not_fit():
    results = [bench.plan_row(row) for row in ROWS if row.measure == "oom"]
    judged = [r for r in results if r.status == "oom"]
    assert len(judged) == 5
    assert [r.row.id for r in judged if r.fits is not False] == []
