"""The prepared GPU script must work the day a GPU is lent: its CPU smoke mode runs the same plumbing."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_validation.py"


def test_the_gpu_validation_script_runs_on_the_cpu():
    done = subprocess.run([sys.executable, str(SCRIPT), "--cpu-smoke"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| LoRA")]
    assert len(rows) == 2 and all("(+0.0%)" in row for row in rows)  # the real CPU step equals the simulation
    assert done.stdout.count("restore passed") == 2
