"""Parameter counts against the published totals of the preset models."""

import pytest

from anchorgpu.planner import TrainingSetup, parameter_counts, preset_spec, trainable_parameters
from anchorgpu.planner.params import layer_parameters

# Totals as the model cards state them (rounded), and the exact count of the
# published safetensors where we know it.
PUBLISHED = {
    "llama-3.2-1b": (1.24e9, 1_235_814_400),
    "llama-3.2-3b": (3.21e9, 3_212_749_824),
    "llama-3.1-8b": (8.03e9, 8_030_261_248),
    "llama-3.1-70b": (70.6e9, 70_553_706_496),
    "mistral-7b-v0.3": (7.25e9, 7_248_023_552),
    "qwen2.5-7b": (7.61e9, 7_615_616_512),
    "qwen2.5-72b": (72.7e9, 72_706_203_648),
    "gemma-2-9b": (9.24e9, 9_241_705_984),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_total_matches_the_published_count(name):
    rounded, exact = PUBLISHED[name]
    total = parameter_counts(preset_spec(name)).total
    assert abs(total - rounded) / rounded < 0.005
    assert total == exact


def test_tied_embeddings_are_counted_once():
    counts = parameter_counts(preset_spec("llama-3.2-1b"))
    assert counts.lm_head == 0
    assert counts.embedding == 128256 * 2048
    untied = parameter_counts(preset_spec("llama-3.1-8b"))
    assert untied.lm_head == untied.embedding == 128256 * 4096


def test_grouped_query_attention_and_biases():
    qwen = preset_spec("qwen2.5-7b")  # 28 query heads, 4 key/value heads of 128, biases on q, k and v
    per_layer_attention = 3584 * 3584 + 3584 + 2 * (3584 * 512 + 512) + 3584 * 3584
    assert parameter_counts(qwen).attention == 28 * per_layer_attention
    gemma = preset_spec("gemma-2-9b")  # q width 16 × 256 = 4096, wider than the hidden size 3584
    assert gemma.q_dim == 4096 and gemma.kv_dim == 2048
    assert layer_parameters(gemma) == 2 * 3584 * 4096 + 2 * 3584 * 2048 + 3 * 3584 * 14336 + 4 * 3584


def test_lora_counts_follow_rank_times_in_plus_out():
    spec = preset_spec("llama-3.1-8b")
    qkvo = TrainingSetup(method="lora", lora_rank=16)
    assert parameter_counts(spec, qkvo).lora == 13_631_488  # 32 × 16 × (8192 + 5120 + 5120 + 8192)
    assert trainable_parameters(spec, qkvo) == 13_631_488
    every = TrainingSetup(method="lora", lora_rank=16, lora_targets="all-linear")
    assert parameter_counts(spec, every).lora == 41_943_040
    assert parameter_counts(spec, TrainingSetup(method="lora", lora_rank=8)).lora == 13_631_488 // 2


def test_full_fine_tuning_trains_everything():
    spec = preset_spec("mistral-7b-v0.3")
    assert trainable_parameters(spec, TrainingSetup()) == parameter_counts(spec).total
