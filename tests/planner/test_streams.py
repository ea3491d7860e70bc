"""Streams in the allocator model (issue 21): PyTorch's caching allocator hands a freed block only to a request on
the stream it was allocated on, and FSDP allocates its gathered weights and sharded gradients on streams of its own
(pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp; torch/distributed/fsdp; see device_memory and
analytic._fsdp_streams)."""

import pytest

from anchorgpu.planner import PlannerInputError, TrainingSetup, estimate, preset_spec
from anchorgpu.planner.analytic import OFFLOAD_COPY, PREFETCHED, _fsdp_streams
from anchorgpu.planner.device_memory import COMPUTE, AllocatorModel, replay
from anchorgpu.planner.setup import setup_from_mapping

MiB = 1024**2
LLAMA_1B = preset_spec("llama-3.2-1b")


def test_a_block_freed_on_one_stream_is_not_handed_to_another():
    model = AllocatorModel()
    model.free(model.malloc(100 * MiB, "unshard"))
    model.malloc(100 * MiB)  # the compute stream cannot take the unshard stream's cached block
    assert model.reserved == 200 * MiB
    assert model.reserved_by_stream == {"unshard": 100 * MiB, COMPUTE: 100 * MiB}
    model.malloc(60 * MiB, "unshard")  # the unshard stream reuses (and splits) its own
    assert model.reserved == 200 * MiB


def test_small_blocks_are_kept_per_stream_too():
    model = AllocatorModel()
    model.free(model.malloc(4096, "copy-in"))
    model.malloc(4096)
    assert model.reserved == 4 * MiB  # one 2 MiB small segment per stream


def test_a_replay_on_one_stream_is_the_replay_it_was():
    step = [{"activations": [16 * MiB] * 40, "weights": [30 * MiB]},
            {"buffers": [200 * MiB] * 4, "weights": [30 * MiB]}]
    plain = replay(step)
    assert replay(step, streams={}) == plain
    assert replay(step, streams={"buffers": COMPUTE, "weights": COMPUTE}) == plain
    assert plain == (830 * MiB, 30 * MiB + 640 * MiB + 800 * MiB)


def test_a_part_on_its_own_stream_keeps_its_own_segments():
    # Moment 1: a 200 MiB gather; moment 2: it is freed and 150 MiB of activations come. On one stream the
    # activations take the gather's block; on the gather's own stream they cannot.
    step = [{"gathered": [200 * MiB]}, {"activations": [150 * MiB]}]
    assert replay(step) == (200 * MiB, 200 * MiB)
    assert replay(step, streams={"gathered": "unshard"}) == (200 * MiB, 350 * MiB)


def test_fsdp2_gathers_into_copy_in_buffers_and_reduces_on_its_stream():
    streams = _fsdp_streams(TrainingSetup(parallel="fsdp", gpus=2))
    assert streams[("weights", "FSDP: the last layer's all-gather buffer")] == "fsdp2 all-gather copy-in"
    assert streams[("weights", PREFETCHED)] == "fsdp2 all-gather copy-in"
    assert streams[("weights", OFFLOAD_COPY)] == "fsdp2 all-gather copy-in"
    assert streams[("gradients", "all")] == streams[("gradients", "sharded grads of the later layer")] \
        == "fsdp2 reduce-scatter"
    # the copy-out's unsharded parameters and autograd's unsharded gradients are on the compute stream
    assert ("weights", "FSDP: this layer gathered") not in streams
    assert ("weights", "FSDP: gathered embedding and head") not in streams
    assert ("gradients", "FSDP: this layer's unsharded grads") not in streams


def test_fsdp1_gathers_on_its_unshard_stream():
    streams = _fsdp_streams(TrainingSetup(parallel="fsdp", gpus=2, fsdp_version=1))
    for what in ("FSDP: gathered embedding and head", "FSDP: this layer gathered", PREFETCHED):
        assert streams[("weights", what)] == "fsdp1 unshard"
    assert streams[("weights", OFFLOAD_COPY)] == "fsdp1 pre-unshard"
    assert streams[("gradients", "all")] == "fsdp1 post-backward"


def test_fsdp1_has_no_all_gather_buffers_and_fsdp2_does():
    two = TrainingSetup(parallel="fsdp", gpus=2, grad_checkpointing=True)
    one = two.replace(fsdp_version=1)
    r2, r1 = estimate(LLAMA_1B, two), estimate(LLAMA_1B, one)
    phases2, phases1 = dict(r2.phases), dict(r1.phases)
    # FSDP2 holds the last layer's all-gather buffer at the loss; FSDP1 frees the layer after its forward
    assert phases2["forward, at the loss"] > phases1["forward, at the loss"]
    assert phases2["forward, first layer"] > phases1["forward, first layer"]
    assert phases2["backward, last layer"] == phases1["backward, last layer"]


@pytest.mark.parametrize("version", [1, 2])
def test_fsdps_own_streams_hold_cache_the_compute_stream_cannot_use(version, monkeypatch):
    from anchorgpu.planner import analytic, device_memory
    setup = TrainingSetup(parallel="fsdp", gpus=2, fsdp_version=version)
    device_memory._CACHE.clear()
    with_streams = estimate(LLAMA_1B, setup).step
    monkeypatch.setattr(analytic, "_fsdp_streams", lambda _setup: {})
    one_stream = estimate(LLAMA_1B, setup).step
    assert with_streams.allocated == one_stream.allocated  # streams move blocks between pools, not tensors
    assert with_streams.reserved > one_stream.reserved
    assert estimate(LLAMA_1B, TrainingSetup()).step.reserved >= estimate(LLAMA_1B, TrainingSetup()).step.allocated


def test_the_fsdp_version_is_one_or_two():
    with pytest.raises(PlannerInputError) as error:
        TrainingSetup(parallel="fsdp", gpus=2, fsdp_version=3).validate(LLAMA_1B)
    assert error.value.field == "fsdp_version"
    assert setup_from_mapping({"parallel": "fsdp", "gpus": "2", "fsdp_version": "1"}).fsdp_version == 1
    assert TrainingSetup().fsdp_version == 2
