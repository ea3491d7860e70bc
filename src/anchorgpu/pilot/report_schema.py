"""Checking a pilot report a customer uploads, and the few figures the shop takes from it.

Pure Python: no torch, no Django. ``read_report(data)`` takes the file's bytes
and returns the report (a dict) or raises ``ReportRejected`` with a stable
``code`` and an English message; ``summarise(report)`` picks the key figures;
``validate_report(data)`` does both. The checks, in order:

    too_large     more than ``MAX_REPORT_BYTES`` (2 MiB)
    not_utf8      the bytes are not UTF-8 text
    truncated     JSON that stops before its end (a cut upload or copy)
    not_json      anything else that is not JSON
    not_a_report  JSON, but not an object with ``kind`` "anchorgpu-pilot-report"
    schema_version  a schema version this code does not read
    scale_report  the report of ``pilot scale`` (settings per process count), not of ``pilot run``
    missing_field a required field is absent (``field`` names it, dotted)
    bad_type      a field has the wrong type
    bad_value     a field has an impossible value (a negative time, no throughput)

A report may carry a ``stack`` object (the software stack ``pilot check``
records); it is optional and passed through as it is.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from anchorgpu.json_depth import too_deep

REPORT_KIND = "anchorgpu-pilot-report"
SUPPORTED_SCHEMAS = (1,)
MAX_REPORT_BYTES = 2 * 1024 * 1024
MAX_NESTING = 64  # a report nests about 5 levels deep


class ReportRejected(ValueError):
    """An uploaded file that is not a usable pilot report; ``code`` says why, ``message`` in English."""

    def __init__(self, code: str, message: str, *, field: str | None = None):
        self.code = code
        self.message = message
        self.field = field
        super().__init__(message)


def _reject_type(path: str, wanted: str, value: Any) -> ReportRejected:
    return ReportRejected("bad_type", f"{path} must be {wanted}, not {type(value).__name__}.", field=path)


def read_report(data: bytes, *, max_bytes: int | None = MAX_REPORT_BYTES) -> dict:
    """The report in ``data``, checked; ``max_bytes`` None reads any size (a local file)."""
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("read_report takes the file's bytes")
    if max_bytes is not None and len(data) > max_bytes:
        raise ReportRejected("too_large", f"the file has {len(data):,} bytes; a pilot report may have at most "
                                          f"{max_bytes:,}.")
    try:
        text = bytes(data).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReportRejected("not_utf8", f"the file is not UTF-8 text (byte {exc.start} is not valid).") from None
    if not text.strip():
        raise ReportRejected("not_json", "the file is empty.")
    if too_deep(data, MAX_NESTING):  # before parsing: the parser recurses, and can crash on very deep input
        raise ReportRejected("not_json", f"the file's JSON nests more than {MAX_NESTING} levels deep; a pilot "
                                         "report does not.")
    try:
        report = json.loads(text)
    except json.JSONDecodeError as exc:
        if _cut_short(text, exc):
            raise ReportRejected("truncated", "the file ends in the middle of the report: it was cut short "
                                              "(upload the whole file).") from None
        raise ReportRejected("not_json", f"the file is not JSON ({exc.msg} at line {exc.lineno}, column "
                                         f"{exc.colno}).") from None
    except RecursionError:
        raise ReportRejected("not_json", "the file's JSON is nested too deeply to be a pilot report.") from None
    if not isinstance(report, dict) or report.get("kind") != REPORT_KIND:
        raise ReportRejected("not_a_report", "the file is JSON but not a pilot report (no \"kind\": "
                                             f"\"{REPORT_KIND}\").")
    version = report.get("schema_version")
    if isinstance(version, bool) or version not in SUPPORTED_SCHEMAS:
        raise ReportRejected("schema_version", f"the report has schema version {version!r}; this version reads "
                                               f"{', '.join(map(str, SUPPORTED_SCHEMAS))}.", field="schema_version")
    if "settings" in report and "step_time_s" not in report:
        raise ReportRejected("scale_report", "this is the report of `anchorgpu pilot scale`; upload the report of "
                                             "`anchorgpu pilot run`.")
    _check_fields(report)
    return report


_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")


def _cut_short(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether the decoder stopped because the text ended: a string left open, nothing left, or the start of a
    literal or of a number's fraction or exponent (``1.``, ``2e``) where the text ends."""
    if exc.msg.startswith("Unterminated string"):
        return True
    if exc.msg.startswith("Extra data"):
        return False
    rest = text[exc.pos:].rstrip()
    return not rest or any(word.startswith(rest) for word in _LITERALS) or re.fullmatch(r"[-+.eE]+", rest) is not None


