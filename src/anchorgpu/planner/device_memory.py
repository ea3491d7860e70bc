"""Three named measures of memory per device, as a customer will see them.

* ``allocated_peak_bytes``: what ``torch.cuda.max_memory_allocated`` reports:
  the blocks PyTorch's caching allocator hands out for live tensors, each
  request rounded up as the allocator rounds it.
* ``reserved_peak_bytes``: what ``torch.cuda.max_memory_reserved`` reports:
  the segments the allocator holds from the driver (cudaMalloc), which it
  keeps after tensors are freed and reuses for later requests.
* ``device_used_bytes``: what ``nvidia-smi`` / ``amd-smi`` shows for the
  process: the reserved segments plus what lives outside PyTorch's allocator
  (the CUDA/ROCm context with its loaded kernels, NCCL/RCCL's buffers).

Pure: no torch. The allocator rules are PyTorch's, read from
``c10/cuda/CUDACachingAllocator.cpp`` (pytorch/pytorch; the constants,
``round_size``, ``get_allocation_size``, ``should_split``, ``get_pool`` and
the ``allocated_bytes`` statistic, which counts whole blocks). ROCm builds
use the same allocator (hipified). ``AllocatorModel`` replays a sequence of
requests and frees through those rules; what is modelled and what is an
allowance is said next to each figure.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MiB = 1024**2

# c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch):
MIN_BLOCK = 512  # kMinBlockSize: all sizes are rounded to at least 512 bytes
SMALL_SIZE = 1 * MiB  # kSmallSize: the largest "small" request (small pool: size <= 1 MiB)
SMALL_BUFFER = 2 * MiB  # kSmallBuffer: small requests are packed into 2 MiB segments
LARGE_BUFFER = 20 * MiB  # kLargeBuffer: requests between 1 and 10 MiB are packed into 20 MiB segments
MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc
ROUND_LARGE = 2 * MiB  # kRoundLarge: larger requests get a segment of their size rounded up to 2 MiB


def round_size(nbytes: int) -> int:
    """The block size the allocator gives a request (``round_size``, without ``roundup_power2_divisions``)."""
    if nbytes < MIN_BLOCK:
        return MIN_BLOCK
    return MIN_BLOCK * math.ceil(nbytes / MIN_BLOCK)


def segment_size(rounded: int) -> int:
    """The cudaMalloc a request makes when no cached block fits (``get_allocation_size``)."""
    if rounded <= SMALL_SIZE:
        return SMALL_BUFFER
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * math.ceil(rounded / ROUND_LARGE)


COMPUTE = "compute"  # the stream a request is on unless said otherwise: the current (default) stream


class AllocatorModel:
    """PyTorch's caching allocator, per stream, without ``expandable_segments`` or ``max_split_size``.

    Best fit among the cached free blocks of the request's pool (small:
    rounded size <= 1 MiB; large: the rest) **on the request's stream**; a block is split when what
    remains is at least 512 bytes (small pool) or more than 1 MiB (large
    pool), otherwise the whole block is handed out and counted as allocated;
    a freed block merges with free neighbours of its segment. Segments are
    never given back (no ``empty_cache``; the real allocator frees cached
    segments only when a cudaMalloc fails, which the planner counts as not
    fitting).

    Streams (pytorch/pytorch@001074d2 ``c10/cuda/CUDACachingAllocator.cpp``): "Allocations are associated
    with a stream. Once freed, blocks can be re-allocated on the same stream, but not on any other stream"
    (the header). Each ``Block`` keeps its "allocation stream" (``Block::stream``) and the free-block search
    key is built from ``(device, stream, size)`` (the search-key constructor), so a segment cudaMalloc'd
    for one stream, and every block split from it, serves that stream only. ``recordStream`` does not change
    the owner: it adds the stream to ``stream_uses``, and ``free`` then defers the block's return
    (``insert_events``; ``process_events`` hands it to ``free_block`` once the events have completed) to the
    pool of its own allocation stream. The model frees at the moment a tensor is gone (the deferral is shorter
    than the model's moments) and always into the block's own stream's pool. With one stream (every
    request on ``COMPUTE``) it is the one-stream model it was before.
    """

    def __init__(self) -> None:
        # (stream, small) -> the sorted free blocks [(size, segment, offset)] of that stream's pool
        self._free: dict[tuple[str, bool], list[tuple[int, int, int]]] = {}
        self._pool: list[tuple[str, bool]] = []  # per segment: (its stream, in the small pool)
        self._offsets: list[list[int]] = []  # per segment: the sorted offsets of its blocks
        self._blocks: list[dict[int, list]] = []  # per segment: offset -> [size, allocated]
        self.allocated = self.reserved = self.allocated_peak = 0
        self.reserved_by_stream: dict[str, int] = {}
        self.trace: list[int] = []  # reserved bytes after each state of a replay

    def malloc(self, nbytes: int, stream: str = COMPUTE) -> tuple[int, int]:
        """Hands out a block on ``stream`` for a request of ``nbytes``; returns its handle."""
        size = round_size(nbytes)
        small = size <= SMALL_SIZE
        pool = (stream, small)
        free = self._free.setdefault(pool, [])
        i = bisect.bisect_left(free, (size, -1, -1))
        if i < len(free):
            block_size, segment, offset = free.pop(i)
        else:
            block_size, segment, offset = segment_size(size), len(self._pool), 0
            self._pool.append(pool)
            self._offsets.append([0])
            self._blocks.append({0: [block_size, False]})
            self.reserved += block_size
            self.reserved_by_stream[stream] = self.reserved_by_stream.get(stream, 0) + block_size
        remaining = block_size - size
        if (remaining >= MIN_BLOCK) if small else (remaining > SMALL_SIZE):
            self._blocks[segment][offset + size] = [remaining, False]
            bisect.insort(self._offsets[segment], offset + size)
            bisect.insort(free, (remaining, segment, offset + size))
            block_size = size
        self._blocks[segment][offset] = [block_size, True]
        self.allocated += block_size
        self.allocated_peak = max(self.allocated_peak, self.allocated)
        return segment, offset

    def free(self, handle: tuple[int, int]) -> None:
        """Returns a block to its own stream's cache, merged with the free blocks next to it in its segment."""
        segment, offset = handle
        blocks, offsets, free = self._blocks[segment], self._offsets[segment], self._free[self._pool[segment]]
        size = blocks[offset][0]
        self.allocated -= size
        after = blocks.get(offset + size)
        if after is not None and not after[1]:
            free.pop(bisect.bisect_left(free, (after[0], segment, offset + size)))
            del blocks[offset + size]
            offsets.pop(bisect.bisect_left(offsets, offset + size))
            size += after[0]
        i = bisect.bisect_left(offsets, offset)
        if i > 0:
            start = offsets[i - 1]
            before = blocks[start]
            if not before[1]:
                free.pop(bisect.bisect_left(free, (before[0], segment, start)))
                del blocks[offset]
                offsets.pop(i)
                offset, size = start, size + before[0]
        blocks[offset] = [size, False]
        bisect.insort(free, (size, segment, offset))


