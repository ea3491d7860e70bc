"""The planner against peak-memory figures others measured on real GPUs and published (issue 21).

For each row of ``bench/published_peaks.py`` it reads the model's config with the planner, builds the
setup from the row's settings, runs the analytic estimate and puts our figure in the row's own measure
(allocated, active, reserved or nvidia-smi) and unit beside the published one. Rows are judged only when
every setting is known and modelled; the others are printed with the reason:

* ``kept apart``: the sources leave a setting unknown (``Row.unknown``);
* ``not readable``: the planner cannot read the model's config yet;
* ``setting not modelled``: the run used a setting the planner does not offer (yet).

Then, per measure, the median and worst |error| over the judged rows, the same for the ``weights × 4``
rule of thumb, and every run that really ran out of memory with our verdict. It always exits 0 (it is a
report) and ends with TARGET MET or TARGET MISSED against: median ≤ 3 %, worst ≤ 10 %, every OOM run
"does not fit".

The ``weights × 4`` rule, as used here: the model's parameter count × 2 bytes (the weights at 16 bits)
× 4 (weights, gradients and AdamW's two moments), per GPU; divided by the number of GPUs when the run
shards (FSDP, ZeRO-3), whatever the method (so it overstates LoRA and QLoRA, as the rule does).

    .venv/bin/python bench/planner_gpu_published.py
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from published_peaks import CARDS, CONFIGS, ROWS, UNITS, Row  # noqa: E402

from anchorgpu.planner.analytic import Reserve, estimate  # noqa: E402
from anchorgpu.planner.errors import PlannerInputError  # noqa: E402
from anchorgpu.planner.model_spec import model_spec_from_config  # noqa: E402
from anchorgpu.planner.params import parameter_counts  # noqa: E402
from anchorgpu.planner.setup import TrainingSetup, setup_from_mapping  # noqa: E402

TARGET_MEDIAN, TARGET_WORST = 3.0, 10.0
# The planner's named measure for each published measure, and what stands in while it does not exist.
MEASURE_FIELDS = {"allocated": "allocated_peak_bytes", "active": "allocated_peak_bytes",
                  "reserved": "reserved_peak_bytes", "nvidia-smi": "device_used_bytes"}
FALLBACKS = {"allocated": "live", "active": "live", "reserved": "peak", "nvidia-smi": "peak"}
# A setting the planner has no field for is harmless only at the value the planner assumes anyway.
ASSUMED = {"grad_accumulation": (1,), "activation_offload": (False,), "attention": ("auto", "sdpa"),
           "packed": (False,), "cross_entropy": ("standard",), "offload": ("none",), "lora_dropout": (0.0, 0),
           "quantize_lm_head": (False,), "double_quant": (True,)}
EXTRA_ASSUMED = {"torch_compile": False, "optimizer_in_backward": False}
SHARDED = {"fsdp", "zero3"}


@dataclass(frozen=True)
class Result:
    row: Row
    status: str  # judged, oom, kept apart, not readable, setting not modelled
    reason: str = ""
    ours: int | None = None  # bytes, in the row's measure
    ours_from: str = ""  # the breakdown field it came from
    device: int | None = None  # bytes the card must hold (for the verdict)
    rule: int | None = None  # weights × 4, bytes per GPU
    fits: bool | None = None

    @property
    def published(self) -> int | None:
        return published_bytes(self.row)

    @property
    def error(self) -> float | None:
        return error_percent(self.ours, self.published) if self.status == "judged" else None

    @property
    def rule_error(self) -> float | None:
        return error_percent(self.rule, self.published) if self.status == "judged" else None


def published_bytes(row: Row) -> int | None:
    """The published figure in bytes, exactly (the string times the unit's bytes), or None for an OOM row."""
    if row.figure is None:
        return None
    return int(Decimal(row.figure) * UNITS[row.unit])


def error_percent(ours: int | None, published: int | None) -> float | None:
    """Signed error of ``ours`` against ``published``, in percent (positive: we say more)."""
    if ours is None or not published:
        return None
    return (ours - published) * 100.0 / published


def verdict(device_bytes: int, card_bytes: int) -> bool:
    """Whether the step fits on the card: what the card must hold against its whole memory."""
    return device_bytes <= card_bytes


def rule_of_thumb(parameters: int, settings: dict) -> int:
    """weights × 4: parameters × 2 bytes × 4, per GPU (divided by the GPUs when the run shards)."""
    per_gpu = parameters * 2 * 4
    return per_gpu // settings.get("gpus", 1) if settings.get("parallel") in SHARDED else per_gpu


def setup_fields(settings: dict) -> tuple[dict, list[str]]:
    """Splits a row's settings into the planner's fields and the settings it cannot take (with their value)."""
    offered = {f.name for f in dataclasses.fields(TrainingSetup)}
    fields, missing = {}, []
    method = settings.get("method")
    for name, value in settings.items():
        if name in offered:
            if name in {"lora_rank", "lora_targets", "adapter_dtype", "lora_dropout"} and method == "full":
                continue
            fields[name] = list(value) if isinstance(value, tuple) else value
        elif value not in ASSUMED.get(name, ()):
            missing.append(f"{name}={value}")
    return fields, missing


def measured_bytes(breakdown: Any, measure: str, generation: str | None = None) -> tuple[int, str]:
    """Our figure in the row's measure on the row's card generation: the planner's named measure, or its
    stand-in while it is missing."""
    name = MEASURE_FIELDS[measure]
    measures = getattr(breakdown, "measures", None)
    value = getattr(measures(generation) if measures else breakdown, name, None)
    if value is not None:
        return int(value), name
    fallback = FALLBACKS[measure]
    return int(getattr(breakdown, fallback)), f"breakdown.{fallback} (no {name} yet)"


def device_bytes(breakdown: Any, generation: str | None = None) -> tuple[int, str]:
    measures = getattr(breakdown, "measures", None)
    value = getattr(measures(generation) if measures else breakdown, "device_used_bytes", None)
    if value is not None:
        return int(value), "device_used_bytes"
    return int(breakdown.peak), "breakdown.peak (no device_used_bytes yet)"


def plan_row(row: Row) -> Result:
    config, _where = CONFIGS[row.config]
    try:
        spec = model_spec_from_config(dict(config), name=row.model)
    except PlannerInputError as exc:
        return Result(row, "not readable", str(exc))
    fields, missing = setup_fields(dict(row.settings))
    missing += [f"{name}={value}" for name, value in row.extra.items() if EXTRA_ASSUMED.get(name, "?") != value]
    rule = rule_of_thumb(parameter_counts(spec).total, dict(row.settings))
    if missing:
        return Result(row, "setting not modelled", ", ".join(missing), rule=rule)
    try:
        setup = setup_from_mapping(fields)
        breakdown = estimate(spec, setup, Reserve(load_cache=row.load_cache))
    except PlannerInputError as exc:
        return Result(row, "setting not modelled", str(exc), rule=rule)
    device, _ = device_bytes(breakdown, CARDS[row.card].generation)
    fits = verdict(device, CARDS[row.card].memory_bytes)
    if row.unknown:
        return Result(row, "kept apart", "; ".join(row.unknown), device=device, rule=rule, fits=fits)
    if row.measure == "oom":
        return Result(row, "oom", device=device, rule=rule, fits=fits)
    ours, source = measured_bytes(breakdown, row.measure, CARDS[row.card].generation)
    return Result(row, "judged", ours=ours, ours_from=source, device=device, rule=rule, fits=fits)


def summarise(results: Iterable[Result]) -> dict[str, dict[str, float | int]]:
    """Per measure over the judged rows: count, median and worst |error| of ours and of the rule of thumb."""
    by_measure: dict[str, list[Result]] = {}
    for result in results:
        if result.status == "judged":
            by_measure.setdefault(result.row.measure, []).append(result)
    summary = {}
    for measure, items in sorted(by_measure.items()):
        ours = [abs(r.error) for r in items]
        rule = [abs(r.rule_error) for r in items]
        summary[measure] = {"rows": len(items), "median": statistics.median(ours), "worst": max(ours),
                            "rule_median": statistics.median(rule), "rule_worst": max(rule)}
    return summary


def target_met(results: list[Result]) -> bool:
    judged = [r for r in results if r.status == "judged"]
    ooms = [r for r in results if r.status == "oom"]
    if not judged and not ooms:
        return False
    errors = [abs(r.error) for r in judged]
    close = not errors or (statistics.median(errors) <= TARGET_MEDIAN and max(errors) <= TARGET_WORST)
    return close and all(r.fits is False for r in ooms)


def _in_unit(value: int | None, unit: str | None) -> str:
    return "—" if value is None or unit is None else f"{Decimal(value) / UNITS[unit]:.2f}"


def report(results: list[Result]) -> str:
    lines = [f"{'row':<30} {'model':<34} {'card':<13} {'measure':<10} {'published':>12} {'ours':>8} "
             f"{'error':>8} {'verdict':<14} status"]
    for r in results:
        row = r.row
        unit = row.unit or "GiB"
        published = f"{row.figure} {row.unit}" if row.figure else "OOM"
        ours = _in_unit(r.ours if r.status == "judged" else r.device, unit)
        error = f"{r.error:+.1f}%" if r.error is not None else "—"
        card = f"{row.gpus}x{row.card}"
        fits = "—" if r.fits is None else ("fits" if r.fits else "does not fit")
        status = r.status + (f": {r.reason}" if r.reason else "")
        lines.append(f"{row.id:<30} {row.model[:34]:<34} {card:<13} {row.measure:<10} {published:>12} {ours:>8} "
                     f"{error:>8} {fits:<14} {status}")
    sources = sorted({r.ours_from for r in results if r.ours_from})
    if sources:
        lines.append("Our figures came from: " + "; ".join(sources) + ". For OOM and kept-apart rows 'ours' is "
                     "what the card must hold (device_used_bytes, or breakdown.peak until it exists).")
    lines.append("")
    lines.append("Per measure, judged rows only (|error| in %; the rule: parameters × 2 bytes × 4, per GPU):")
    summary = summarise(results)
    if not summary:
        lines.append("  no judged rows")
    for measure, s in summary.items():
        lines.append(f"  {measure:<10} rows {s['rows']:>2}   ours: median {s['median']:5.1f}  worst {s['worst']:5.1f}"
                     f"   weights×4: median {s['rule_median']:6.1f}  worst {s['rule_worst']:6.1f}")
    lines.append("")
    lines.append("Runs that really ran out of memory:")
    for r in results:
        if r.row.measure == "oom":
            said = "—" if r.fits is None else ("fits" if r.fits else "does not fit")
            judged = "judged" if r.status == "oom" else f"not judged ({r.status}: {r.reason})"
            lines.append(f"  {r.row.id:<30} {r.row.gpus}x{CARDS[r.row.card].name:<26} ours: {said:<13} {judged}")
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    lines.append("")
    lines.append("Rows: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    lines.append(("TARGET MET" if target_met(results) else "TARGET MISSED")
                 + f" (median ≤ {TARGET_MEDIAN:g} %, worst ≤ {TARGET_WORST:g} % on judged rows; every judged OOM "
                   "run 'does not fit')")
    return "\n".join(lines)


def main() -> int:
    print(report([plan_row(row) for row in ROWS]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
