"""bench/planner_accuracy.py runs end to end on two tiny configurations and prints its table."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "planner_accuracy.py"


def test_the_accuracy_bench_runs_on_two_configurations():
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke"], capture_output=True, text=True, timeout=300)
    out = done.stdout
    assert done.returncode in (0, 1), done.stderr[-3000:]
    rows = [line for line in out.splitlines() if line.startswith("| tiny-")]
    assert len(rows) == 2, out
    assert all(line.count("|") == 7 for line in rows)
    # The simulation is the real run's step on fake tensors: it must hold in any case.
    assert "simulation vs real tracked peak: max |error| 0.000 %" in out, out
    assert "analytic vs simulation: median |error|" in out and "accelerate's formula" in out
    assert ("Targets met" in out) == (done.returncode == 0)
