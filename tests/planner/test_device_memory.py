"""The three named measures per device: PyTorch's allocator rules, the replay of a step, the card generations."""

import io
import json

import pytest

from anchorgpu.planner import TrainingSetup, estimate, preset_spec
from anchorgpu.planner.analytic import NO_RESERVE, Reserve
from anchorgpu.planner.command import run
from anchorgpu.planner.device_memory import (
    CARDS, CONTEXT_ALLOWANCE, CUBLAS_DEFAULT, CUBLAS_SM90, HIPBLAS_GFX94, HIPBLASLT_DEFAULT, LARGE_BUFFER, SMALL_BUFFER,
    AllocatorModel, StepPeaks, card_generation, measures, replay, round_size, segment_size)
from anchorgpu.planner.recommend import Offer, recommend

MiB = 1024**2
LLAMA_1B = preset_spec("llama-3.2-1b")


def test_requests_are_rounded_and_placed_as_pytorchs_allocator_does():
    # c10/cuda/CUDACachingAllocator.cpp: round_size and get_allocation_size
    assert [round_size(n) for n in (1, 511, 512, 513, 4096)] == [512, 512, 512, 1024, 4096]
    assert segment_size(MiB) == SMALL_BUFFER == 2 * MiB  # the small pool takes up to 1 MiB
    assert segment_size(MiB + 512) == segment_size(10 * MiB - 512) == LARGE_BUFFER == 20 * MiB
    assert segment_size(10 * MiB) == 10 * MiB and segment_size(10 * MiB + 512) == 12 * MiB


def test_small_and_mid_requests_share_segments_large_ones_get_their_own():
    model = AllocatorModel()
    for _ in range(8):
        model.malloc(256 * 1024)
    assert model.reserved == 2 * MiB and model.allocated == 2 * MiB  # eight 256 KiB blocks fill one segment
    model.malloc(1)
    assert model.reserved == 4 * MiB  # the ninth needs a second small segment
    mid = AllocatorModel()
    for _ in range(3):
        mid.malloc(6 * MiB)
    assert mid.reserved == 20 * MiB  # three 6 MiB blocks in one 20 MiB segment
    mid.malloc(6 * MiB)
    assert mid.reserved == 40 * MiB  # 2 MiB left: not enough for a fourth
    large = AllocatorModel()
    large.malloc(11 * MiB)  # a 12 MiB segment; 1 MiB left is not split (must be > 1 MiB): the whole block is handed out
    assert large.reserved == 12 * MiB and large.allocated == 12 * MiB


def test_freed_blocks_are_split_for_smaller_requests_and_merge_back():
    model = AllocatorModel()
    big = model.malloc(100 * MiB)
    model.free(big)
    parts = [model.malloc(30 * MiB) for _ in range(3)]
    assert model.reserved == 100 * MiB  # all three carved from the cached 100 MiB segment
    for handle in parts:
        model.free(handle)
    model.malloc(100 * MiB)  # the pieces merged back into one block
    assert model.reserved == 100 * MiB and model.allocated_peak == 100 * MiB


def test_a_step_that_frees_small_blocks_and_asks_for_large_ones_fragments():
    # Moment 1: forty 16 MiB activation blocks; moment 2: they are gone, four 200 MiB buffers come.
    step = [{"activations": [16 * MiB] * 40}, {"buffers": [200 * MiB] * 4}]
    allocated, reserved = replay(step)
    assert allocated == 800 * MiB  # the larger moment, to the block
    assert reserved == 640 * MiB + 800 * MiB  # 16 MiB segments cannot hold 200 MiB: both stay cached
    same = [{"activations": [16 * MiB] * 40}, {"activations": [16 * MiB] * 20}]
    assert replay(same) == (640 * MiB, 640 * MiB)  # what is freed is reused: no fragmentation


def test_measures_per_card_generation_are_the_sources_figures():
    step = StepPeaks(live=10 * 2**30, allocated=10 * 2**30 + 5 * MiB, reserved=11 * 2**30, gpus=1)
    h100, a100, mi300x = measures(step, "h100"), measures(step, "a100"), measures(step, "mi300x")
    # cuBLAS workspace: 32 MiB on Hopper, 4096 KiB x 2 + 16 KiB x 8 elsewhere (CublasHandlePool.cpp)
    assert h100.allocated_peak_bytes - a100.allocated_peak_bytes == round_size(CUBLAS_SM90) - round_size(CUBLAS_DEFAULT)
    assert dict(mi300x.parts)["hipBLAS workspace (in the allocator)"] == HIPBLAS_GFX94
    assert dict(mi300x.parts)["hipBLASLt workspace (in the allocator)"] == HIPBLASLT_DEFAULT
    for m in (h100, a100, mi300x):
        assert step.live < m.allocated_peak_bytes < m.reserved_peak_bytes < m.device_used_bytes
        assert m.device_used_bytes == m.reserved_peak_bytes + CONTEXT_ALLOWANCE  # one card: no NCCL buffers
        assert sum(b for _w, b in m.parts) == m.device_used_bytes - step.live
    two = measures(StepPeaks(live=step.live, allocated=step.allocated, reserved=step.reserved, gpus=2), "h100")
    assert dict(two.parts)["NCCL buffers (allowance)"] == two.device_used_bytes - h100.device_used_bytes > 0
    worst = measures(step)
    assert worst.device_used_bytes == max(measures(step, c).device_used_bytes for c in CARDS)


