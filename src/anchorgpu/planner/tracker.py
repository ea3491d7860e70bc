"""Live tensor bytes of a PyTorch program, counted by storage: the measuring tape of the simulation.

``StorageTracker`` is a ``TorchDispatchMode``: every operator's output
storages are counted once (by storage identity, so views and in-place
results add nothing) and uncounted by a weakref finalizer when the storage
dies. It works the same on real tensors and on ``FakeTensor`` (no memory
behind them), so a real CPU run and a simulated run are measured by the
same code.

Each storage carries a category. New storages are ``temporaries`` (or the
tracker's current ``default`` category); the caller retags storages as
``weights``, ``gradients``, ``optimizer`` or ``activations`` with
``tag()``. At every new peak the per-category totals are copied, so the
breakdown at the peak costs a dict copy, not a walk over the model. A
storage retagged from its default category after the peak was reached,
but allocated before it, is moved in the peak's breakdown too: a gradient
or a saved activation is tagged a moment after the operator that makes it,
and it counts in its role.

A storage can also change size in place: FSDP2 keeps each unsharded
parameter's storage across steps and frees it with
``untyped_storage().resize_(0)`` after use, then grows it again before the
next all-gather. That call goes to C++ without passing the dispatcher, so
while a tracker is active ``UntypedStorage.resize_`` is wrapped and the
change in size is counted as an allocation or a free of the difference.

Requires torch (imported by the simulation only; the rest of the planner
stays pure Python).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

CATEGORIES = ("weights", "gradients", "optimizer", "activations", "temporaries")

_aten = torch.ops.aten
# Copies of a weight (autocast's bf16 cast) count as weights, copies of a gradient (FSDP's fp32 copy of a
# bf16 gradient for the reduction) as gradients.
_COPIED_ROLES = ("weights", "gradients")
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_COPY_OPS = {_aten._to_copy.default, _aten.clone.default}


class StorageTracker(TorchDispatchMode):
    """Counts live storage bytes of tensors created while it is active, by category, with their peak."""

    def __init__(self):
        super().__init__()
        self.current = 0
        self.peak = 0
        self.peak_label = ""
        self.default = "temporaries"
        self.label = ""  # what the program is doing (set by the caller), recorded with the peak
        self.totals = dict.fromkeys(CATEGORIES, 0)
        self.peak_totals = dict(self.totals)
        self._live: dict[int, list] = {}  # storage key -> [nbytes, category, sequence number, default category]
        self._seq = 0
        self._peak_seq = -1
        self.phase_peaks: dict[str, int] = {}  # label -> highest live bytes seen under it
        # label -> [category totals at that label's peak, sequence number then] (kept as ``peak_totals``)
        self.phase_totals: dict[str, list] = {}
        self._uncounted = 0

    def __enter__(self):
        _watch_resizes(self)
        return super().__enter__()

    def __exit__(self, *exc):
        _unwatch_resizes(self)
        return super().__exit__(*exc)

    # -- counting ---------------------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is _aten._local_scalar_dense.default and _is_fake(args[0]):
            return _fake_scalar(args[0])
        out = func(*args, **(kwargs or {}))
        if self._uncounted:
            return out
        category = None
        if func in _COPY_OPS and args and isinstance(args[0], torch.Tensor):
            source = self._live.get(_key(args[0]))
            if source is not None and source[1] in _COPIED_ROLES:
                category = source[1]
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self._add(leaf, category)
        return out

    def _add(self, tensor: torch.Tensor, category: str | None) -> None:
        inner = _inner(tensor)
        if inner is not None:  # a wrapper subclass (DTensor): its own storage holds nothing, its parts do
            for part in inner:
                self._add(part, category)
            return
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key in self._live:
            return
        nbytes = storage.nbytes()
        category = category or self.default
        self._seq += 1
        self._live[key] = [nbytes, category, self._seq, category]
        weakref.finalize(storage, self._free, key)
        self._grow(category, nbytes)

    def _resized(self, storage) -> None:
        entry = self._live.get(storage._cdata)
        if entry is None:  # not created under this tracker
            return
        change = storage.nbytes() - entry[0]
        entry[0] += change
        self._grow(entry[1], change)

    def _grow(self, category: str, nbytes: int) -> None:
        self.totals[category] += nbytes
        self.current += nbytes
        if nbytes < 0:  # a storage shrunk: no new peak
            return
        if self.current > self.phase_peaks.get(self.label, 0):
            self.phase_peaks[self.label] = self.current
            self.phase_totals[self.label] = [dict(self.totals), self._seq]
        if self.current > self.peak:
            self.peak = self.current
            self.peak_totals = dict(self.totals)
            self.peak_label = self.label
            self._peak_seq = self._seq

    def _free(self, key: int) -> None:
        entry = self._live.pop(key, None)
        if entry is not None:
            self.current -= entry[0]
            self.totals[entry[1]] -= entry[0]

    @contextlib.contextmanager
    def uncounted(self):
        """Storages that first appear inside this block are not counted.

        For a collective's own buffers: gloo's reduce-scatter copies its whole input in C++ (unseen) and
        then splits the copy (seen, as a storage never counted before). On a GPU such buffers are NCCL's,
        outside PyTorch's allocator (the reserve's "NCCL buffers"), and the fake process group makes none."""
        self._uncounted += 1
        try:
            yield
        finally:
            self._uncounted -= 1

    def watch(self, tensors: Iterable[Any], category: str | None = None) -> None:
        """Counts tensors that existed before the tracker was active (no-op for those already counted)."""
        for leaf in tree_leaves(list(tensors)):
            if isinstance(leaf, torch.Tensor):
                self._add(leaf, category)

    # -- categories -------------------------------------------------------------------------------

    def tag(self, tensors: Iterable[Any], category: str, *, only_from: str | None = None) -> None:
        """Puts the storages of ``tensors`` (any nesting of tensors) in ``category``.

        With ``only_from``, only storages now in that category are moved."""
        assert category in CATEGORIES, category
        for leaf in tree_leaves(list(tensors)):
            if not isinstance(leaf, torch.Tensor):
                continue
            inner = _inner(leaf)
            if inner is not None:
                self.tag(inner, category, only_from=only_from)
                continue
            entry = self._live.get(_key(leaf))
            if entry is None or entry[1] == category or (only_from is not None and entry[1] != only_from):
                continue
            nbytes, old, seq, first = entry
            self.totals[old] -= nbytes
            self.totals[category] += nbytes
            # Live at the peak (allocated before it, alive since) and still in its first role: count it
            # in the role it takes.
            if seq <= self._peak_seq and old == first:
                self.peak_totals[old] -= nbytes
                self.peak_totals[category] += nbytes
            if old == first:
                for totals, phase_seq in self.phase_totals.values():
                    if seq <= phase_seq:
                        totals[old] -= nbytes
                        totals[category] += nbytes
            entry[1] = category

    def category_of(self, tensor: torch.Tensor) -> str | None:
        inner = _inner(tensor)
        entry = self._live.get(_key(inner[0] if inner else tensor))
        return entry[1] if entry else None

    def reset_peak(self) -> None:
        """Starts a new measurement from what is live now."""
        self.peak = self.current
        self.peak_totals = dict(self.totals)
        self.peak_label = self.label
        self._peak_seq = self._seq

    def clear_phases(self) -> None:
        """Forgets the peaks of each label (a new measurement starts)."""
        self.phase_peaks.clear()
        self.phase_totals.clear()

    def check(self) -> None:
        """The totals agree with the live storages (a self-test)."""
        assert self.current == sum(e[0] for e in self._live.values())
        assert sum(self.totals.values()) == self.current
        assert sum(self.peak_totals.values()) == self.peak
        for label, (totals, _seq) in self.phase_totals.items():
            assert sum(totals.values()) == self.phase_peaks[label], label


_RESIZE_WATCHERS: list[StorageTracker] = []
_C_RESIZE = torch._C.StorageBase.resize_


def _tracked_resize(storage, size):
    result = _C_RESIZE(storage, size)
    for tracker in _RESIZE_WATCHERS:
        tracker._resized(storage)
    return result


def _watch_resizes(tracker: StorageTracker) -> None:
    """While a tracker is active, in-place storage resizes (FSDP2's free and re-allocation) are counted."""
    if not _RESIZE_WATCHERS:
        torch.UntypedStorage.resize_ = _tracked_resize
    _RESIZE_WATCHERS.append(tracker)


def _unwatch_resizes(tracker: StorageTracker) -> None:
    if tracker in _RESIZE_WATCHERS:
        _RESIZE_WATCHERS.remove(tracker)
    if not _RESIZE_WATCHERS and "resize_" in vars(torch.UntypedStorage):
        del torch.UntypedStorage.resize_  # back to the C method


def _inner(tensor: torch.Tensor) -> list[torch.Tensor] | None:
    """The tensors inside a traceable wrapper subclass such as DTensor; None for a plain (or fake) tensor."""
    if type(tensor) in _PLAIN or not hasattr(tensor, "__tensor_flatten__"):
        return None
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(tensor, FakeTensor):
        return None
    names, _context = tensor.__tensor_flatten__()
    return [part for part in (getattr(tensor, name) for name in names) if isinstance(part, torch.Tensor)]


def _is_fake(tensor: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(tensor, FakeTensor)


def _fake_scalar(tensor: torch.Tensor):
    """``.item()`` of a fake tensor: its value where the fake mode knows it, else 1.

    Optimizers read scalars (a step count, Adafactor's norms) to compute step sizes; the value
    changes no tensor's size, so a stand-in keeps the simulation going without allocating.
    """
    constant = getattr(tensor, "constant", None)
    if constant is not None:
        return constant.item()
    if tensor.dtype == torch.bool:
        return True
    return 1 if not (tensor.dtype.is_floating_point or tensor.dtype.is_complex) else 1.0


def _key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata
