"""What loading and wrapping leave cached, the 4-bit quantisation state under FSDP, the loss's separate tensors."""

import pytest

from anchorgpu.planner import Reserve, TrainingSetup, estimate, preset_spec
from anchorgpu.planner.activations import ACTIVATION_COEFFICIENTS, activation_profile
from anchorgpu.planner.analytic import NO_RESERVE, QUANT_STATE, _placements, _tensor_sizes, _with_loss_tensors
from anchorgpu.planner.device_memory import replay
from anchorgpu.planner.load_cache import (
    FSDP1_BROADCAST_BUCKET,
    PARAMETERS,
    Unit,
    broadcast_buckets,
    fsdp1_wrap_states,
    wrap_states,
)

MiB = 1024**2
LLAMA_1B = preset_spec("llama-3.2-1b")
FSDP_QLORA = TrainingSetup(method="qlora", seq_len=256, parallel="fsdp", gpus=2)


def test_broadcast_buckets_close_once_they_reach_250_mib():
    assert FSDP1_BROADCAST_BUCKET == 250 * MiB
    sizes = [100 * MiB, 200 * MiB, 30 * MiB, 300 * MiB, 10 * MiB]
    assert broadcast_buckets(sizes) == [300 * MiB, 330 * MiB, 10 * MiB]
    assert broadcast_buckets([5 * MiB, 6 * MiB]) == [11 * MiB]
    assert broadcast_buckets([]) == []


def test_a_unit_goes_through_move_broadcast_flatten_shard_with_two_buckets_in_flight():
    unit = Unit(tensors=(200 * MiB, 100 * MiB, 260 * MiB, 10 * MiB), shard=(285 * MiB,))
    kept = {"weights: kept": [MiB]}
    states = fsdp1_wrap_states([unit], kept, offload_params=False)
    params = list(unit.tensors)
    # the kept tensors; the unit's parameters; each bucket window (at most two); the flat copy; the shard; after
    assert [s.get("load: broadcast buckets in flight") for s in states if "load: broadcast buckets in flight" in s] \
        == [[300 * MiB], [300 * MiB, 260 * MiB], [260 * MiB, 10 * MiB]]
    flat = [s for s in states if "load: the flat parameter" in s]
    assert [s["load: the flat parameter"] for s in flat] == [[570 * MiB], [570 * MiB]]
    assert all(s["load: the unit's parameters on the device"] == params for s in flat)
    assert flat[-1][PARAMETERS] == [285 * MiB] and PARAMETERS not in flat[0]
    assert states[-1] == {"weights: kept": [MiB], PARAMETERS: [285 * MiB]}
    offloaded = fsdp1_wrap_states([unit], kept, offload_params=True)
    assert offloaded[-1] == {"weights: kept": [MiB]}  # the shard went to the CPU
    assert wrap_states("emptied", [unit], kept, False) == []
    with pytest.raises(ValueError):
        wrap_states("fsdp3", [unit], kept, False)


def test_the_wraps_cache_stays_reserved_and_the_allocated_peak_starts_at_the_reset():
    # Two 30 MiB parameters (a segment each), one 60 MiB bucket (a segment, freed), the 60 MiB flat copy (in the
    # bucket's freed block), a 30 MiB shard (a new segment): 150 MiB reserved, 30 MiB allocated.
    unit = Unit(tensors=(30 * MiB, 30 * MiB), shard=(30 * MiB,))
    before = fsdp1_wrap_states([unit], {}, offload_params=False)
    step = [{PARAMETERS: [30 * MiB]}]
    assert replay(step, before=before) == (30 * MiB, 150 * MiB)
    assert replay(step) == (30 * MiB, 30 * MiB)
    # A step request that fits a cached block reuses it: the reserved figure does not grow.
    assert replay([{PARAMETERS: [30 * MiB], "activations": [50 * MiB]}], before=before) == (80 * MiB, 150 * MiB)


def test_fsdp_shards_the_4bit_codes_but_every_device_keeps_the_whole_quantisation_state():
    placed = _placements(LLAMA_1B, FSDP_QLORA)
    four_bit = [p for p in placed if p.tensor.is_linear_weight]
    state = sum(p.tensor.total for p in four_bit) * (1 / 64 + 4 / (64 * 256))  # double quantisation
    result = estimate(LLAMA_1B, FSDP_QLORA, reserve=NO_RESERVE)
    parts = {(c, w): b for c, w, b in result.parts}
    assert parts[("weights", QUANT_STATE)] == pytest.approx(state, abs=2)
    everything = sum(p.tensor.total * p.stored for p in placed)
    assert parts[("weights", "parameters")] == pytest.approx((everything - state) / 2, abs=2)
    offloaded = estimate(LLAMA_1B, FSDP_QLORA.replace(offload="optimizer_and_params"), reserve=NO_RESERVE)
    parts = {(c, w): b for c, w, b in offloaded.parts}
    assert ("weights", "parameters") not in parts and parts[("weights", QUANT_STATE)] == pytest.approx(state, abs=2)
    single = estimate(LLAMA_1B, FSDP_QLORA.replace(parallel="single", gpus=1), reserve=NO_RESERVE)
    assert ("weights", QUANT_STATE) not in {(c, w) for c, w, _b in single.parts}  # in the parameters, unsharded


def test_the_allocator_sees_the_state_tensor_by_tensor_and_the_codes_per_layer_shard():
    sizes = _tensor_sizes(LLAMA_1B, FSDP_QLORA, _placements(LLAMA_1B, FSDP_QLORA), 2)
    state = sizes.blocks[("weights", QUANT_STATE)]
    assert len(state) == LLAMA_1B.num_layers  # one block per layer: its seven weights' states together
    hidden, inter = LLAMA_1B.hidden_size, LLAMA_1B.intermediate_size
    kv = LLAMA_1B.num_kv_heads * LLAMA_1B.head_dim
    linear = 2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * inter
    assert state[0] == pytest.approx(linear * (1 / 64 + 4 / (64 * 256)), abs=8)


def test_the_load_cache_raises_reserved_only_and_only_where_fsdp_wraps():
    emptied = estimate(LLAMA_1B, FSDP_QLORA).measures("a100")
    cached = estimate(LLAMA_1B, FSDP_QLORA, Reserve(load_cache="fsdp1_sync_module_states")).measures("a100")
    # allocated differs only by the blocks the allocator hands out whole (their place depends on the layout)
    assert cached.allocated_peak_bytes == pytest.approx(emptied.allocated_peak_bytes, rel=0.01)
    assert cached.reserved_peak_bytes > emptied.reserved_peak_bytes
    single = TrainingSetup(method="lora", seq_len=256)
    assert estimate(LLAMA_1B, single, Reserve(load_cache="fsdp1_sync_module_states")).measures("a100") \
        == estimate(LLAMA_1B, single).measures("a100")
    with pytest.raises(ValueError):
        estimate(LLAMA_1B, single, Reserve(load_cache="no such path"))
    notes = " ".join(estimate(LLAMA_1B, FSDP_QLORA, Reserve(load_cache="fsdp1_sync_module_states")).notes)
    assert "fsdp1_sync_module_states: no empty_cache" in notes


def test_the_losss_transients_are_requested_as_the_tensors_they_are():
    setup = TrainingSetup(method="lora", seq_len=256)
    profile = activation_profile(LLAMA_1B, setup)
    sizes = _tensor_sizes(LLAMA_1B, setup, _placements(LLAMA_1B, setup), 1)
    sizes = _with_loss_tensors(sizes, profile, ACTIVATION_COEFFICIENTS, 256)
    logits = 256 * LLAMA_1B.vocab_size
    assert sorted(sizes.blocks[("temporaries", "logits and their fp32 copy")]) == [2 * logits, 4 * logits]
    assert sizes.blocks[("temporaries", "gradients of the logits")] == (4 * logits, 4 * logits)
    assert sizes.requests("temporaries", "gradients of the logits", 8 * logits, 0) == [4 * logits, 4 * logits]


def test_fsdp_gathers_a_4bit_layer_as_its_codes():
    placed = _placements(LLAMA_1B, FSDP_QLORA)
    layer = [p for p in placed if p.tensor.per_layer]
    codes = sum(p.tensor.numel * (2 if p.trainable else 0.5 if p.tensor.is_linear_weight else p.stored)
                for p in layer)
    result = estimate(LLAMA_1B, FSDP_QLORA, reserve=NO_RESERVE)
    parts = {(c, w): b for c, w, b in result.parts}
    assert parts[("weights", "FSDP: the last layer's all-gather buffer")] == pytest.approx(codes, abs=2)