def replay(states: Sequence[Mapping[str, Sequence[int]]], passes: int = 2,
           before: Sequence[Mapping[str, Sequence[int]]] = (), streams: Mapping[str, str] | None = None
           ) -> tuple[int, int]:
    """``(allocated peak, reserved peak)`` of a step that goes through ``states`` in order, ``passes`` times.

    A state maps a name (what the tensors are) to the request sizes of the
    tensors of that name alive then. Going from one state to the next, the
    tensors that are gone are freed first, then the new ones requested (per
    name, as multisets of sizes); after the last state the step starts over
    at the first, which is the steady state from the second pass on. What
    happens between two states (the order of requests inside a layer's
    forward, say) is not replayed: that is the model's resolution.

    ``before``: states gone through once first (loading and wrapping the model, ``load_cache``), without
    emptying the cache after them; the allocated peak is counted from the step on (as
    ``torch.cuda.reset_peak_memory_stats`` does), the reserved one includes what they left cached.

    ``streams``: name -> the stream its tensors are allocated on (``AllocatorModel``); a name not listed is on
    ``COMPUTE``. None or empty: one stream, as before.
    """
    model = AllocatorModel()
    on = streams or {}
    wanted_states = [{name: Counter(sizes) for name, sizes in state.items()} for state in states]
    loading = [{name: Counter(sizes) for name, sizes in state.items()} for state in before]
    held: dict[str, tuple[Counter, dict[int, list[tuple[int, int]]]]] = {}
    for run, sequence in enumerate([loading] + [wanted_states] * passes):
        if run == 1:  # the measurement starts: peaks reset to what is held now
            model.allocated_peak = model.allocated
        for wanted in sequence:
            for name in list(held):
                have, handles = held[name]
                want = wanted.get(name)
                if want == have:
                    continue
                for size in list(handles):
                    keep = want.get(size, 0) if want else 0
                    while len(handles[size]) > keep:
                        model.free(handles[size].pop())
                        have[size] -= 1
                    if not handles[size]:
                        del handles[size], have[size]
                if not handles:
                    del held[name]
            for name, want in wanted.items():
                have, handles = held.setdefault(name, (Counter(), {}))
                if want == have:
                    continue
                for size, count in want.items():
                    got = handles.setdefault(size, [])
                    while len(got) < count:
                        got.append(model.malloc(size, on.get(name, COMPUTE)))
                        have[size] += 1
            model.trace.append(model.reserved)
    return model.allocated_peak, model.reserved