# Required fields of a schema-1 report of ``pilot run``: dotted path -> kind of value.
_NUMBER, _COUNT, _TEXT, _OBJECT, _LIST = "a number", "a whole number", "a string", "an object", "a list"
REQUIRED: Mapping[str, str] = {
    "created_at": _TEXT,
    "tokens_per_s": _NUMBER,
    "step_time_s": _OBJECT, "step_time_s.median": _NUMBER, "step_time_s.p90": _NUMBER,
    "step_time_s.min": _NUMBER, "step_time_s.max": _NUMBER, "step_time_s.spread": _NUMBER,
    "step_time_s.per_step": _LIST,
    "data_wait_s": _OBJECT, "data_wait_s.total": _NUMBER, "data_wait_s.share_of_step_time": _NUMBER,
    "data_wait_s.per_step": _LIST,
    "memory": _OBJECT,
    "throughput": _OBJECT, "throughput.samples_per_hour": _NUMBER,
    "validation": _OBJECT, "validation.batches": _COUNT, "validation.loss": _NUMBER, "validation.seconds": _NUMBER,
    "checkpoint": _OBJECT, "checkpoint.bytes": _COUNT, "checkpoint.write_s": _NUMBER,
    "restore": _OBJECT,
    "device": _OBJECT, "device.type": _TEXT, "device.count": _COUNT,
    "model": _OBJECT, "model.source": _TEXT, "model.parameters": _COUNT, "model.trainable_parameters": _COUNT,
    "versions": _OBJECT,
}
# Figures that must be finite and not negative (a loss may be NaN: a diverged run is still a report).
_NOT_NEGATIVE = ("tokens_per_s", "step_time_s.median", "step_time_s.p90", "step_time_s.min", "step_time_s.max",
                 "data_wait_s.total", "data_wait_s.share_of_step_time", "validation.seconds", "checkpoint.write_s")


