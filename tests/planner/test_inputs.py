"""Bad input ends in a PlannerInputError that names the field and the problem, never a traceback."""

import json

import pytest

from anchorgpu.planner import (
    PlannerInputError,
    TrainingSetup,
    load_config,
    model_spec_from_config,
    preset,
    preset_spec,
    setup_from_mapping,
)
from anchorgpu.planner.presets import PRESETS

LLAMA = dict(PRESETS["llama-3.1-8b"].config)


def _error(call, *args, **kwargs) -> PlannerInputError:
    with pytest.raises(PlannerInputError) as caught:
        call(*args, **kwargs)
    assert isinstance(caught.value, ValueError)
    return caught.value


def test_reads_a_llama_config():
    spec = model_spec_from_config(LLAMA, name="Llama")
    assert (spec.family, spec.hidden_size, spec.num_layers, spec.num_heads, spec.num_kv_heads) == \
        ("llama", 4096, 32, 32, 8)
    assert spec.head_dim == 128 and spec.attention == "sdpa" and not spec.tie_word_embeddings


def test_gemma2_runs_eager_attention_and_ties_by_default():
    spec = preset_spec("gemma-2-9b")
    assert spec.attention == "eager" and spec.attn_logit_softcapping == 50.0
    assert spec.final_logit_softcapping == 30.0 and spec.tie_word_embeddings and spec.norms_per_layer == 4
    no_cap = model_spec_from_config({**PRESETS["gemma-2-9b"].config, "attn_logit_softcapping": None})
    assert no_cap.attention == "sdpa"


def test_unknown_architecture_lists_the_supported_ones():
    error = _error(model_spec_from_config, {**LLAMA, "model_type": "gpt2"})
    assert error.field == "config.model_type"
    assert "gpt2" in str(error) and "llama" in str(error) and "gemma2" in str(error)
    assert "model_type" in str(_error(model_spec_from_config, {k: v for k, v in LLAMA.items() if k != "model_type"}))


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                                 "intermediate_size", "max_position_embeddings"])
def test_a_missing_field_is_named(key):
    error = _error(model_spec_from_config, {k: v for k, v in LLAMA.items() if k != key})
    assert error.field == f"config.{key}" and key in error.message


def test_gemma_needs_its_head_dim():
    config = {k: v for k, v in PRESETS["gemma-2-9b"].config.items() if k != "head_dim"}
    assert _error(model_spec_from_config, config).field == "config.head_dim"


@pytest.mark.parametrize("value", [0, -4096, "4096", 4096.5, True, None])
def test_sizes_must_be_positive_whole_numbers(value):
    config = {**LLAMA, "hidden_size": value}
    error = _error(model_spec_from_config, config)
    assert error.field == "config.hidden_size"


def test_head_layout_is_checked():
    assert _error(model_spec_from_config, {**LLAMA, "num_attention_heads": 30}).field == \
        "config.num_attention_heads"  # 30 heads do not divide 4096, no head_dim given
    error = _error(model_spec_from_config, {**LLAMA, "num_key_value_heads": 5})
    assert error.field == "config.num_key_value_heads" and "divide" in error.message


def test_a_config_must_be_an_object():
    assert _error(model_spec_from_config, [1, 2]).field == "config"


def test_load_config(tmp_path):
    good = tmp_path / "config.json"
    good.write_text(json.dumps(LLAMA))
    assert load_config(good) == LLAMA
    assert "no file" in str(_error(load_config, tmp_path / "missing.json"))
    assert "folder" in str(_error(load_config, tmp_path))
    bad = tmp_path / "bad.json"
    bad.write_text('{"model_type": "llama",\n "hidden_size": }')
    assert "line 2" in str(_error(load_config, bad))
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    assert "not an object" in str(_error(load_config, listed))
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    assert "UTF-8" in str(_error(load_config, binary))


def test_presets_by_key_or_repository():
    assert preset("Meta-Llama/Llama-3.1-8B").key == "llama-3.1-8b"
    assert preset("gemma-2-9b").source == "https://huggingface.co/google/gemma-2-9b/blob/main/config.json"
    error = _error(preset, "llama-9")
    assert "llama-9" in str(error) and "llama-3.1-8b" in str(error)
    assert _error(preset, "").field == "model"


SPEC = preset_spec("llama-3.1-8b")


@pytest.mark.parametrize("changes, field, words", [
    ({"method": "lora", "lora_targets": ("q_proj", "c_attn")}, "lora_targets", "c_attn"),
    ({"method": "lora", "lora_targets": ()}, "lora_targets", "at least one"),
    ({"method": "lora", "lora_rank": 0}, "lora_rank", "positive"),
    ({"method": "lora", "lora_rank": 5000}, "lora_rank", "larger"),
    ({"method": "lora", "lora_alpha": -1}, "lora_alpha", "positive"),
    ({"method": "lora", "adapter_dtype": "fp8"}, "adapter_dtype", "fp8"),
    ({"method": "qlora", "precision": "fp32"}, "precision", "bf16"),
    ({"seq_len": 200_000}, "seq_len", "131072"),
    ({"seq_len": 0}, "seq_len", "positive"),
    ({"seq_len": -5}, "seq_len", "positive"),
    ({"micro_batch": 0}, "micro_batch", "positive"),
    ({"micro_batch": 1.5}, "micro_batch", "whole"),
    ({"gpus": 0}, "gpus", "positive"),
    ({"gpus": 2}, "gpus", "ddp or fsdp"),
    ({"parallel": "ddp", "gpus": 1}, "gpus", "at least 2"),
    ({"parallel": "fsdp", "gpus": -2}, "gpus", "positive"),
    ({"parallel": "tensor"}, "parallel", "fsdp"),
    ({"optimizer": "lion"}, "optimizer", "adamw8bit"),
    ({"precision": "fp16"}, "precision", "bf16_mixed"),
    ({"method": "dora"}, "method", "qlora"),
    ({"grad_checkpointing": "yes"}, "grad_checkpointing", "true or false"),
    ({"seq_len": True}, "seq_len", "whole"),
])
def test_bad_setups_name_the_field(changes, field, words):
    error = _error(TrainingSetup(**changes).validate, SPEC)
    assert error.field == field
    assert words in error.message


def test_lora_targets_accept_groups_and_text():
    assert TrainingSetup(lora_targets="mlp").lora_targets == ("gate_proj", "up_proj", "down_proj")
    assert TrainingSetup(lora_targets="q_proj, v_proj").lora_targets == ("q_proj", "v_proj")
    assert TrainingSetup(lora_targets=["attention", "q_proj"]).lora_targets == ("q_proj", "k_proj", "v_proj", "o_proj")


def test_setup_from_form_fields():
    setup = setup_from_mapping({"method": "lora", "lora_rank": "32", "grad_checkpointing": "on", "seq_len": "4096",
                                "lora_targets": "all-linear", "lora_alpha": "16"})
    assert setup.lora_rank == 32 and setup.grad_checkpointing and setup.seq_len == 4096
    assert len(setup.lora_targets) == 7 and setup.lora_alpha == 16.0
    setup.validate(SPEC)
    assert _error(setup_from_mapping, {"batch": 4}).field == "batch"
    assert _error(setup_from_mapping, {"seq_len": "long"}).field == "seq_len"
    assert _error(setup_from_mapping, {"grad_checkpointing": "maybe"}).field == "grad_checkpointing"
    assert _error(setup_from_mapping, ["seq_len"]).field == "setup"