# ---------------------------------------------------------------------------------------------------------------
# From the step's parts to allocator requests.

@dataclass(frozen=True)
class TensorSizes:
    """What the parts of a step are made of, for the allocator model.

    ``tensors``: (component, what) -> the request size of every tensor of
    that part, where they are known tensor by tensor (weights, gradients,
    optimizer state: one request per parameter tensor and state); it gives
    the rounding of each request. ``blocks``: the same parts as the replay
    sees them, a decoder layer's tensors of one part taken together (one
    block per layer and part; embedding, head and other single tensors
    apart). Parts not listed: a part named "stored per layer..." is cut
    into one block per decoder layer (``layers``); any other part is one block.
    """

    tensors: Mapping[tuple[str, str], tuple[int, ...]]
    blocks: Mapping[tuple[str, str], tuple[int, ...]]
    layers: int

    def requests(self, component: str, what: str, amount: float, layer_unit: float) -> list[int]:
        blocks = self.blocks.get((component, what))
        if blocks is not None and abs(sum(blocks) - amount) <= len(self.tensors.get((component, what), blocks)):
            return list(blocks)
        amount = int(math.ceil(amount))
        if what.startswith("stored per layer") and layer_unit > 0:
            return _chunks(amount, max(MIN_BLOCK, int(math.ceil(layer_unit))))
        return [amount] if amount > 0 else []

    def rounding(self, component: str, what: str, amount: float) -> int:
        """What rounding each of the part's tensors to the allocator's 512-byte blocks adds (0 when not listed)."""
        tensors = self.tensors.get((component, what))
        if tensors is None or abs(sum(tensors) - amount) > len(tensors):
            return 0
        return sum(round_size(t) - t for t in tensors)


def _chunks(amount: int, unit: int) -> list[int]:
    if amount <= 0:
        return []
    whole, rest = divmod(amount, unit)
    return [unit] * whole + ([rest] if rest else [])


@dataclass(frozen=True)
class StepPeaks:
    """What PyTorch's allocator holds for one step's tensors on one device (library workspaces not included).

    ``live``: the live tensor bytes at the peak; ``allocated``: the
    allocator's peak of handed-out blocks; ``reserved``: its peak of
    segments; ``modelled``: False when no allocator model was run (a
    measured step without its tensor sizes), so allocated and reserved
    stand at the live bytes.
    """

    live: int
    allocated: int
    reserved: int
    gpus: int = 1
    modelled: bool = True


def step_peaks(phases: Sequence[Sequence[tuple[str, str, float]]], sizes: TensorSizes, gpus: int,
               live: int | None = None, before: Sequence[Mapping[str, Sequence[int]]] = (),
               streams: Mapping[tuple[str, str], str] | None = None) -> StepPeaks:
    """Replays ``phases`` (each the parts alive at one moment of the step, in order) through ``AllocatorModel``.

    Two terms, both modelled: each tensor's rounding to 512-byte blocks, at the moment of the live peak
    (``TensorSizes.rounding``); and what the replay of the step's blocks (a layer's tensors of a part
    together, see ``TensorSizes``) adds: whole blocks handed out where the remainder is too small to split
    (allocated), and segments held while their blocks are free (reserved over allocated: the cache, which is
    fragmentation where a later request does not fit in it). The resolution is the moments of the step and
    one block per layer and part: inside a layer the order of requests is not replayed. ``before``: the
    states of loading and wrapping the model the step starts after (``replay``; ``load_cache``).
    ``streams``: (component, what) -> the stream that part's tensors are allocated on (``AllocatorModel``);
    parts not listed are on the compute stream.
    """
    if live is None:
        live = max((math.ceil(sum(a for _c, _w, a in parts)) for parts in phases), default=0)
    stored = [a for parts in phases for _c, w, a in parts if w.startswith("stored per layer")]
    layer_unit = max(stored, default=0) / max(sizes.layers, 1)
    states, peak_rounding, peak_live = [], 0, -1.0
    for parts in phases:
        state: dict[str, list[int]] = {}
        for component, what, amount in parts:
            state.setdefault(f"{component}: {what}", []).extend(sizes.requests(component, what, amount, layer_unit))
        states.append(tuple(sorted((name, tuple(sorted(Counter(v).items()))) for name, v in state.items())))
        moment = sum(a for _c, _w, a in parts)
        if moment > peak_live:
            peak_live = moment
            peak_rounding = sum(sizes.rounding(c, w, a) for c, w, a in parts)
    loading = tuple(tuple(sorted((name, tuple(sorted(Counter(v).items()))) for name, v in state.items()))
                    for state in before)
    on = tuple(sorted((f"{component}: {what}", stream) for (component, what), stream in (streams or {}).items()
                      if stream != COMPUTE))
    allocated, reserved = _replay_cached(tuple(states), loading, on)
    replay_live = max((sum(size * count for _name, items in state for size, count in items) for state in states),
                      default=0)
    allocated_over = peak_rounding + max(0, allocated - replay_live)
    return StepPeaks(live=live, allocated=live + allocated_over,
                     reserved=live + allocated_over + max(0, reserved - allocated), gpus=gpus)


