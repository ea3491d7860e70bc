"""Reading a pilot report: a terminal summary, and a standalone HTML page with two plots.

The plots are drawn as inline SVG by hand (no plotting library): a histogram
of the timed steps' durations, and memory after each step. Every text that
comes from the report is escaped.
"""

from __future__ import annotations

import html
from pathlib import Path

from . import report_schema
from .check_report import brief_lines
from .errors import PilotInputError
from .report_schema import ReportRejected, read_report

GiB = 1024**3
KIND = report_schema.REPORT_KIND
SUPPORTED_SCHEMAS = report_schema.SUPPORTED_SCHEMAS


def load_report(path: str) -> dict:
    """A report file, checked as an upload is (``report_schema``), of any size; bad files raise ``PilotInputError``."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PilotInputError("report", f"{path} cannot be read ({exc.strerror or exc}).") from None
    try:
        return read_report(data, max_bytes=None)
    except ReportRejected as exc:
        if exc.code in ("not_utf8", "not_json", "truncated"):
            raise PilotInputError("report", f"{path} is not JSON ({exc.message})") from None
        if exc.code == "not_a_report":
            raise PilotInputError("report", f"{path} is not a pilot report.") from None
        raise PilotInputError("report", f"{path}: {exc.message}") from None


def _bytes(value) -> str:
    if value is None:
        return "n/a"
    return f"{value / GiB:.2f} GiB" if value >= GiB / 10 else f"{value / 1024**2:.1f} MiB"


def memory_lines(memory: dict) -> list[tuple[str, str]]:
    return [(name.replace("_", " "), f"{_bytes(item.get('bytes'))}  ({item.get('source')})")
            for name, item in memory.items() if isinstance(item, dict) and "bytes" in item]


def histogram(values: list[float], bins: int = 10) -> list[tuple[float, float, int]]:
    low, high = min(values), max(values)
    width = (high - low) / bins or 1e-9
    counts = [0] * bins
    for value in values:
        counts[min(int((value - low) / width), bins - 1)] += 1
    return [(low + i * width, low + (i + 1) * width, c) for i, c in enumerate(counts)]


def _stack_lines(report: dict) -> list[tuple[str, str]]:
    """The accelerator stack in brief; reports written before it was recorded have none."""
    stack = report.get("stack")
    if not isinstance(stack, dict):
        return []
    return brief_lines(stack)


def terminal_summary(report: dict) -> str:
    steps, wait = report["step_time_s"], report["data_wait_s"]
    restore = report["restore"]
    verdict = ("skipped" if restore.get("passed") is None else "PASSED" if restore["passed"] else
               f"FAILED: first difference in {restore['first_difference']['what']} "
               f"(expected {restore['first_difference']['expected']}, found {restore['first_difference']['found']})")
    lines = [
        f"Pilot of {report['model']['source']} ({report['model']['family']}, "
        f"{report['model']['parameters']:,} parameters, {report['model']['trainable_parameters']:,} trained) "
        f"on {report['versions'].get('device')}",
        f"  step time     median {steps['median']:.4f} s, p90 {steps['p90']:.4f} s, min {steps['min']:.4f} s, "
        f"max {steps['max']:.4f} s (spread {steps['spread']:.1%} of the median)",
        f"  data wait     {wait['total']:.4f} s in all, {wait['share_of_step_time']:.1%} of step time",
        f"  throughput    {report['tokens_per_s']:,.0f} tokens/s, {report['throughput']['samples_per_hour']:,.0f} "
        "samples/hour",
    ]
    lines += [f"  memory        {name}: {text}" for name, text in memory_lines(report["memory"])]
    validation, checkpoint = report["validation"], report["checkpoint"]
    lines += [
        f"  validation    {validation['batches']} batches in {validation['seconds']:.3f} s, "
        f"loss {validation['loss']:.4f}",
        f"  checkpoint    {_bytes(checkpoint['bytes'])} written in {checkpoint['write_s']:.3f} s",
        f"  restore       {verdict}",
    ]
    lines += [f"  {label:<13} {text}" for label, text in _stack_lines(report)]
    lines += [f"  warning       {w}" for w in report.get("warnings", [])]
    lines.append("  step times:")
    bins = histogram(steps["per_step"], bins=min(8, len(steps["per_step"])))
    tallest = max(c for _a, _b, c in bins) or 1
    lines += [f"    {a:8.4f}–{b:8.4f} s {'#' * round(20 * c / tallest)} {c}" for a, b, c in bins]
    return "\n".join(lines)


def _svg_histogram(values: list[float], width: int = 480, height: int = 200) -> str:
    bins = histogram(values, bins=min(12, max(1, len(values))))
    tallest = max(c for _a, _b, c in bins) or 1
    bar = (width - 60) / len(bins)
    parts = []
    for i, (low, high, count) in enumerate(bins):
        h = (height - 50) * count / tallest
        parts.append(f'<rect x="{50 + i * bar:.1f}" y="{height - 30 - h:.1f}" width="{bar - 2:.1f}" height="{h:.1f}" '
                     f'fill="#2f6fb0"><title>{low:.4f}–{high:.4f} s: {count}</title></rect>')
    parts.append(f'<text x="50" y="{height - 10}" font-size="11">{bins[0][0]:.4f} s</text>')
    parts.append(
        f'<text x="{width - 10}" y="{height - 10}" font-size="11" text-anchor="end">{bins[-1][1]:.4f} s</text>'
    )
    parts.append(f'<text x="45" y="20" font-size="11" text-anchor="end">{tallest}</text>')
    return (f'<svg role="img" aria-label="Histogram of step times" width="{width}" height="{height}" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>')


def _svg_memory(samples: list[dict], width: int = 480, height: int = 200) -> str:
    key = "allocated" if samples and "allocated" in samples[0] else "rss"
    values = [s.get(key) or 0 for s in samples]
    if not values:
        return "<p>No memory samples.</p>"
    top = max(values) or 1
    step = (width - 60) / max(1, len(values) - 1)
    points = " ".join(f"{50 + i * step:.1f},{height - 30 - (height - 50) * v / top:.1f}" for i, v in enumerate(values))
    label = "allocated after each step" if key == "allocated" else "resident set after each step"
    return (f'<svg role="img" aria-label="Memory over steps" width="{width}" height="{height}" '
            f'xmlns="http://www.w3.org/2000/svg"><polyline fill="none" stroke="#b0462f" stroke-width="2" '
            f'points="{points}"/><text x="45" y="20" font-size="11" text-anchor="end">{_bytes(top)}</text>'
            f'<text x="50" y="{height - 10}" font-size="11">step 0</text>'
            f'<text x="{width - 10}" y="{height - 10}" font-size="11" text-anchor="end">{html.escape(label)}</text>'
            "</svg>")


def write_html(report: dict, path: str) -> None:
    e = html.escape
    rows = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in [
        ("Model", f"{report['model']['source']} ({report['model']['family']})"),
        ("Device", str(report["versions"].get("device"))),
        ("Step time median / p90", f"{report['step_time_s']['median']:.4f} s / {report['step_time_s']['p90']:.4f} s"),
        ("Data wait", f"{report['data_wait_s']['share_of_step_time']:.1%} of step time"),
        ("Tokens per second", f"{report['tokens_per_s']:,.0f}"),
        ("Samples per hour", f"{report['throughput']['samples_per_hour']:,.0f}"),
        ("Checkpoint", f"{_bytes(report['checkpoint']['bytes'])} in {report['checkpoint']['write_s']:.3f} s"),
        ("Restore proof", "passed" if report["restore"].get("passed") else
         "skipped" if report["restore"].get("passed") is None else
         f"failed: {report['restore']['first_difference']['what']}"),
    ] + memory_lines(report["memory"]) + [(label.capitalize(), text) for label, text in _stack_lines(report)])
    versions = "".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in report["versions"].items())
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Pilot report</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}}
th{{text-align:left;padding-right:1rem;font-weight:600}}td,th{{padding:.2rem .5rem;vertical-align:top}}</style>
</head><body>
<h1>Pilot report</h1>
<p>{e(report['created_at'])}</p>
<table>{rows}</table>
<h2>Step times</h2>{_svg_histogram(report['step_time_s']['per_step'])}
<h2>Memory over the timed steps</h2>{_svg_memory(report['memory'].get('over_steps', []))}
<h2>Versions</h2><table>{versions}</table>
{''.join(f'<p><strong>Warning:</strong> {e(w)}</p>' for w in report.get('warnings', []))}
</body></html>
"""
    Path(path).write_text(page, encoding="utf-8")


def step_time_svg(report: dict) -> str:
    """The histogram of a report's timed steps, as inline SVG (the shop's report page shows it too)."""
    return _svg_histogram(report["step_time_s"]["per_step"])


def memory_svg(report: dict) -> str:
    """Memory after each timed step, as inline SVG."""
    return _svg_memory(report["memory"].get("over_steps", []))
