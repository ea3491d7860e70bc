"""The analytic breakdown: exact where it is arithmetic, and in the right direction everywhere else."""

import pytest

from anchorgpu.planner import Reserve, TrainingSetup, estimate, parameter_counts, preset_spec, trainable_parameters
from anchorgpu.planner.activations import ACTIVATION_COEFFICIENTS, activation_profile
from anchorgpu.planner.analytic import COMPONENTS, NF4_BYTES_PER_PARAM, NO_RESERVE, GiB

LLAMA_1B = preset_spec("llama-3.2-1b")
LLAMA_8B = preset_spec("llama-3.1-8b")
P_1B = parameter_counts(LLAMA_1B).total


def _at_step(spec, setup, **kw):
    """The breakdown with the optimizer step's moment forced: sequences too short for activations to matter."""
    result = estimate(spec, setup.replace(seq_len=16), **kw)
    assert result.phase == "optimizer step", result.phases
    return result


def test_peak_is_the_sum_and_the_largest_moment():
    result = estimate(LLAMA_8B, TrainingSetup(method="lora", seq_len=4096))
    assert result.peak == sum(result.components().values())
    assert set(result.components()) == set(COMPONENTS)
    assert result.live == max(live for _name, live in result.phases)
    assert dict(result.phases)[result.phase] == result.live
    assert sum(b for _c, _w, b in result.parts) == result.peak


def test_full_fine_tuning_bytes_per_parameter():
    mixed = _at_step(LLAMA_1B, TrainingSetup(precision="bf16_mixed"), reserve=NO_RESERVE)
    assert (mixed.weights, mixed.gradients, mixed.optimizer, mixed.temporaries) == (4 * P_1B, 4 * P_1B, 8 * P_1B,
                                                                                     4 * P_1B)
    pure = _at_step(LLAMA_1B, TrainingSetup(precision="bf16"), reserve=NO_RESERVE)
    assert (pure.weights, pure.gradients, pure.optimizer) == (2 * P_1B, 2 * P_1B, 4 * P_1B)
    fp32 = _at_step(LLAMA_1B, TrainingSetup(precision="fp32"), reserve=NO_RESERVE)
    assert fp32.weights == mixed.weights and fp32.optimizer == mixed.optimizer


def test_bf16_mixed_keeps_fp32_masters_and_bf16_copies():
    setup = TrainingSetup(precision="bf16_mixed", optimizer="sgd", seq_len=4096)  # peaks in the backward
    mixed = estimate(LLAMA_1B, setup, reserve=NO_RESERVE)
    assert mixed.phase.startswith("backward")
    parts = {(c, w): b for c, w, b in mixed.parts}
    assert parts[("weights", "parameters")] == 4 * P_1B
    assert parts[("weights", "bf16 autocast copies")] == 2 * P_1B
    pure = estimate(LLAMA_1B, setup.replace(precision="bf16"), reserve=NO_RESERVE)
    assert pure.weights == 2 * P_1B
    assert mixed.peak > pure.peak


@pytest.mark.parametrize("optimizer, per_param", [("adamw", 8), ("sgd_momentum", 4), ("sgd", 0)])
def test_optimizer_state(optimizer, per_param):
    result = estimate(LLAMA_1B, TrainingSetup(optimizer=optimizer, seq_len=256))
    assert result.optimizer == per_param * P_1B


def test_cheaper_optimizers_keep_less():
    by = {name: estimate(LLAMA_1B, TrainingSetup(optimizer=name, seq_len=256)).optimizer
          for name in ("adamw", "adamw8bit", "adafactor")}
    assert by["adamw8bit"] < by["adamw"] / 3.5  # two bytes and block constants instead of eight
    assert by["adamw8bit"] > 2 * P_1B
    assert by["adafactor"] < by["adamw"] / 100  # one row and one column per matrix


def test_fsdp_divides_the_model_state():
    full = TrainingSetup(seq_len=256)
    single = _at_step(LLAMA_8B, full)
    sharded = {n: estimate(LLAMA_8B, full.replace(parallel="fsdp", gpus=n)) for n in (2, 4, 8)}
    for n, result in sharded.items():
        assert result.optimizer == pytest.approx(single.optimizer / n, abs=1)
    assert sharded[8].peak < sharded[4].peak < sharded[2].peak < single.peak
    assert sharded[8].peak < single.peak / 4