_CACHE: dict = {}


def _replay_cached(key, loading=(), streams=()) -> tuple[int, int]:
    def unpack(states):
        return [{name: [size for size, count in items for _ in range(count)] for name, items in state}
                for state in states]
    if (key, loading, streams) not in _CACHE:
        if len(_CACHE) > 256:
            _CACHE.clear()
        _CACHE[key, loading, streams] = replay(unpack(key), before=unpack(loading), streams=dict(streams))
    return _CACHE[key, loading, streams]


# ---------------------------------------------------------------------------------------------------------------
# Per card generation: what the library workspaces take inside the allocator, and what lies outside it.

# cuBLAS's workspace is allocated through the caching allocator (aten/src/ATen/cuda/CublasHandlePool.cpp,
# pytorch/pytorch: getNewWorkspace() allocates getChosenWorkspaceSize() with CUDACachingAllocator), one per
# (handle, stream): a training step computes on one stream. Its default is ":4096:2:16:8" = 4096 KiB x 2 +
# 16 KiB x 8 = 8,519,680 bytes, and 32 MiB ("4096 x 8 KiB") on compute capability 9.0 (Hopper: H100, H200);
# the check is major == 9 and minor == 0, so Blackwell (B200, 10.0) and Ampere (A100, 8.0) get 8,519,680.
# cuBLASLt gets its own workspace of CUBLASLT_WORKSPACE_SIZE, default 1024 KiB, capped at cuBLAS's (same file).
# On ROCm (same file): hipBLAS 128 MiB on gfx94x/gfx95x (MI300X is gfx942), 32 MiB otherwise, and a separate
# hipBLASLt workspace of 76 MiB ("76*1024" KiB).
CUBLAS_DEFAULT = 4096 * 1024 * 2 + 16 * 1024 * 8
CUBLAS_SM90 = 4096 * 8 * 1024
CUBLASLT_DEFAULT = 1024 * 1024
HIPBLAS_GFX94 = 128 * MiB
HIPBLASLT_DEFAULT = 76 * MiB

# The CUDA context: an ALLOWANCE, not a measured figure. PyTorch's maintainers put a bare context at about
# 300 MB since CUDA 11.7's lazy module loading and over 1000 MB before it (pytorch/pytorch#107667); users see
# 200-700 MB on different machines (pytorch/pytorch#28113, #20532). A training step loads many more kernels
# than a bare context (GEMM, attention, optimizer, NCCL kernels), so the planner allows 512 MiB per card.
# No per-generation figure is published; the same allowance stands for every card until measured on it.
CONTEXT_ALLOWANCE = 512 * MiB

# NCCL/RCCL buffers, outside PyTorch's allocator (NCCL allocates them itself): NCCL_BUFFSIZE, "the size of the
# buffer used by NCCL when communicating data between pairs of GPUs", defaults to 4 MiB (NVIDIA NCCL user
# guide, Environment Variables; RCCL keeps NCCL's variables). NCCL picks the number of channels by topology;
# the planner ALLOWS 32 channels (NCCL_MAX_NCHANNELS' usual ceiling on NVLink/xGMI nodes) with a send and a
# receive peer each on a ring: 32 x 2 x 4 MiB = 256 MiB per card, with 2 cards or more. The LL/LL128 protocol
# buffers and NCCL's device-side structures are not figured apart: they are part of this allowance.
NCCL_BUFFSIZE = 4 * MiB
NCCL_CHANNELS_ALLOWANCE = 32
NCCL_PEERS_PER_CHANNEL = 2


