"""DeepSpeed ZeRO outside the step (loading, saving, evaluation) and at its optimizer step.

Every expected figure is worked out here from Llama-3.2-1B's parameter count, its config's sizes and the
dtypes DeepSpeed uses (bf16 module, fp32 masters and Adam moments partitioned over the ranks), not by
calling the planner's own formulas. Full fine-tuning, bf16 mixed precision, AdamW, 4 GPUs.
"""

import pytest

from anchorgpu.planner import TrainingSetup, estimate, parameter_counts, preset_spec

LLAMA_1B = preset_spec("llama-3.2-1b")
P = parameter_counts(LLAMA_1B).total
GPUS = 4
SEQ = 256
H, V, L, MLP = LLAMA_1B.hidden_size, LLAMA_1B.vocab_size, LLAMA_1B.num_layers, LLAMA_1B.intermediate_size
KV = LLAMA_1B.num_kv_heads * LLAMA_1B.head_dim
# One decoder layer: q and o projections (H x H), k and v (H x KV), gate, up and down (H x MLP), two RMSNorms.
LAYER = 2 * H * H + 2 * H * KV + 3 * H * MLP + 2 * H
PERSISTENT = (2 * L + 1) * H  # the norms: the only tensors under ZeRO-3's 1e5-element persistence threshold
EMBEDDING = V * H  # tied with the head; the largest tensor
REDUCE_BUCKET = 500_000_000 * 2  # DeepSpeed's reduce_bucket_size default, in bf16
PREFETCH = 50_000_000  # stage3_prefetch_bucket_size default, elements
# Evaluation's activations: logits in bf16, their fp32 copy, the fp32 log-softmax; one layer's forward in flight.
EVAL_ACTIVATIONS = SEQ * V * (2 + 4 + 4) + SEQ * (2 * H + 3 * MLP) * 2


def zero(parallel: str, offload: str = "none"):
    return estimate(LLAMA_1B, TrainingSetup(seq_len=SEQ, parallel=parallel, gpus=GPUS, offload=offload))


def moment(result, name: str, words: str) -> int:
    (found,) = [p.bytes for p in result.other_peaks if p.moment == name and words in p.how]
    return found


def resting(parallel: str, offload: str) -> float:
    """The training state on each card between steps."""
    on_card = offload == "none"
    weights = 2 * P if parallel == "zero2" else (0 if offload == "optimizer_and_params" else 2 * P / GPUS)
    masters = 4 * P / GPUS if on_card else 0  # fp32 master partition
    moments = 2 * 4 * P / GPUS if on_card else 0  # Adam's two fp32 moments, partitioned
    resident = PERSISTENT * 2 + REDUCE_BUCKET if parallel == "zero3" else 0  # ZeRO-3: kept at every moment
    return weights + masters + moments + resident


CASES = [("zero2", "none"), ("zero2", "optimizer"), ("zero3", "none"), ("zero3", "optimizer"),
         ("zero3", "optimizer_and_params")]


@pytest.mark.parametrize(("parallel", "offload"), CASES)
def test_evaluation_keeps_the_masters_and_under_zero3_gathers_like_the_forward(parallel, offload):
    result = zero(parallel, offload)
    gathered = 0.0
    if parallel == "zero3":  # the layer running, the prefetch bucket (capped at 5e7 elements), the head: bf16
        gathered = (LAYER + min(LAYER, PREFETCH)) * 2 + EMBEDDING * 2
    expected = resting(parallel, offload) + gathered + EVAL_ACTIVATIONS
    assert moment(result, "evaluation", "no_grad") == pytest.approx(expected, abs=4)


@pytest.mark.parametrize(("parallel", "offload"), CASES)
def test_saving_counts_the_masters_and_gathers_sixteen_bit_weights(parallel, offload):
    result = zero(parallel, offload)
    rest = resting(parallel, offload)
    if parallel == "zero2":  # the bf16 module is whole on every card: its state_dict() is views
        assert moment(result, "saving", "views") == pytest.approx(rest, abs=4)
        return
    assert moment(result, "saving", "save_checkpoint): nothing") == pytest.approx(rest, abs=4)
    # save_16bit_model: one module gathered at a time, the largest the tied embedding, in bf16 (not fp32)
    assert moment(result, "saving", "module by module") == pytest.approx(rest + 2 * EMBEDDING, abs=4)
    # every parameter gathered at once: the whole model in bf16, 2 bytes a parameter, not the masters' 4
    assert moment(result, "saving", "gathered at once") == pytest.approx(rest + 2 * P, abs=4)


@pytest.mark.parametrize(("parallel", "offload"), CASES)
def test_loading_comes_before_the_masters_exist(parallel, offload):
    result = zero(parallel, offload)
    weights = 2 * P if parallel == "zero2" else (0 if offload == "optimizer_and_params" else 2 * P / GPUS)
    # the module (or its partition) and one tensor in flight as the checkpoint holds it (fp32 here)
    (loading,) = [p.bytes for p in result.other_peaks if p.moment == "loading"
                  and ("as it trains" in p.how or "meta-device" in p.how)]
    assert loading == pytest.approx(weights + 4 * EMBEDDING, abs=4)


@pytest.mark.parametrize(("parallel", "offload"), CASES)
def test_the_step_runs_deepspeeds_fused_adam_without_foreach_temporaries(parallel, offload):
    result = zero(parallel, offload)
    on_card = offload == "none"
    weights = 2 * P if parallel == "zero2" else (0 if offload == "optimizer_and_params" else 2 * P / GPUS)
    grads = 2 * P / GPUS if on_card else 0  # the bf16 gradient partition (offloaded: on the host)
    state = (4 + 8) * P / GPUS if on_card else 0  # masters and moments
    fp32_grads = 4 * P / GPUS if on_card else 0  # the step's fp32 copy of the gradient partition
    zero3 = (PERSISTENT + LAYER + min(LAYER, PREFETCH)) * 2 + REDUCE_BUCKET if parallel == "zero3" else 0
    # torch's foreach AdamW would add a full-size fp32 temporary of the partition (4 P / GPUS): FusedAdam none
    assert dict(result.phases)["optimizer step"] == pytest.approx(weights + grads + state + fp32_grads + zero3,
                                                                   abs=4)
    assert any("FusedAdam" in n for n in result.notes)


def test_without_zero_adamw_keeps_its_foreach_temporary():
    ddp = estimate(LLAMA_1B, TrainingSetup(seq_len=SEQ, parallel="ddp", gpus=GPUS))
    # fp32 weights, gradients, two moments, DDP's gradient buckets, and the foreach temporary: 4 bytes each
    assert dict(ddp.phases)["optimizer step"] == pytest.approx(4 * P * 6, abs=4)
    assert not any("FusedAdam" in n for n in ddp.notes)