def test_ddp_replicates_and_adds_gradient_buckets():
    setup = TrainingSetup(seq_len=256)
    single = _at_step(LLAMA_1B, setup)
    ddp = _at_step(LLAMA_1B, setup.replace(parallel="ddp", gpus=4))
    assert (ddp.weights, ddp.optimizer) == (single.weights, single.optimizer)
    buckets = dict(((c, w), b) for c, w, b in ddp.parts)[("gradients", "DDP gradient buckets")]
    assert buckets == dict(((c, w), b) for c, w, b in single.parts)[("gradients", "all")]
    assert ddp.gradients == single.gradients + buckets  # allocated tensors, not a reserve
    assert dict(ddp.measures("h100").parts)["NCCL buffers (allowance)"] > 0
    assert dict(ddp.measures("mi300x").parts)["RCCL buffers (allowance)"] > 0
    assert "NCCL buffers (allowance)" not in dict(single.measures("h100").parts)


def test_lora_shrinks_gradients_and_optimizer():
    full = estimate(LLAMA_8B, TrainingSetup(seq_len=1024))
    lora = estimate(LLAMA_8B, TrainingSetup(method="lora", seq_len=1024))
    trainable = trainable_parameters(LLAMA_8B, TrainingSetup(method="lora"))
    assert lora.optimizer == 8 * trainable  # fp32 adapters, two AdamW moments
    assert dict(lora.phases)["optimizer step"] < dict(full.phases)["optimizer step"] / 3
    assert lora.gradients <= 4 * trainable + 4 * LLAMA_8B.hidden_size
    assert lora.peak < full.peak / 3


def test_qlora_stores_the_base_in_four_bits():
    lora = estimate(LLAMA_8B, TrainingSetup(method="lora", seq_len=512))
    qlora = estimate(LLAMA_8B, TrainingSetup(method="qlora", seq_len=512))
    counts = parameter_counts(LLAMA_8B)
    linear = counts.attention + counts.mlp
    assert lora.weights - qlora.weights == pytest.approx(linear * (2 - NF4_BYTES_PER_PARAM), rel=1e-3)
    assert 4.12 < NF4_BYTES_PER_PARAM * 8 < 4.13


def test_checkpointing_shrinks_activations():
    for setup in (TrainingSetup(method="lora", seq_len=4096), TrainingSetup(seq_len=8192, parallel="fsdp", gpus=8)):
        plain = estimate(LLAMA_8B, setup)
        checkpointed = estimate(LLAMA_8B, setup.replace(grad_checkpointing=True))
        assert checkpointed.activations < plain.activations / 5
        assert checkpointed.peak < plain.peak


def test_activations_scale_with_tokens_and_with_seq_squared_only_for_eager_attention():
    llama = [activation_profile(LLAMA_8B, TrainingSetup(method="lora", seq_len=s)).layer for s in (1024, 4096)]
    assert llama[0] == llama[1]  # per token: SDPA keeps no attention matrix
    gemma = preset_spec("gemma-2-9b")
    eager = [activation_profile(gemma, TrainingSetup(method="lora", seq_len=s)).layer for s in (1024, 4096)]
    assert eager[1] > 2 * eager[0]  # per token it grows with the sequence: in total with its square
    one = estimate(LLAMA_8B, TrainingSetup(method="lora", seq_len=2048, micro_batch=1), reserve=NO_RESERVE)
    four = estimate(LLAMA_8B, TrainingSetup(method="lora", seq_len=2048, micro_batch=4), reserve=NO_RESERVE)
    assert four.activations == pytest.approx(4 * one.activations, rel=1e-6)


def test_logits_for_the_loss_are_a_big_term():
    result = estimate(LLAMA_8B, TrainingSetup(method="lora", seq_len=8192, grad_checkpointing=True))
    parts = {(c, w): b for c, w, b in result.parts}
    assert result.phase == "backward, at the loss"
    assert parts[("activations", "log-probabilities kept by the loss")] == 4 * 128256 * 8192
    assert parts[("temporaries", "gradients of the logits")] == 8 * 128256 * 8192