def _is(kind: str, value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return {_NUMBER: isinstance(value, (int, float)), _COUNT: isinstance(value, int), _TEXT: isinstance(value, str),
            _OBJECT: isinstance(value, dict), _LIST: isinstance(value, list)}[kind]


def _get(report: dict, path: str) -> Any:
    value: Any = report
    for part in path.split("."):
        value = value[part]
    return value


def _check_fields(report: dict) -> None:
    for path, kind in REQUIRED.items():
        parent, _, name = path.rpartition(".")
        holder = _get(report, parent) if parent else report
        if name not in holder:
            raise ReportRejected("missing_field", f"the report has no {path}.", field=path)
        if not _is(kind, holder[name]):
            raise _reject_type(path, kind, holder[name])
    for path in ("step_time_s.per_step", "data_wait_s.per_step"):
        values = _get(report, path)
        if not values or not all(_is(_NUMBER, v) and math.isfinite(v) and v >= 0 for v in values):
            raise ReportRejected("bad_value", f"{path} must list the timed steps' seconds.", field=path)
    for path in _NOT_NEGATIVE:
        value = _get(report, path)
        if not math.isfinite(value) or value < 0:
            raise ReportRejected("bad_value", f"{path} is {value!r}; it must be a finite number from 0.", field=path)
    if report["tokens_per_s"] <= 0:
        raise ReportRejected("bad_value", "the report's throughput is 0 tokens/s: the run trained nothing.",
                             field="tokens_per_s")
    if report["device"]["count"] < 1:
        raise ReportRejected("bad_value", "device.count must be at least 1.", field="device.count")
    _peak(report["memory"])
    _restore(report["restore"])
    for path in ("versions.device", "stack", "warnings"):
        parent, _, name = path.rpartition(".")
        holder = _get(report, parent) if parent else report
        wanted = {"versions.device": (str, type(None)), "stack": (dict,), "warnings": (list,)}[path]
        if name in holder and not isinstance(holder[name], wanted):
            raise _reject_type(path, {"stack": _OBJECT, "warnings": _LIST}.get(path, "a string or null"),
                               holder[name])


# Where the peak memory of the timed steps is, in order of preference: the allocator's peak on a GPU, the
# process's peak resident set on the CPU (``pilot.measure.MemoryProbe.summary``).
_PEAK_KEYS = ("peak_allocated", "peak_rss")


def _peak(memory: dict) -> tuple[str, int, str]:
    for key in _PEAK_KEYS:
        if key in memory:
            item = memory[key]
            if not isinstance(item, dict):
                raise _reject_type(f"memory.{key}", _OBJECT, item)
            value = item.get("bytes")
            if not _is(_COUNT, value) or value < 0:
                raise ReportRejected("bad_type", f"memory.{key}.bytes must be a whole number of bytes.",
                                     field=f"memory.{key}.bytes")
            return key, value, str(item.get("source", ""))
    raise ReportRejected("missing_field", "the report has no peak memory (memory.peak_allocated on a GPU, "
                                          "memory.peak_rss on the CPU).", field="memory.peak_allocated")


def _restore(restore: dict) -> None:
    if "passed" not in restore:
        raise ReportRejected("missing_field", "the report has no restore.passed.", field="restore.passed")
    passed = restore["passed"]
    if passed is not None and not isinstance(passed, bool):
        raise _reject_type("restore.passed", "true, false or null", passed)
    if passed is False:
        first = restore.get("first_difference")
        if not isinstance(first, dict) or not isinstance(first.get("what"), str):
            raise ReportRejected("missing_field", "a failed restore proof must name its first difference "
                                                  "(restore.first_difference.what).",
                                 field="restore.first_difference")


def percentile(values: list[float], fraction: float) -> float:
    """Linear interpolation between closest ranks, as ``pilot.run.percentile`` (numpy's default)."""
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class RestoreProof:
    status: str  # "passed", "failed" or "skipped"
    first_difference: Mapping[str, Any] | None = None  # what, expected, found (failed only)
    skipped_because: str | None = None


@dataclass(frozen=True)
class PilotSummary:
    """The figures the shop takes from a pilot report."""

    schema_version: int
    created_at: str
    tokens_per_s: float
    peak_memory_bytes: int
    peak_memory_kind: str  # "peak_allocated" (GPU allocator) or "peak_rss" (CPU process)
    peak_memory_source: str
    device_used_peak_bytes: int | None  # NVML, GPU only, when it was available
    step_time_p50_s: float
    step_time_p95_s: float
    step_time_p90_s: float
    timed_steps: int
    data_wait_share: float
    restore: RestoreProof
    device_type: str
    device_name: str | None
    device_count: int
    model_source: str
    parameters: int
    trainable_parameters: int
    checkpoint_bytes: int
    checkpoint_write_s: float
    validation_s: float
    warnings: tuple[str, ...] = ()
    stack: Mapping[str, Any] | None = None
    samples_per_step: int | None = None
    tokens_per_step: float | None = None


def summarise(report: dict) -> PilotSummary:
    """The key figures of a report ``read_report`` accepted."""
    kind, peak, source = _peak(report["memory"])
    used = report["memory"].get("device_used_peak")
    used_bytes = used.get("bytes") if isinstance(used, dict) and _is(_COUNT, used.get("bytes")) else None
    restore = report["restore"]
    status = "skipped" if restore["passed"] is None else "passed" if restore["passed"] else "failed"
    skipped = restore.get("skipped")
    steps = report["step_time_s"]["per_step"]
    throughput = report["throughput"]
    samples = throughput.get("samples_per_step")
    tokens_per_step = throughput.get("tokens_per_step")
    return PilotSummary(
        schema_version=report["schema_version"], created_at=report["created_at"],
        tokens_per_s=float(report["tokens_per_s"]), peak_memory_bytes=peak, peak_memory_kind=kind,
        peak_memory_source=source, device_used_peak_bytes=used_bytes,
        step_time_p50_s=percentile(steps, 0.5), step_time_p95_s=percentile(steps, 0.95),
        step_time_p90_s=float(report["step_time_s"]["p90"]), timed_steps=len(steps),
        data_wait_share=float(report["data_wait_s"]["share_of_step_time"]),
        restore=RestoreProof(status, restore.get("first_difference") if status == "failed" else None,
                             skipped if status == "skipped" and isinstance(skipped, str) else None),
        device_type=report["device"]["type"], device_name=report["versions"].get("device"),
        device_count=report["device"]["count"], model_source=report["model"]["source"],
        parameters=report["model"]["parameters"], trainable_parameters=report["model"]["trainable_parameters"],
        checkpoint_bytes=report["checkpoint"]["bytes"], checkpoint_write_s=float(report["checkpoint"]["write_s"]),
        validation_s=float(report["validation"]["seconds"]),
        warnings=tuple(str(w) for w in report.get("warnings", ())), stack=report.get("stack"),
        samples_per_step=samples if _is(_COUNT, samples) else None,
        tokens_per_step=float(tokens_per_step) if _is(_NUMBER, tokens_per_step) else None,
    )


def validate_report(data: bytes, *, max_bytes: int | None = MAX_REPORT_BYTES) -> PilotSummary:
    """An uploaded report's key figures, or ``ReportRejected``."""
    return summarise(read_report(data, max_bytes=max_bytes))
