"""Streams in the allocator model (issue 21): PyTorch's caching allocator hands a freed block only to a request on
the stream it was allocated on, and FSDP allocates its gathered weights and sharded gradients on streams of its own
(pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp; torch/distributed/fsdp; see device_memory and
analytic._fsdp_streams)."""

from anchorgpu.planner.device_memory import COMPUTE, AllocatorModel, replay

MiB = 1024**2


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
