"""The arithmetic of the report and its summary, without a training run."""

import json

import pytest

from anchorgpu.pilot.errors import PilotInputError
from anchorgpu.pilot.run import percentile, spread
from anchorgpu.pilot.summary import histogram, load_report


def test_percentiles_interpolate_between_ranks_like_numpy():
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert percentile(values, 0.5) == 3.0 and percentile(values, 0.9) == pytest.approx(7.6)
    assert percentile([5.0], 0.9) == 5.0


def test_spread_reports_the_range_against_the_median():
    figures = spread([0.10, 0.11, 0.12, 0.20])
    assert figures["median"] == pytest.approx(0.115) and figures["min"] == 0.10 and figures["max"] == 0.20
    assert figures["spread"] == pytest.approx(0.10 / 0.115) and figures["per_step"] == [0.10, 0.11, 0.12, 0.20]


def test_the_histogram_counts_every_step_once():
    bins = histogram([0.1, 0.1, 0.2, 0.3, 0.3, 0.3], bins=3)
    assert [count for _low, _high, count in bins] == [2, 1, 3]
    assert bins[0][0] == 0.1 and bins[-1][1] == pytest.approx(0.3)
    assert sum(c for _a, _b, c in histogram([0.5] * 4, bins=4)) == 4  # all equal: no division by zero


def test_a_report_of_another_schema_is_refused_with_the_versions(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"kind": "anchorgpu-pilot-report", "schema_version": 99}))
    with pytest.raises(PilotInputError, match="schema version 99"):
        load_report(str(path))
