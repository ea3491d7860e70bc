"""How long Python's garbage collector stops a server process: ``anchorgpu_gc_pause_seconds`` at /metrics.

A collection stops every thread of the process while it walks the objects that can hold references, so
its pauses add to the latency of every request in flight in that process. ``measure_pauses()`` (called once
by the WSGI module) times each collection, by generation.

The collector itself is left at the interpreter's defaults. Issue 22 measured the tuning the shop used to
apply (the loaded code frozen out of the walks with ``gc.freeze()``, thresholds 5,000 / 20 / 100) side by
side with the defaults in bench/load.py, five pairs of runs (docs/benchmarks.md, "Issue 22: load before and
after"): no gain in throughput nor in the mixed load's p95 for the catalog and the offers; the catalog's p99
with 50 clients back to back was 4–82 ms lower tuned, the orders' p95 at the mixed load higher in four pairs
of five. Not worth its code; this histogram is where a change would show first.
"""

from __future__ import annotations

import gc
import time

from prometheus_client import Histogram

from .metrics import REGISTRY

GC_PAUSE_SECONDS = Histogram(
    "anchorgpu_gc_pause_seconds", "Time the garbage collector stopped this process, by generation.",
    ["generation"], registry=REGISTRY, buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0))

_started: list[float] = []


def _measure(phase: str, info: dict) -> None:
    if phase == "start":
        _started[:] = [time.perf_counter()]
    elif _started:
        GC_PAUSE_SECONDS.labels(str(info.get("generation", "?"))).observe(time.perf_counter() - _started[0])
        _started.clear()


def measure_pauses() -> None:
    """Time every collection of this process from now on (once, however often it is called)."""
    if _measure not in gc.callbacks:
        gc.callbacks.append(_measure)
