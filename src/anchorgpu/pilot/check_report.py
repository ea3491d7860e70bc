"""The stack check's report: its JSON, the readable text, and the short lines a pilot summary shows.

Pure Python (no torch), so a saved check or pilot report can be read anywhere.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

from .errors import PilotInputError
from .stack import StackRecord
from .stack_rules import FAIL, OK, WARN, Verdict

CHECK_KIND = "anchorgpu-pilot-check"
CHECK_SCHEMA = 1
GiB = 1024**3
MARKS = {OK: "ok  ", WARN: "WARN", FAIL: "FAIL"}


def stack_section(record: StackRecord, verdict: Verdict) -> dict:
    """The ``stack`` object of a check report and of a pilot report: the record and the verdict on it."""
    return {**record.to_json(), "verdict": verdict.to_json()}


def check_report(record: StackRecord, verdict: Verdict, operations: list, ops_note: str | None) -> dict:
    return {
        "schema_version": CHECK_SCHEMA,
        "kind": CHECK_KIND,
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
        "command": sys.argv,
        "passed": verdict.passed and all(op.passed for op in operations),
        "stack": stack_section(record, verdict),
        "operations": [op.to_json() for op in operations],
        "operations_note": ops_note,
    }


def write_json(report: dict, path: str) -> None:
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
        partial.replace(target)
    except OSError as exc:
        raise PilotInputError("json", f"{path} cannot be written ({exc.strerror or exc}).") from None


def load_record(path: str) -> StackRecord:
    """A stack record from a file: a bare record, or the ``stack`` of a check or pilot report."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PilotInputError("record", f"{path} cannot be read ({exc.strerror or exc}).") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PilotInputError("record", f"{path} is not JSON ({exc}).") from None
    if isinstance(data, dict) and isinstance(data.get("stack"), dict):
        data = data["stack"]
    if not isinstance(data, dict) or "record_version" not in data:
        raise PilotInputError("record", f"{path} is not a stack record (nor a report that holds one).")
    try:
        return StackRecord.from_json(data)
    except (TypeError, ValueError) as exc:
        raise PilotInputError("record", f"{path} is not a readable stack record ({exc}).") from None


def _gib(value) -> str:
    return "memory unknown" if value is None else f"{value / GiB:.1f} GiB"


def device_lines(record: StackRecord) -> list[str]:
    lines = []
    for d in record.devices:
        arch = d.arch or (f"compute capability {d.capability}" if d.capability else "architecture unknown")
        where = ", ".join(part for part in (
            f"bus {d.pci_bus_id}" if d.pci_bus_id else "",
            f"NUMA node {d.numa_node}" if d.numa_node is not None else "",
            f"{d.nvlink_active_links} NVLinks active" if d.nvlink_active_links is not None else "",
            f"uuid {d.uuid}" if d.uuid else "") if part)
        lines.append(f"  GPU{d.index}  {d.name}  {_gib(d.total_memory)}  {arch}" + (f"  ({where})" if where else ""))
    if not record.devices:
        lines.append("  PyTorch sees no GPU")
    seen = {d.pci_bus_id for d in record.devices}
    for b in record.bus:
        if b.bus_id not in seen:
            lines.append(f"  on the PCI bus: {b.vendor} {b.name or 'GPU'} at {b.bus_id}"
                         + (f", NUMA node {b.numa_node}" if b.numa_node is not None else ""))
    return lines


def software_line(record: StackRecord) -> str:
    if record.torch_version is None:
        return f"PyTorch not importable ({record.torch_error})"
    runtime = {"cuda": f"CUDA {record.cuda_runtime}", "rocm": f"ROCm/HIP {record.hip_runtime}",
               "cpu": "CPU-only build"}[record.build]
    parts = [f"PyTorch {record.torch_version} ({runtime})",
             f"driver {record.driver or 'unknown'}"]
    if record.collective:
        parts.append(f"{record.collective_name} {record.collective.get('version')}")
    if record.cudnn:
        parts.append(f"cuDNN {record.cudnn}")
    return ", ".join(parts)


