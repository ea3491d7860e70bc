"""Each family's reading of a config, held to the model transformers builds from it (meta device, no weights)."""

import pytest

from anchorgpu.planner.errors import PlannerInputError
from anchorgpu.planner.model_spec import SUPPORTED_FAMILIES, model_spec_from_config
from anchorgpu.planner.params import parameter_counts
from anchorgpu.planner.presets import PRESETS, preset_spec

pytest.importorskip("transformers")

from anchorgpu.planner.model_tree import compare, spec_from_any_config, tree_tensors  # noqa: E402

SMALL = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 512, "pad_token_id": 0}

# Each family with the options that change its tensors switched on.
FAMILY_CONFIGS = {
    "llama": {"attention_bias": True, "mlp_bias": True},
    "granite": {"attention_bias": True},
    "mistral": {"sliding_window": 32, "head_dim": 8},
    "qwen2": {"use_sliding_window": True, "max_window_layers": 2, "sliding_window": 32},
    "qwen2_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                  "shared_expert_intermediate_size": 40, "decoder_sparse_step": 2, "mlp_only_layers": [0]},
    "qwen3": {"head_dim": 16, "attention_bias": True},
    "qwen3_moe": {"head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                  "mlp_only_layers": [1], "decoder_sparse_step": 1},
    "gemma": {"head_dim": 16},
    "gemma2": {"head_dim": 16, "sliding_window": 32},
    "gemma3_text": {"head_dim": 16, "sliding_window": 32, "sliding_window_pattern": 2},
    "phi3": {},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "gpt_oss": {"head_dim": 16, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 32,
                "layer_types": ["sliding_attention", "full_attention"] * 2},
    "deepseek_v2": {"q_lora_rank": None, "kv_lora_rank": 16, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
                    "v_head_dim": 12, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 2,
                    "moe_intermediate_size": 24, "first_k_dense_replace": 1, "num_key_value_heads": 4},
    "deepseek_v3": {"q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
                    "v_head_dim": 12, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
                    "moe_intermediate_size": 24, "first_k_dense_replace": 2, "n_group": 1, "topk_group": 1,
                    "num_key_value_heads": 4, "attention_bias": True},
    "olmo2": {"attention_bias": True},
}


def test_every_named_family_is_covered():
    assert set(FAMILY_CONFIGS) | {"gemma3", "qwen2_5_vl", "qwen2_vl"} == set(SUPPORTED_FAMILIES)


@pytest.mark.parametrize("family", sorted(FAMILY_CONFIGS))
def test_the_reading_equals_the_module_tree(family):
    config = {**SMALL, "model_type": family, **FAMILY_CONFIGS[family]}
    spec = model_spec_from_config(config)
    result = compare(spec, tree_tensors(config))
    assert result.agrees, result
    assert spec.num_layers == len(spec.layers) == 4


@pytest.mark.parametrize("key", [k for k in PRESETS if PRESETS[k].config.get("model_type") != "gemma3"])
def test_every_preset_equals_its_module_tree(key):
    result = compare(preset_spec(key), tree_tensors(PRESETS[key].config))
    assert result.agrees, result


def test_layer_kinds_follow_the_config():
    gemma = preset_spec("gemma-3-27b")
    windows = [layer.attention.sliding_window for layer in gemma.layers]
    assert windows[:6] == [1024] * 5 + [None] and windows.count(None) == 10  # every sixth of 62 layers is global
    deepseek = preset_spec("deepseek-v2-lite")
    assert [layer.mlp.kind for layer in deepseek.layers[:2]] == ["dense", "moe"]
    assert deepseek.layers[1].attention.kind == "mla" and deepseek.is_moe
    oss = preset_spec("gpt-oss-20b")
    assert [layer.attention.sliding_window for layer in oss.layers[:2]] == [128, None]
    assert len(oss.layer_kinds()) == 2 and oss.layer_kinds()[0][1] == 12


def test_a_multimodal_config_is_planned_for_its_text_tower_with_its_vision_weights_counted():
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = dict(PRESETS["gemma-3-27b"].config)
    spec = preset_spec("gemma-3-27b")
    built = AutoConfig.for_model(config.pop("model_type"), **config)
    with torch.device("meta"):
        whole = AutoModelForCausalLM.from_config(built)
    assert parameter_counts(spec).total == sum(p.numel() for p in whole.parameters())
    assert spec.extra_frozen_parameters > 0 and any("text tower" in note for note in spec.notes)


def test_another_family_is_read_when_its_tree_agrees_and_refused_with_the_reason_otherwise():
    olmo3 = spec_from_any_config({**SMALL, "model_type": "olmo3"})
    assert olmo3.family == "olmo3" and "olmo2 layout" in olmo3.notes[-1]
    assert compare(olmo3, tree_tensors({**SMALL, "model_type": "olmo3"})).agrees
    with pytest.raises(PlannerInputError) as refused:
        spec_from_any_config({**SMALL, "model_type": "gpt2"})
    assert "cannot be planned" in refused.value.message and "c_attn" in refused.value.params["unknown"]


def test_a_config_transformers_cannot_build_is_refused():
    with pytest.raises(PlannerInputError) as refused:
        spec_from_any_config({**SMALL, "model_type": "no_such_model"})
    assert refused.value.field == "config.model_type" and "transformers cannot build" in refused.value.message


def test_a_named_family_config_transformers_refuses_is_refused_too():
    with pytest.raises(PlannerInputError) as refused:
        spec_from_any_config({**SMALL, "model_type": "llama", "hidden_act": "no_such_activation"})
    assert refused.value.field == "config" and "transformers cannot build" in refused.value.message
    assert "no_such_activation" in refused.value.params["reason"]
