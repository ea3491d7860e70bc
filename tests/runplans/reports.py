"""Pilot reports for the shop's tests: a real report the kit wrote on the CPU, turned into one from a GPU."""

from __future__ import annotations

import copy
import json
from pathlib import Path

CPU_REPORT = Path(__file__).resolve().parents[1] / "pilot" / "fixtures" / "report_cpu_tiny_llama.json"
GiB = 2**30


def gpu_report(*, device: str = "NVIDIA H100 80GB HBM3", count: int = 1, tokens_per_s: float = 3000.0,
               peak_gib: float = 61.5, restore_passed: bool | None = True) -> dict:
    """The CPU report as if it had run on ``count`` × ``device``: the figures the shop reads, changed."""
    report = copy.deepcopy(json.loads(CPU_REPORT.read_text()))
    report["device"] = {"type": "cuda", "count": count}
    report["versions"].update(device=device, cuda="12.8", torch="2.13.0+cu128")
    report["tokens_per_s"] = tokens_per_s
    report["throughput"]["tokens_per_s"] = tokens_per_s
    peak = int(peak_gib * GiB)
    report["memory"] = {"peak_allocated": {"bytes": peak, "source": "torch.cuda.max_memory_allocated"},
                        "over_steps": [{"step": i, "allocated": peak - (2 - i) * GiB} for i in range(3)]}
    report["checkpoint"].update(bytes=16 * GiB, write_s=45.0)
    if restore_passed is False:
        report["restore"].update(passed=False, first_difference={"what": "optimizer.state.3.exp_avg",
                                                                 "expected": "1.25e-3", "found": "0.0"})
    elif restore_passed is None:
        report["restore"].update(passed=None, skipped="--no-restore was given")
    return report


def as_bytes(report: dict) -> bytes:
    return json.dumps(report).encode()