def topology_lines(record: StackRecord) -> list[str]:
    topology = record.topology or {}
    links = topology.get("links") or {}
    if not links:
        return [f"  unknown ({record.unknown.get('topology', 'not probed')})"] if len(record.devices) > 1 else []
    lines = [f"  from {topology.get('source')}"]
    done = set()
    for gpu, row in links.items():
        pairs = [f"{peer} {kind}" for peer, kind in row.items() if (peer, gpu) not in done]
        done.update((gpu, peer) for peer in row)
        numa = (topology.get("numa_affinity") or {}).get(gpu)
        parts = pairs + ([f"NUMA affinity {numa}"] if numa is not None else [])
        if parts:
            lines.append(f"  {gpu}: " + ", ".join(parts))
    return lines


def _op_line(op: dict) -> str:
    detail = op.get("detail") or {}
    facts = []
    if "relative_error" in detail:
        facts.append(f"error {detail['relative_error']:.1e}")
    if detail.get("tflops"):
        tflops = detail["tflops"]
        facts.append(f"{tflops:.1f} TFLOP/s" if tflops >= 1 else f"{tflops * 1000:.1f} GFLOP/s")
    if "relative_errors" in detail:
        facts.append(f"worst error {max(detail['relative_errors'].values()):.1e}")
    if detail.get("bus_gbps"):
        facts.append(f"{detail['backend']}, bus {detail['bus_gbps']:.1f} GB/s")
    if detail.get("file"):
        facts.append(str(detail["file"]))
    text = f"  {'PASS' if op['passed'] else 'FAIL'}  {op['name']:<24} {op['device']:<8} {op['seconds']:7.2f} s"
    text += ("  " + ", ".join(facts)) if facts else ""
    return text + (f"\n        {op['error']}" if op.get("error") else "")


def render(report: dict) -> str:
    stack = report["stack"]
    record, verdict = StackRecord.from_json(stack), stack["verdict"]
    lines = [f"Stack check on {record.host or 'this machine'} ({record.source})", "Accelerators"]
    lines += device_lines(record)
    lines += ["Software", "  " + software_line(record)]
    if record.arch_list:
        lines.append(f"  compiled for: {' '.join(record.arch_list)}")
    topology = topology_lines(record)
    if topology:
        lines += ["Topology"] + topology
    if record.unknown:
        lines += ["Not found out"] + [f"  {what}: {why}" for what, why in record.unknown.items()]
    lines += ["Findings"] + [f"  {MARKS[f['level']]}  {f['message']}" for f in verdict["findings"]]
    operations = report.get("operations") or []
    if operations or report.get("operations_note"):
        lines.append("Operations" + (f": {report['operations_note']}" if report.get("operations_note") else ""))
        lines += [_op_line(op) for op in operations]
    failures = sum(f["level"] == FAIL for f in verdict["findings"]) + sum(not op["passed"] for op in operations)
    warnings = sum(f["level"] == WARN for f in verdict["findings"])
    lines.append(f"Result: {'PASSED' if report['passed'] else 'FAILED'} ({failures} failure(s), "
                 f"{warnings} warning(s))")
    return "\n".join(lines)


def brief_lines(stack: dict) -> list[tuple[str, str]]:
    """Two or three (label, text) lines for a pilot report's summary."""
    if stack.get("error"):
        return [("stack", str(stack["error"]))]
    try:
        record = StackRecord.from_json(stack)
    except (TypeError, ValueError):
        return [("stack", "unreadable stack record")]
    names = sorted({d.name for d in record.devices})
    cards = (f"{len(record.devices)} x {', '.join(names)} ({_gib(record.devices[0].total_memory)})"
             if record.devices else "no GPU visible to PyTorch")
    lines = [("stack", software_line(record)), ("devices", cards)]
    verdict = stack.get("verdict") or {}
    failures = [f["message"] for f in verdict.get("findings", []) if f.get("level") == FAIL]
    warnings = [f["message"] for f in verdict.get("findings", []) if f.get("level") == WARN]
    if verdict:
        text = "passed" if not failures else f"FAILED: {failures[0]}" + (
            f" (and {len(failures) - 1} more)" if len(failures) > 1 else "")
        lines.append(("stack check", text + (f"; {len(warnings)} warning(s)" if warnings else "")))
    return lines
