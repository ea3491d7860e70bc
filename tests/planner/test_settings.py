"""The settings that decide real peaks: each moves the estimate the way the libraries behave, and bad input
is a sentence naming the field."""

import pytest

from anchorgpu.planner import PlannerInputError, TrainingSetup, estimate, parameter_counts, preset_spec
from anchorgpu.planner.activations import activation_profile
from anchorgpu.planner.settings_memory import REDUCE_BUCKET_ELEMENTS, fused_ce_chunk, nf4_bytes_per_param

LLAMA_1B = preset_spec("llama-3.2-1b")
P_1B = parameter_counts(LLAMA_1B).total


def phase(result, name):
    return dict(result.phases)[name]


def part(result, what):
    return sum(b for _c, w, b in result.parts if w == what)


def test_defaults_change_nothing():
    plain = TrainingSetup(method="lora", seq_len=1024)
    explicit = plain.replace(grad_accumulation=1, attention="auto", packed=False, cross_entropy="standard",
                             activation_offload=False, offload="none", lora_dropout=0.0, double_quant=True)
    assert estimate(LLAMA_1B, explicit).phases == estimate(LLAMA_1B, plain).phases


def test_accumulation_adds_exactly_the_gradients_to_the_forward():
    one = estimate(LLAMA_1B, TrainingSetup(seq_len=1024))
    four = estimate(LLAMA_1B, TrainingSetup(seq_len=1024, grad_accumulation=4))
    grads = 4 * P_1B  # full fine-tuning, bf16 mixed: fp32 gradients
    assert phase(four, "forward, at the loss") - phase(one, "forward, at the loss") == pytest.approx(grads, abs=2)
    assert phase(four, "optimizer step") == phase(one, "optimizer step")


def test_fsdp_accumulation_keeps_unsharded_gradients():
    setup = TrainingSetup(seq_len=1024, parallel="fsdp", gpus=4)
    one = estimate(LLAMA_1B, setup)
    four = estimate(LLAMA_1B, setup.replace(grad_accumulation=4))
    # no_sync: every gradient unsharded, in the fp32 reduce dtype, far more than the sharded quarter.
    assert phase(four, "forward, at the loss") - phase(one, "forward, at the loss") == pytest.approx(4 * P_1B, abs=2)


def test_fused_linear_cross_entropy_drops_the_vocab_wide_terms():
    setup = TrainingSetup(method="lora", seq_len=2048)
    standard = activation_profile(LLAMA_1B, setup)
    fused = activation_profile(LLAMA_1B, setup.replace(cross_entropy="fused_linear"))
    for name in ("logits", "logits_fp32", "log_probs", "loss_grads"):
        assert name in standard.terms and name not in fused.terms
    assert fused.terms["fused_ce_grad_input"] == LLAMA_1B.hidden_size * 2
    result = estimate(LLAMA_1B, setup.replace(cross_entropy="fused_linear"))
    # Liger's block: next power of 2 of ceil(2048 / ceil(128256 / 2048)) = ceil(2048 / 63) = 33 -> 64 rows.
    assert fused_ce_chunk(2048, 2048, 128256) == 64
    assert phase(result, "forward, at the loss") < phase(estimate(LLAMA_1B, setup), "forward, at the loss")


def test_chunked_cross_entropy_upcasts_one_chunk_at_a_time():
    setup = TrainingSetup(method="lora", seq_len=2048)
    standard = activation_profile(LLAMA_1B, setup)
    chunked = activation_profile(LLAMA_1B, setup.replace(cross_entropy="chunked"))
    assert chunked.terms["logits_fp32_chunk"] == standard.terms["logits_fp32"] / 8
    assert chunked.terms["log_probs"] == standard.terms["log_probs"]  # every chunk's log-probs are still kept


def test_eager_attention_grows_with_the_square_of_the_sequence():
    setup = TrainingSetup(method="lora")
    sdpa, eager = (activation_profile(LLAMA_1B, setup.replace(attention=a)) for a in ("sdpa", "eager"))
    assert "eager_probs_fp32" in eager.terms and "eager_probs_fp32" not in sdpa.terms
    assert eager.terms["eager_mask"] == setup.seq_len * 2
    flash = activation_profile(LLAMA_1B, setup.replace(attention="flash_attention_2"))
    assert flash.layer == sdpa.layer  # q, k, v, out and the fp32 log-sum-exp either way


def test_packed_sdpa_builds_a_mask_and_flash_does_not():
    setup = TrainingSetup(method="lora", packed=True)
    assert activation_profile(LLAMA_1B, setup.replace(attention="sdpa")).terms["packed_mask"] == setup.seq_len
    assert "packed_mask" not in activation_profile(LLAMA_1B, setup.replace(attention="flash_attention_2")).terms


