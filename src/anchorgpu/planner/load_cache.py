"""What loading and wrapping the model leave in PyTorch's caching allocator when a measurement starts.

``torch.cuda.reset_peak_memory_stats`` sets the reserved peak to what the allocator holds at that
moment, not to zero, and the allocator keeps every segment it took until ``torch.cuda.empty_cache``
(pytorch/pytorch@001074d2 c10/cuda/CUDACachingAllocator.cpp: ``reset_peak_stat`` does
``stat.peak = stat.current``; cached blocks go back to the driver only when the cache is emptied or a
cudaMalloc fails). So ``max_memory_reserved`` read
after a reset covers what the load and the wrap left cached, as far as the step cannot reuse it.
Whether that cache is there is a property of how a run measures: ``Reserve.load_cache`` names it.

* ``"emptied"`` (the default): the step starts from its own tensors only (``empty_cache`` after the
  wrap, or a load that leaves nothing cached).
* ``"fsdp1_sync_module_states"``: FSDP1's wrapper (``FullyShardedDataParallel`` with an auto-wrap
  policy, ``sync_module_states=True``, ``device_id`` set), wrapping a model whose states are on the CPU
  on rank 0 (meta elsewhere) and nothing emptied after the wrap, as Answer.AI's fsdp_qlora measures
  (AnswerDotAI/fsdp_qlora@4cd69234 ``train.py``: ``empty_cache`` after the load loop at line 634,
  ``FSDP(...)`` at 717-738, ``reset_peak_memory_stats`` at 809; ``low_memory`` True by default).

For the FSDP1 path each wrapped unit goes, in the order the auto-wrap policy wraps them (post-order:
the decoder layers first, the root with the embedding, final norm and head last), through
(torch/distributed/fsdp/_init_utils.py, ``_init_param_handle_from_module``; torch 2.2-2.3):

1. ``_move_module_to_device``: each CPU parameter is copied to the device (``param.data = param.to``);
2. ``_sync_module_params_and_buffers``: ``_broadcast_coalesced`` in buckets of
   ``PARAM_BROADCAST_BUCKET_SIZE`` (250 MiB), each flattened into one tensor, at most two in flight
   (torch/csrc/distributed/c10d/comm.cpp ``broadcast_coalesced``: ``max_in_flight = 2``; a bucket closes
   once it reaches the limit, reducer.cpp ``compute_bucket_assignment_by_size``);
3. ``FlatParamHandle``: ``torch.cat`` of the parameters into the flat parameter, while the parameters
   are still referenced (``managed_params``);
4. ``FlatParamHandle.shard``: a clone of this rank's chunk, then the flat parameter's storage freed;
   the parameters go when the function returns;
5. with ``CPUOffload(offload_params=True)``, the shard is moved to the CPU (``flat_param_to(cpu)``).

Each unit's parameters are taken as one request per tensor (module order) and the shard as the blocks
the step keeps for that unit (``TensorSizes``); LoRA adapters, which fsdp_qlora wraps as units of
their own, are taken with their layer (they are small). What happens inside a broadcast (NCCL's own
buffers) is outside PyTorch's allocator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MiB = 1024**2

LOAD_PATHS = ("emptied", "fsdp1_sync_module_states")
FSDP1_BROADCAST_BUCKET = 250 * MiB  # torch/distributed/fsdp/_init_utils.py PARAM_BROADCAST_BUCKET_SIZE
BROADCAST_IN_FLIGHT = 2  # torch/csrc/distributed/c10d/comm.cpp broadcast_coalesced: max_in_flight

PARAMETERS = "weights: parameters"  # the step's name for the device's own parameters (see device_memory.step_peaks)


@dataclass(frozen=True)
class Unit:
    """One wrapped unit: its parameters as the device holds them before sharding (bytes per tensor, in module
    order), and the blocks its shard keeps for the step."""

    tensors: tuple[int, ...]
    shard: tuple[int, ...]


def broadcast_buckets(tensors: Sequence[int], limit: int = FSDP1_BROADCAST_BUCKET) -> list[int]:
    """The flat buckets ``_broadcast_coalesced`` builds: consecutive tensors until a bucket reaches ``limit``."""
    buckets, size = [], 0
    for nbytes in tensors:
        size += nbytes
        if size >= limit:
            buckets.append(size)
            size = 0
    if size:
        buckets.append(size)
    return buckets


def fsdp1_wrap_states(units: Sequence[Unit], kept: dict[str, Sequence[int]], offload_params: bool
                      ) -> list[dict[str, list[int]]]:
    """The allocator states of FSDP1's wrap, unit by unit, for ``device_memory.replay``.

    ``kept``: what the device holds before the wrap and keeps through it (the load's survivors, such as
    bitsandbytes' quantisation state); each unit's shard joins it under ``PARAMETERS`` unless offloaded.
    The last state is what the step starts from."""
    held: dict[str, list[int]] = {name: list(sizes) for name, sizes in kept.items()}
    states: list[dict[str, list[int]]] = [dict(held)] if held else []
    for unit in units:
        params = {"load: the unit's parameters on the device": list(unit.tensors)}
        states.append({**held, **params})
        buckets = broadcast_buckets(unit.tensors)
        for i in range(len(buckets)):
            window = buckets[max(0, i + 1 - BROADCAST_IN_FLIGHT): i + 1]
            states.append({**held, **params, "load: broadcast buckets in flight": window})
        flat = {"load: the flat parameter": [sum(unit.tensors)]}
        states.append({**held, **params, **flat})
        with_shard = {**held, PARAMETERS: held.get(PARAMETERS, []) + list(unit.shard)}
        states.append({**with_shard, **params, **flat})
        if not offload_params:
            held = with_shard
        states.append(dict(held))
    return states


def wrap_states(path: str, units: Sequence[Unit], kept: dict[str, Sequence[int]], offload_params: bool
                ) -> list[dict[str, list[int]]]:
    """The states a measurement on ``path`` starts after (``LOAD_PATHS``); none for ``"emptied"``."""
    if path == "emptied":
        return []
    if path == "fsdp1_sync_module_states":
        return fsdp1_wrap_states(units, kept, offload_params)
    raise ValueError(f"unknown load path {path!r}; one of {', '.join(LOAD_PATHS)}")