@dataclass(frozen=True)
class Card:
    """One card generation, as far as memory outside the model's tensors goes."""

    key: str
    label: str
    stack: str  # cuda | rocm
    workspaces: tuple[tuple[str, int], ...]  # inside PyTorch's allocator
    context: int = CONTEXT_ALLOWANCE
    communication: str = "NCCL"


_CUDA_HOPPER = (("cuBLAS workspace", CUBLAS_SM90), ("cuBLASLt workspace", CUBLASLT_DEFAULT))
_CUDA_OTHER = (("cuBLAS workspace", CUBLAS_DEFAULT), ("cuBLASLt workspace", CUBLASLT_DEFAULT))
CARDS: Mapping[str, Card] = {
    "a100": Card("a100", "A100", "cuda", _CUDA_OTHER),
    "h100": Card("h100", "H100", "cuda", _CUDA_HOPPER),
    "h200": Card("h200", "H200", "cuda", _CUDA_HOPPER),
    "b200": Card("b200", "B200", "cuda", _CUDA_OTHER),
    "mi300x": Card("mi300x", "MI300X", "rocm", (("hipBLAS workspace", HIPBLAS_GFX94),
                                                ("hipBLASLt workspace", HIPBLASLT_DEFAULT)), communication="RCCL"),
}


def card_generation(*names: str) -> str | None:
    """The card generation a product's slug or name names (``"h100-sxm-80gb"`` -> ``"h100"``), or None."""
    for name in names:
        text = (name or "").lower().replace(" ", "")
        for key in CARDS:
            if key in text:
                return key
    return None


@dataclass(frozen=True)
class DeviceMeasures:
    """The three named measures of one device, and what lies between them."""

    card: str  # the generation's label, or "any card" for the largest of them
    allocated_peak_bytes: int
    reserved_peak_bytes: int
    device_used_bytes: int
    parts: tuple[tuple[str, int], ...]  # (what, bytes) from the live tensors up to device_used

    def to_json(self) -> dict:
        return {"card": self.card, "allocated_peak_bytes": self.allocated_peak_bytes,
                "reserved_peak_bytes": self.reserved_peak_bytes, "device_used_bytes": self.device_used_bytes}


def measures(step: StepPeaks, card: str | None = None, *, context: int | None = None, nccl: int | None = None,
             workspaces: bool = True) -> DeviceMeasures:
    """The three measures of ``step`` on a card of generation ``card``; None: the largest over the shop's cards.

    ``context`` and ``nccl`` replace the card's allowances when given; ``workspaces=False`` leaves the BLAS
    workspaces out (to compare with a measurement that has none)."""
    if card is None or card not in CARDS:
        each = [measures(step, key, context=context, nccl=nccl, workspaces=workspaces) for key in CARDS]
        worst = max(each, key=lambda m: m.device_used_bytes)
        return DeviceMeasures("any card", worst.allocated_peak_bytes, worst.reserved_peak_bytes,
                              worst.device_used_bytes, worst.parts)
    c = CARDS[card]
    spaces = [(what, round_size(size), segment_size(round_size(size))) for what, size in c.workspaces] \
        if workspaces else []
    allocated = step.allocated + sum(a for _w, a, _r in spaces)
    reserved = step.reserved + sum(r for _w, _a, r in spaces)
    stack = "CUDA" if c.stack == "cuda" else "ROCm"
    outside = [(f"{stack} context (allowance)", c.context if context is None else context)]
    if step.gpus > 1:
        outside.append((f"{c.communication} buffers (allowance)",
                        NCCL_CHANNELS_ALLOWANCE * NCCL_PEERS_PER_CHANNEL * NCCL_BUFFSIZE if nccl is None else nccl))
    parts = [("allocator rounding (allocated peak over live peak)", step.allocated - step.live)]
    parts += [(f"{what} (in the allocator)", a) for what, a, _r in spaces]
    parts += [("allocator cache (segments held beyond allocated blocks)", reserved - allocated)]
    parts += outside
    return DeviceMeasures(c.label, allocated, reserved, reserved + sum(b for _w, b in outside),
                          tuple((w, int(b)) for w, b in parts if b))