@pytest.mark.parametrize("names, generation", [
    (("a100-sxm-80gb", "A100 SXM 80 GB"), "a100"), (("h100-sxm-80gb", ""), "h100"), (("x", "H200"), "h200"),
    (("b200-lot-2x180gb", "B200 lot, 2 × 180 GB"), "b200"), (("mi300x-192gb", "MI300X 192 GB"), "mi300x"),
    (("l40s", "L40S 48 GB"), None),
])
def test_a_products_card_generation_comes_from_its_slug_or_name(names, generation):
    assert card_generation(*names) == generation


@pytest.mark.parametrize("setup", [
    TrainingSetup(seq_len=512),
    TrainingSetup(method="lora", seq_len=1024, grad_checkpointing=True),
    TrainingSetup(seq_len=512, parallel="ddp", gpus=4),
    TrainingSetup(seq_len=512, parallel="fsdp", gpus=4),
    TrainingSetup(method="qlora", seq_len=1024),
])
def test_the_estimate_orders_its_three_measures(setup):
    result = estimate(LLAMA_1B, setup)
    for card in (None, *CARDS):
        m = result.measures(card)
        assert result.live <= m.allocated_peak_bytes <= m.reserved_peak_bytes < m.device_used_bytes
    assert result.peak == result.device_used_bytes == result.measures().device_used_bytes
    bare = estimate(LLAMA_1B, setup, reserve=NO_RESERVE)
    assert bare.live == result.live  # the reserve adds nothing to the live tensors


def test_ddp_gradient_buckets_are_allocated_not_reserved():
    setup = TrainingSetup(seq_len=512)
    single, ddp = estimate(LLAMA_1B, setup), estimate(LLAMA_1B, setup.replace(parallel="ddp", gpus=2))
    grads = dict(((c, w), b) for c, w, b in single.parts)[("gradients", "all")]
    assert ddp.allocated_peak_bytes - single.allocated_peak_bytes >= grads  # a flat copy of the gradients
    assert not any(c == "reserve" and "DDP" in w for c, w, _b in ddp.parts)


def test_fits_is_decided_on_device_memory_of_the_offers_own_card():
    breakdown = estimate(LLAMA_1B, TrainingSetup(method="lora", seq_len=1024))
    h100 = breakdown.measures("h100")
    # a card with room for PyTorch's reserved peak but not for the context on top of it does not fit
    between = (h100.reserved_peak_bytes + h100.device_used_bytes) // 2
    tight = Offer("h100-tight", "H100 SXM", memory_bytes_per_card=between, cards_per_unit=1, quantities=(1,))
    roomy = Offer("h100-roomy", "H100 SXM", memory_bytes_per_card=h100.device_used_bytes + MiB, cards_per_unit=1,
                  quantities=(1,))
    result = recommend(lambda cards: breakdown, [tight, roomy], headroom=0.0)
    fits = {o.offer.slug: o.fits for o in result.options}
    assert fits == {"h100-tight": False, "h100-roomy": True}
    assert result.options[0].overflow == "reserve" and "device-used" in result.options[0].reason
    assert result.options[1].device_used_bytes == h100.device_used_bytes


def test_the_command_names_each_measure():
    out = io.StringIO()
    offers = [Offer.from_gb("h100-sxm-80gb", "H100 SXM 80 GB", 80, 1, (1, 2))]
    assert run(["--preset", "llama-3.2-1b", "--method", "lora", "--json"], out, io.StringIO(), offers=offers) == 0
    data = json.loads(out.getvalue())
    assert data["allocated_peak_bytes"] <= data["reserved_peak_bytes"] < data["device_used_bytes"]
    assert data["device_used_bytes"] == data["peak_bytes_per_device"]
    assert set(data["measures_per_card"]) == set(CARDS)
    assert "max_memory_allocated" in data["measure_definitions"]["allocated_peak_bytes"]
    one = next(row for row in data["recommendations"] if row["cards"] == 1)
    assert one["card"] == "H100" and one["device_used_bytes"] == data["measures_per_card"]["h100"]["device_used_bytes"]
    for row in data["recommendations"]:
        assert row["fits"] == (row["device_used_bytes"] <= 0.9 * 80e9)
    table = io.StringIO()
    assert run(["--preset", "llama-3.2-1b", "--method", "lora"], table, io.StringIO(), offers=offers) == 0
    text = table.getvalue()
    assert "torch.cuda.max_memory_reserved" in text and "nvidia-smi" in text and "device used" in text


def test_switching_the_allocator_model_off_leaves_only_the_stated_allowances():
    setup = TrainingSetup(method="lora", seq_len=1024)
    plain = estimate(LLAMA_1B, setup, reserve=Reserve(allocator=False, workspaces=False))
    assert plain.allocated_peak_bytes == plain.reserved_peak_bytes == plain.live
    assert plain.device_used_bytes == plain.live + CONTEXT_ALLOWANCE


def test_the_allocator_model_keeps_the_estimate_quick_on_a_70b_model():
    import time

    spec = preset_spec("llama-3.1-70b")
    started = time.perf_counter()
    result = estimate(spec, TrainingSetup(seq_len=4096, parallel="fsdp", gpus=8))  # 80 layers, every moment
    assert time.perf_counter() - started < 1.0  # about 20 ms on one core: one block per layer and part
    assert result.reserved_peak_bytes > result.allocated_peak_bytes
