"""``ops.gc_tuning``: a server process freezes what it has loaded out of the collector's walks, collects less
often, and reports every pause."""

from __future__ import annotations

import gc
import sys

import pytest

from anchorgpu.ops import gc_tuning
from anchorgpu.ops.metrics import REGISTRY

# A collection may finalise objects that close database cursors: the tests allow the database for that.
pytestmark = pytest.mark.django_db


@pytest.fixture
def collector():
    """The test process's collector as it was, whatever the test does to it."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    if gc_tuning._measure in gc.callbacks:
        gc.callbacks.remove(gc_tuning._measure)


def _pauses(generation: str) -> float:
    return REGISTRY.get_sample_value("anchorgpu_gc_pause_seconds_count", {"generation": generation}) or 0.0


def test_a_tuned_process_has_frozen_the_shop_and_collects_less_often(collector, settings):
    settings.ANCHORGPU_GC_TUNING = True
    assert gc.get_freeze_count() == 0
    assert gc_tuning.tune() is True
    assert {settings.ROOT_URLCONF, "anchorgpu.web.views", "anchorgpu.web.api_orders"} <= set(sys.modules)
    assert gc.get_freeze_count() > 50_000  # Django, the shop and its libraries
    assert gc.get_threshold() == gc_tuning.THRESHOLDS


def test_with_tuning_off_the_collector_keeps_its_settings_and_pauses_are_still_measured(collector, settings):
    settings.ANCHORGPU_GC_TUNING = False
    before_thresholds = gc.get_threshold()
    before = _pauses("2")
    assert gc_tuning.tune() is False
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before_thresholds
    gc.collect()
    assert _pauses("2") == before + 1
    gc_tuning.measure_pauses()  # a second call does not measure twice
    gc.collect(1)
    assert gc.callbacks.count(gc_tuning._measure) == 1
    assert REGISTRY.get_sample_value("anchorgpu_gc_pause_seconds_sum", {"generation": "1"}) > 0
