"""Parameter counts of today's models equal the totals their publishers state (configs in presets_today.py).

Totals are the safetensors parameter counts shown on each model's Hugging Face page; "active" counts are
the model cards' one-decimal figures (some count the input embedding, some do not: said per model; some
round, some cut the digits off, so the check allows either)."""

import pytest

from anchorgpu.planner.params import parameter_counts
from anchorgpu.planner.presets import preset_spec

TOTALS = {
    "qwen3-8b": 8_190_735_360,
    "qwen3-32b": 32_762_123_264,
    "qwen3-30b-a3b": 30_532_122_624,
    "gpt-oss-20b": 20_914_757_184,
    "mixtral-8x7b": 46_702_792_704,
    "gemma-3-27b": 27_432_406_640,  # with its SigLIP vision tower (loaded, kept frozen)
    "deepseek-v2-lite": 15_706_484_224,
    "phi-4": 14_659_507_200,
    "llama-3.3-70b": 70_553_706_496,
    "mistral-small-24b": 23_572_403_200,
}


@pytest.mark.parametrize("key", sorted(TOTALS))
def test_total_equals_the_published_count(key):
    assert parameter_counts(preset_spec(key)).total == TOTALS[key]


# (model, published active parameters in billions, whether that figure counts the input embedding)
ACTIVE = [("qwen3-30b-a3b", 3.3, True), ("mixtral-8x7b", 12.9, True), ("gpt-oss-20b", 3.6, False),
          ("deepseek-v2-lite", 2.4, False)]


@pytest.mark.parametrize("key, billions, with_embedding", ACTIVE)
def test_active_parameters_round_to_the_published_figure(key, billions, with_embedding):
    counts = parameter_counts(preset_spec(key))
    active = counts.active - (0 if with_embedding else counts.embedding)
    assert abs(active / 1e9 - billions) < 0.1
    assert counts.active < counts.total
