"""``ops.gc_pauses``: every pause of the garbage collector is measured, by generation, and the collector
itself is left at the interpreter's settings."""

from __future__ import annotations

import gc

import pytest

from anchorgpu.ops import gc_pauses
from anchorgpu.ops.metrics import REGISTRY

# A collection may finalise objects that close database cursors: the tests allow the database for that.
pytestmark = pytest.mark.django_db


@pytest.fixture
def measuring():
    """The test process's collector callbacks as they were, whatever the test does to them."""
    was_measuring = gc_pauses._measure in gc.callbacks
    yield
    if not was_measuring and gc_pauses._measure in gc.callbacks:
        gc.callbacks.remove(gc_pauses._measure)


def _pauses(generation: str) -> float:
    return REGISTRY.get_sample_value("anchorgpu_gc_pause_seconds_count", {"generation": generation}) or 0.0


def test_every_collection_is_measured_once_and_the_collector_keeps_its_settings(measuring):
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    gc_pauses.measure_pauses()
    gc_pauses.measure_pauses()  # a second call does not measure twice
    assert gc.callbacks.count(gc_pauses._measure) == 1
    assert gc.get_threshold() == thresholds and gc.get_freeze_count() == frozen
    before = _pauses("2")
    gc.collect()
    assert _pauses("2") == before + 1
    gc.collect(1)
    assert REGISTRY.get_sample_value("anchorgpu_gc_pause_seconds_sum", {"generation": "1"}) > 0


def test_the_wsgi_module_measures_the_pauses(measuring):
    import anchorgpu.wsgi  # noqa: F401 - loading it is what a server process does

    assert gc_pauses._measure in gc.callbacks
