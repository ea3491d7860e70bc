"""`anchorgpu plan`'s flags for what else decides the peak: each reaches the setup as given, a flag left out
keeps the setup's default, and bad input is a message and exit code 2."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest

from anchorgpu.planner.command import GIVEN_ONLY, build_parser, run
from anchorgpu.planner.recommend import Offer
from anchorgpu.planner.setup import TrainingSetup

OFFERS = [Offer.from_gb("h100-sxm-80gb", "H100 SXM 80 GB", 80, 1, (1, 2, 4, 8))]
BASE = ["--preset", "llama-3.2-1b"]


def plan(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out=out, err=err, offers=OFFERS)
    return code, out.getvalue(), err.getvalue()


def setup_of(*argv) -> TrainingSetup:
    from anchorgpu.planner.command import _setup

    return _setup(build_parser().parse_args([*BASE, *argv]))


def test_every_flag_is_a_field_of_the_setup():
    fields = {f.name for f in dataclasses.fields(TrainingSetup)}
    assert set(GIVEN_ONLY) <= fields, sorted(set(GIVEN_ONLY) - fields)
    flags = {a.dest for a in build_parser()._actions}
    assert set(GIVEN_ONLY) <= flags


def test_a_flag_left_out_keeps_the_setups_default():
    default = TrainingSetup()
    given = setup_of()
    for name in GIVEN_ONLY:
        assert getattr(given, name) == getattr(default, name), name


@pytest.mark.parametrize("argv, field, value", [
    (["--grad-accumulation", "8"], "grad_accumulation", 8),
    (["--attention", "eager"], "attention", "eager"),
    (["--attention", "flash_attention_2"], "attention", "flash_attention_2"),
    (["--packed"], "packed", True),
    (["--cross-entropy", "fused_linear"], "cross_entropy", "fused_linear"),
    (["--activation-offload"], "activation_offload", True),
    (["--offload", "optimizer"], "offload", "optimizer"),
    (["--parallel", "fsdp", "--gpus", "4", "--offload", "optimizer_and_params"], "offload", "optimizer_and_params"),
    (["--method", "lora", "--lora-dropout", "0.05"], "lora_dropout", 0.05),
    (["--method", "lora", "--adapter-dtype", "bf16"], "adapter_dtype", "bf16"),
    (["--method", "qlora", "--quantize-lm-head"], "quantize_lm_head", True),
    (["--method", "qlora", "--no-double-quant"], "double_quant", False),
    (["--method", "qlora", "--prepare-kbit-training"], "prepare_kbit_training", True),
    (["--parallel", "zero3", "--gpus", "4"], "parallel", "zero3"),
    (["--optimizer", "paged_adamw8bit"], "optimizer", "paged_adamw8bit"),
])
def test_each_flag_reaches_the_setup(argv, field, value):
    setup = setup_of(*argv)
    assert getattr(setup, field) == value
    assert getattr(TrainingSetup(), field) != value  # the flag changed something
    code, out, err = plan(*BASE, *argv, "--json")
    assert code == 0, err  # and the planner answers with it
    assert json.loads(out)["peak_bytes_per_device"] > 0


def test_lora_on_the_output_head_and_the_embeddings():
    setup = setup_of("--method", "lora", "--lora-targets", "attention,lm_head,embed_tokens")
    assert {"q_proj", "lm_head", "embed_tokens"} <= set(setup.lora_targets)
    code, out, err = plan(*BASE, "--method", "lora", "--lora-targets", "q_proj,lm_head,embed_tokens", "--json")
    assert code == 0, err
    attention_only = json.loads(plan(*BASE, "--method", "lora", "--lora-targets", "q_proj", "--json")[1])
    assert json.loads(out)["peak_bytes_per_device"] > attention_only["peak_bytes_per_device"]


def test_lora_on_the_experts_of_a_mixture_of_experts():
    moe = ["--preset", "qwen3-30b-a3b", "--method", "lora"]
    code, out, err = plan(*moe, "--lora-targets", "attention,experts", "--json")
    assert code == 0, err
    attention_only = json.loads(plan(*moe, "--lora-targets", "attention", "--json")[1])
    data = json.loads(out)
    assert data["breakdown"]["optimizer"] > attention_only["breakdown"]["optimizer"]  # the experts' adapters


def _config_file(tmp_path, text: str) -> str:
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("argv, text", [
    (BASE + ["--grad-accumulation", "0"], "grad_accumulation"),
    (BASE + ["--grad-accumulation", "-3"], "grad_accumulation"),
    (BASE + ["--method", "lora", "--lora-targets", "experts"], "experts"),
    (BASE + ["--method", "lora", "--lora-dropout", "1.5"], "lora_dropout"),
    (BASE + ["--lora-dropout", "0.1"], "leave it at 0"),
    (BASE + ["--method", "lora", "--quantize-lm-head"], "qlora"),
    (BASE + ["--method", "lora", "--no-double-quant"], "qlora"),
    (BASE + ["--method", "qlora", "--precision", "bf16", "--prepare-kbit-training"], "bf16_mixed"),
])
def test_bad_settings_are_a_message_and_exit_code_2(argv, text):
    code, out, err = plan(*argv)
    assert code == 2 and out == "" and text in err and "Traceback" not in err


@pytest.mark.parametrize("argv, text", [
    (["--attention", "flash_attention_9"], "flash_attention_9"),
    (["--cross-entropy", "magic"], "magic"),
    (["--offload", "disk"], "disk"),
    (["--grad-accumulation", "two"], "two"),
])
def test_a_value_the_flag_does_not_take_is_refused_by_the_parser_with_exit_code_2(capsys, argv, text):
    with pytest.raises(SystemExit) as stop:
        run([*BASE, *argv], offers=OFFERS)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and text in err and "invalid" in err


@pytest.mark.parametrize("config, text", [
    ("{not json", "not valid JSON"),
    ('["a", "list"]', "not an object"),
    ('{"model_type": "bert", "hidden_size": 768}', "bert"),
    ('{"model_type": "llama", "num_attention_heads": 32}', "hidden_size"),
])
def test_a_config_the_planner_cannot_build_is_a_message_and_exit_code_2(tmp_path, config, text):
    code, out, err = plan("--config", _config_file(tmp_path, config))
    assert code == 2 and out == "" and text in err and "Traceback" not in err


@pytest.mark.parametrize("change, text", [
    ({"hidden_act": "no_such_activation"}, "no_such_activation"),
    ({"rope_scaling": {"rope_type": "no_such_rope", "factor": 2.0}}, "no_such_rope"),
    ({"layer_types": ["no_such_layer", "full_attention"]}, "layer_types"),
])
def test_a_config_transformers_cannot_build_is_a_message_and_exit_code_2(tmp_path, change, text):
    """The planner reads these configs, but transformers refuses them when the simulation builds the model."""
    pytest.importorskip("transformers")
    from anchorgpu.planner.presets import preset

    config = {**preset("tiny-llama").config, **change}
    code, out, err = plan("--config", _config_file(tmp_path, json.dumps(config)), "--method", "lora",
                          "--seq-len", "64", "--engine", "simulate")
    assert code == 2 and out == "" and "Traceback" not in err
    assert "transformers cannot build a model from this config" in err and text in err


@pytest.mark.parametrize("parallel", ["zero2", "zero3", "fsdp"])
def test_the_options_on_several_cards_keep_the_sharding_asked_for(parallel):
    code, out, err = plan(*BASE, "--parallel", parallel, "--gpus", "2", "--json")
    assert code == 0, err
    rows = json.loads(out)["recommendations"]
    assert {r["parallel"] for r in rows if r["cards"] > 1} == {parallel}
    assert {r["parallel"] for r in rows if r["cards"] == 1} == {"single" if parallel == "fsdp" else parallel}


def test_fsdp_parameter_offload_still_plans_the_one_card_options():
    code, out, err = plan(*BASE, "--parallel", "fsdp", "--gpus", "2", "--offload", "optimizer_and_params", "--json")
    assert code == 0, err
    assert any(r["cards"] == 1 for r in json.loads(out)["recommendations"])
