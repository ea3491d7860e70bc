"""Python's garbage collector in a server process: fewer and shorter pauses.

A collection of the oldest generation stops every thread of the process while it walks every object that
can hold references, and the loaded code alone (Django, the shop, the crypto and chain libraries) is some
160,000 of them. In bench/load.py's gunicorn workers with the interpreter's defaults (thresholds 700, 10,
10), a short run logged 15 such collections of 180 to 530 ms each: every request in flight in that process
waited for them. Tuned as below, the longest pauses of two like runs were 94 and 170 ms (docs/benchmarks.md).

``tune()`` runs once a server process has loaded the shop:

* it imports the URL configuration, and with it every view and what they import, which Django otherwise
  does at the first request;
* ``gc.freeze()`` then moves every object alive at that point to the permanent generation, which no
  collection walks (nor frees: they are the code and settings the process keeps until it exits);
* ``gc.set_threshold(*THRESHOLDS)``: the youngest generation is collected after 5,000 new objects instead of
  700, and the oldest after 100 collections of the middle one instead of 10. Most of a request's objects are
  freed by reference counting before any collection sees them; what the collector must find is the few
  reference cycles, and fewer collections find them as well.

Cyclic garbage is still collected, later. Over a full run of the bench a worker process grew from 127 to
141 MB tuned, and from 127 to 135 MB with the defaults. ``ANCHORGPU_GC_TUNING=0`` keeps the defaults. Each
collection's pause is measured either way: ``anchorgpu_gc_pause_seconds`` at /metrics, by generation.
"""

from __future__ import annotations

import gc
import time

from django.conf import settings
from prometheus_client import Histogram

from .metrics import REGISTRY

THRESHOLDS = (5000, 20, 100)
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
    if _measure not in gc.callbacks:
        gc.callbacks.append(_measure)


def tune() -> bool:
    """Measure the collector's pauses and, unless ``ANCHORGPU_GC_TUNING`` is off, freeze what is loaded and
    raise the thresholds. Returns whether it tuned."""
    measure_pauses()
    if not settings.ANCHORGPU_GC_TUNING:
        return False
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imports the URL configuration and the views
    gc.collect()  # what is garbage now is not frozen
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    return True