def test_activation_offload_keeps_two_layers_on_the_device():
    setup = TrainingSetup(method="lora", seq_len=2048)
    kept = part(estimate(LLAMA_1B, setup.replace(activation_offload=True)),
                "stored per layer (in flight; the rest offloaded)")
    assert kept == pytest.approx(2 * activation_profile(LLAMA_1B, setup).layer * 2048, abs=2)


def test_offloading_the_optimizer_removes_its_state_from_the_device():
    result = estimate(LLAMA_1B, TrainingSetup(seq_len=256, offload="optimizer"))
    assert result.optimizer == 0
    assert phase(result, "optimizer step") == pytest.approx(8 * P_1B, abs=2)  # fp32 weights and gradients


def test_fsdp_cpu_offload_leaves_only_gathered_layers():
    setup = TrainingSetup(seq_len=256, parallel="fsdp", gpus=4)
    offloaded = estimate(LLAMA_1B, setup.replace(offload="optimizer_and_params"))
    assert part(offloaded, "parameters") == 0 and offloaded.optimizer == 0
    assert offloaded.live < estimate(LLAMA_1B, setup).live


def test_zero2_partitions_masters_and_state_and_adds_a_bucket():
    result = estimate(LLAMA_1B, TrainingSetup(seq_len=256, parallel="zero2", gpus=4))
    step = dict(((c, w), b) for c, w, b in result.parts) if result.phase == "optimizer step" else None
    assert result.optimizer == pytest.approx(8 * P_1B / 4, abs=2)
    backward = phase(result, "backward, end")
    # bf16 module, fp32 masters / 4, Adam / 4, bf16 gradient partition / 4, one reduce bucket of 5e8 bf16.
    expected = 2 * P_1B + 4 * P_1B / 4 + 8 * P_1B / 4 + 2 * P_1B / 4 + REDUCE_BUCKET_ELEMENTS * 2
    expected += LLAMA_1B.vocab_size * LLAMA_1B.hidden_size * 4  # the tied embedding's lookup grad, at the end
    assert backward == pytest.approx(expected, abs=4)
    assert step is None or step[("temporaries", "ZeRO: fp32 copy of the gradient partition")] > 0


def test_zero3_shards_the_parameters_too():
    zero2 = estimate(LLAMA_1B, TrainingSetup(seq_len=256, parallel="zero2", gpus=4))
    zero3 = estimate(LLAMA_1B, TrainingSetup(seq_len=256, parallel="zero3", gpus=4))
    assert part(zero3, "parameters") == pytest.approx(2 * P_1B / 4, abs=2)
    assert zero3.live < zero2.live


def test_paged_optimizer_is_named_as_unified_memory():
    result = estimate(LLAMA_1B, TrainingSetup(seq_len=16, optimizer="paged_adamw8bit"))
    plain = estimate(LLAMA_1B, TrainingSetup(seq_len=16, optimizer="adamw8bit"))
    paged = part(result, "paged state (CUDA unified memory)")
    assert paged + part(result, "state") == pytest.approx(part(plain, "state"), abs=2)
    assert paged > 2 * P_1B * 0.99  # all but the norms' small tensors
    assert any("unified memory" in note for note in result.notes)


def test_lora_dropout_keeps_a_mask_and_a_dropped_copy_per_target():
    setup = TrainingSetup(method="lora", precision="bf16", adapter_dtype="bf16")  # no cast copy without dropout
    plain = activation_profile(LLAMA_1B, setup)
    dropped = activation_profile(LLAMA_1B, setup.replace(lora_dropout=0.05))
    inputs = sum(LLAMA_1B.linear(t).in_features for t in setup.lora_targets)
    assert "lora_input" not in plain.terms
    assert dropped.terms["lora_dropout_mask"] == inputs  # one byte per element (bool)
    assert dropped.terms["lora_input"] == inputs * 2


def test_lora_on_the_head_keeps_its_input_and_middle():
    setup = TrainingSetup(method="lora", lora_targets=("q_proj", "lm_head"))
    profile = activation_profile(LLAMA_1B, setup)
    assert profile.terms["lora_head_mid"] == setup.lora_rank * 2
    assert "lora_embedding_mid" in activation_profile(LLAMA_1B, setup.replace(
        lora_targets=("q_proj", "embed_tokens"))).terms


