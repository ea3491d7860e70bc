"""Peaks outside the training step: loading, saving a checkpoint, evaluating, and the warning when one is higher."""

import io
import json

from anchorgpu.planner import TrainingSetup, estimate, preset_spec
from anchorgpu.planner.command import run
from anchorgpu.planner.other_peaks import Resting, other_peaks, warnings
from anchorgpu.planner.params import parameter_counts

GB = 10**9
LLAMA_70B = preset_spec("llama-3.1-70b")
LLAMA_1B = preset_spec("llama-3.2-1b")


def _moments(breakdown) -> dict:
    return {(p.moment, p.how): p.bytes for p in breakdown.other_peaks}


def test_fsdp_loading_the_whole_model_on_every_rank_is_higher_than_the_step_and_warned():
    setup = TrainingSetup(method="lora", parallel="fsdp", gpus=8, grad_checkpointing=True)
    result = estimate(LLAMA_70B, setup)
    moments = _moments(result)
    whole = next(v for (m, how), v in moments.items() if m == "loading" and "whole model" in how)
    meta = next(v for (m, how), v in moments.items() if m == "loading" and "meta-device" in how)
    bf16_model = 2 * parameter_counts(LLAMA_70B).total
    assert whole >= bf16_model > result.live > meta  # the full bf16 model on each card vs one shard
    warning = next(n for n in result.notes if n.startswith("Higher than the training step: loading"))
    assert f"{whole / GB:.1f} GB" in warning and "meta device" in warning


def test_a_full_state_dict_gathered_on_the_card_holds_the_model_again():
    setup = TrainingSetup(method="lora", parallel="fsdp", gpus=8, grad_checkpointing=True)
    moments = _moments(estimate(LLAMA_70B, setup))
    saving = {how: v for (m, how), v in moments.items() if m == "saving"}
    gathered = next(v for how, v in saving.items() if "no CPU offload" in how)
    offloaded = next(v for how, v in saving.items() if "cpu_offload=True" in how)
    sharded = next(v for how, v in saving.items() if "torch.distributed.checkpoint" in how)
    counts = parameter_counts(LLAMA_70B, setup)
    assert gathered - sharded == 2 * counts.total + 4 * counts.lora  # the whole model (bf16 base, fp32 adapters)
    assert sharded < offloaded < gathered


def test_on_one_card_loading_and_saving_stay_below_the_step():
    result = estimate(LLAMA_1B, TrainingSetup(seq_len=1024))
    assert all(p.bytes <= result.live for p in result.other_peaks if p.moment in {"loading", "saving"})
    assert not any(n.startswith("Higher than the training step") for n in result.notes)


def test_evaluation_grows_with_its_batch_and_keeps_the_training_state():
    resting = Resting(weights=10 * GB, optimizer=20 * GB, full_weights=10 * GB, largest_tensor=GB)
    kw = dict(sharded=False, gpus=1, resting=resting, vocab=128256, hidden=4096, intermediate=14336, compute=2)
    small = next(p for p in other_peaks(tokens_eval=2048, **kw) if p.moment == "evaluation")
    large = next(p for p in other_peaks(tokens_eval=8 * 2048, **kw) if p.moment == "evaluation")
    assert small.bytes > 30 * GB  # weights and optimizer state stay on the card
    per_token = 128256 * (2 + 4 + 4) + (2 * 4096 + 3 * 14336) * 2
    assert large.bytes - small.bytes == 7 * 2048 * per_token
    assert warnings((large,), step_live=31 * GB) and not warnings((small,), step_live=int(large.bytes))


def test_the_command_reports_other_peaks_and_flags_the_higher_ones():
    out = io.StringIO()
    args = ["--preset", "llama-3.1-70b", "--method", "lora", "--parallel", "fsdp", "--gpus", "8",
            "--grad-checkpointing", "--json"]
    assert run(args, out, io.StringIO(), offers=[]) == 0
    data = json.loads(out.getvalue())
    higher = [p for p in data["other_peaks"] if p["higher_than_step"]]
    assert {p["moment"] for p in higher} == {"loading", "saving"}
    assert all(p["bytes"] > 0 and p["avoid"] for p in higher)
    table = io.StringIO()
    assert run(args[:-1], table, io.StringIO(), offers=[]) == 0
    assert "! loading" in table.getvalue() and "! saving" in table.getvalue()