def test_reserve_is_modelled_and_its_allowances_are_named():
    setup = TrainingSetup(method="lora", seq_len=1024)
    base = estimate(LLAMA_1B, setup, reserve=NO_RESERVE)
    assert base.reserve == 0 and base.peak == base.live == base.allocated_peak_bytes == base.device_used_bytes
    context_only = estimate(LLAMA_1B, setup, reserve=Reserve(allocator=False, workspaces=False, cuda_context=GiB))
    assert context_only.reserve == GiB and context_only.live == base.live
    result = estimate(LLAMA_1B, setup)
    assert result.live == base.live
    assert result.live <= result.allocated_peak_bytes <= result.reserved_peak_bytes < result.device_used_bytes
    assert result.peak == result.device_used_bytes  # the peak is the figure nvidia-smi would show
    assert sum(b for c, _w, b in result.parts if c == "reserve") == result.reserve
    assert {"CUDA context (allowance)", "ROCm context (allowance)"} & {w for _c, w, _b in result.parts}
    assert not any("fragmentation (" in w for _c, w, _b in result.parts)  # no flat percentage
    assert any("device_used_bytes" in note and "allowance" in note for note in result.notes)
    assert any("held to the simulation" in note for note in result.notes)


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen2", "tiny-gemma2", "mistral-7b-v0.3", "qwen2.5-72b"])
@pytest.mark.parametrize("setup", [
    TrainingSetup(seq_len=256),
    TrainingSetup(seq_len=256, precision="fp32", optimizer="adafactor", grad_checkpointing=True),
    TrainingSetup(seq_len=256, method="lora", lora_targets="all-linear", adapter_dtype="bf16", parallel="ddp", gpus=2),
    TrainingSetup(seq_len=256, method="qlora", precision="bf16", optimizer="adamw8bit", parallel="fsdp", gpus=4),
])
def test_every_family_and_setup_gives_a_positive_breakdown(name, setup):
    result = estimate(preset_spec(name), setup)
    assert all(value >= 0 for value in result.components().values())
    assert result.weights > 0 and result.reserve > 0 and result.peak > result.weights


def test_the_coefficient_table_is_well_formed():
    from anchorgpu.planner.activations import _layer_widths

    spec = preset_spec("tiny-deepseek-v2")  # a layer kind with every width: latent attention and experts
    widths = set(_layer_widths(spec, TrainingSetup(), spec.layers[-1])) | {"lora_in"}
    scopes = {"layer", "norm", "lora", "model", "checkpoint", "loss", "loss_forward", "loss_backward",
              "backward_mlp", "backward_attention"}
    for name, term in ACTIVATION_COEFFICIENTS.items():
        assert term.width in widths and term.scope in scopes, name
        assert term.dtype in {"compute", "fp32", "bool", "residual", "norm", "lora"}, name
        assert term.count > 0 and term.note, name


def test_a_single_layer_model_counts_its_layer_once():
    from anchorgpu.planner import model_spec_from_config
    from anchorgpu.planner.params import layer_parameters
    from anchorgpu.planner.presets import PRESETS

    one = model_spec_from_config({**PRESETS["tiny-llama"].config, "num_hidden_layers": 1})
    assert layer_parameters(one) == parameter_counts(one).attention + parameter_counts(one).mlp + 2 * 64
    sharded = estimate(one, TrainingSetup(seq_len=64, parallel="fsdp", gpus=2), reserve=NO_RESERVE)
    assert sharded.peak > 0


def test_a_sliding_window_beyond_the_sequence_adds_a_mask():
    from anchorgpu.planner import model_spec_from_config
    from anchorgpu.planner.presets import PRESETS

    windowed = model_spec_from_config({**PRESETS["mistral-7b-v0.3"].config, "sliding_window": 4096})
    short = activation_profile(windowed, TrainingSetup(seq_len=4096)).terms
    long = activation_profile(windowed, TrainingSetup(seq_len=8192)).terms
    assert "sliding_mask" not in short and long["sliding_mask"] == 8192  # one byte per key, per token


def test_the_estimate_validates_its_input():
    from anchorgpu.planner import PlannerInputError

    with pytest.raises(PlannerInputError) as caught:
        estimate(LLAMA_1B, TrainingSetup(seq_len=10**6))
    assert caught.value.field == "seq_len"