def test_double_quantisation_and_a_4bit_head():
    assert nf4_bytes_per_param(TrainingSetup(double_quant=False)) == 0.5 + 4 / 64
    base = TrainingSetup(method="qlora", seq_len=512)
    single = estimate(LLAMA_1B, base.replace(double_quant=False))
    double = estimate(LLAMA_1B, base)
    counts = parameter_counts(LLAMA_1B)
    linear = counts.attention + counts.mlp
    gap = part(single, "parameters") - part(double, "parameters")
    assert gap == pytest.approx(linear * (4 / 64 - 1 / 64 - 4 / (64 * 256)), rel=1e-3)
    untied = preset_spec("llama-3.1-8b")
    head = estimate(untied, base.replace(quantize_lm_head=True))
    assert "forward, the head's matmul" in dict(head.phases)
    assert part(head, "parameters") < part(estimate(untied, base), "parameters")


@pytest.mark.parametrize("changes, field, words", [
    ({"grad_accumulation": 0}, "grad_accumulation", "at least 1 micro-batch"),
    ({"grad_accumulation": 2.5}, "grad_accumulation", "whole number"),
    ({"attention": "flash_attention_9"}, "attention", "flash_attention_9"),
    ({"attention": "flash_attention_2", "precision": "fp32"}, "attention", "bf16 or fp16"),
    ({"cross_entropy": "magic"}, "cross_entropy", "magic"),
    ({"offload": "disk"}, "offload", "disk"),
    ({"offload": "optimizer_and_params"}, "offload", "sharded"),
    ({"offload": "optimizer", "parallel": "fsdp", "gpus": 2}, "offload", "optimizer_and_params"),
    ({"offload": "optimizer", "optimizer": "paged_adamw8bit"}, "optimizer", "CPU"),
    ({"lora_dropout": 0.1}, "lora_dropout", "leave it at 0"),
    ({"method": "lora", "lora_dropout": 1.0}, "lora_dropout", "probability"),
    ({"method": "lora", "lora_targets": ("experts",)}, "lora_targets", "dense model"),
    ({"quantize_lm_head": True}, "quantize_lm_head", "QLoRA"),
    ({"method": "lora", "double_quant": False}, "double_quant", "QLoRA"),
    ({"packed": "maybe"}, "packed", "true or false"),
])
def test_bad_settings_name_the_field(changes, field, words):
    with pytest.raises(PlannerInputError) as caught:
        TrainingSetup(**changes).validate(LLAMA_1B)
    assert caught.value.field == field and words in caught.value.message


def test_sdpa_cannot_soft_cap():
    gemma2 = preset_spec("gemma-2-9b")
    with pytest.raises(PlannerInputError, match="soft-caps"):
        TrainingSetup(method="lora", attention="sdpa").validate(gemma2)
    TrainingSetup(method="lora", attention="flash_attention_2").validate(gemma2)


def test_zero_runs_on_one_gpu():
    TrainingSetup(parallel="zero2", gpus=1, offload="optimizer").validate(LLAMA_1B)


def test_small_adapters_are_not_paged():
    """bitsandbytes pages only tensors of 1e5 elements or more: rank-16 adapters on a 2048-wide model are not."""
    result = estimate(LLAMA_1B, TrainingSetup(method="lora", seq_len=16, optimizer="paged_adamw"))
    assert part(result, "paged state (CUDA unified memory)") == 0 and part(result, "state") > 0


def test_kbit_preparation_costs_fp32_ends_and_fp32_mlp_outputs():
    """peft's prepare_model_for_kbit_training: embeddings, head and norms in fp32, so the residual stream and the
    MLP's outputs are fp32, and autocast keeps a bf16 copy of the head for its backward."""
    spec = preset_spec("llama-3.1-8b")
    base = TrainingSetup(method="qlora", seq_len=2048, grad_checkpointing=True)
    plain, prepared = estimate(spec, base), estimate(spec, base.replace(prepare_kbit_training=True))
    counts = parameter_counts(spec)
    not_quantised = counts.embedding + counts.lm_head + counts.norms
    assert part(prepared, "parameters") - part(plain, "parameters") == pytest.approx(2 * not_quantised, abs=4)
    fwd = "forward, at the loss"
    assert dict(prepared.phases)[fwd] - dict(plain.phases)[fwd] > 2 * not_quantised + spec.vocab_size * spec.hidden_size
    profile = activation_profile(spec, base.replace(prepare_kbit_training=True))
    assert profile.terms["kbit_mlp_fp32"] == 3 * spec.intermediate_size * 2
    assert profile.checkpoint == 2 * activation_profile(spec, base).checkpoint  # fp32 layer inputs
