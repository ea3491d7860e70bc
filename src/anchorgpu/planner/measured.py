"""What a simulated step measured, kept apart from torch so it can be stored, sent and priced.

A ``Measurement`` is the live storage bytes of one measured step, as the
simulation (``simulate.py``, needs torch) produced it. It is plain data: it
goes to JSON and back (the shop's background jobs store it) and
``to_breakdown`` turns it into the same ``Breakdown`` the analytic engine
gives, with the framework's reserve added.

One single-device step serves every card count of DDP: each card runs the
same step, and DDP adds its gradient buckets (a flat copy of the trainable
gradients, computed from ``trainable_bytes``). FSDP's step differs with the
number of cards, so it needs one measurement per count. ``step_key`` names
the measurement a setup needs; ``MeasuredSteps`` answers the planner's
``estimate_with`` from a set of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from anchorgpu.messages import gettext_noop

from .analytic import COMPONENTS, Breakdown, Reserve, estimate, with_reserve
from .device_memory import StepPeaks
from .errors import PlannerInputError
from .model_spec import ModelSpec
from .setup import TrainingSetup

CATEGORIES = COMPONENTS[:-1]  # what a tracker can see: everything but the reserve


@dataclass(frozen=True)
class Measurement:
    """Live storage bytes of one measured step (no reserve)."""

    peak: int
    categories: Mapping[str, int]  # category -> bytes at the peak; they add up to ``peak``
    phase: str  # the part of the step the peak fell in
    phases: tuple[tuple[str, int], ...]  # the peak of each part of the step
    seconds: float  # wall time of the whole run (build, warm-up step, measured step)
    fake: bool
    trainable_bytes: int = 0  # bytes of the trainable parameters (DDP's buckets copy their gradients)
    parallel: str = "single"  # the step that was measured: single or fsdp
    gpus: int = 1
    notes: tuple[str, ...] = field(default=())

    @property
    def ddp_buckets(self) -> int:
        """Bytes of DDP's gradient buckets were this step run under DDP (``gradient_as_bucket_view=False``)."""
        return self.trainable_bytes

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["categories"] = dict(self.categories)
        data["phases"] = [list(p) for p in self.phases]
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measurement:
        try:
            categories = {name: int(data["categories"].get(name, 0)) for name in CATEGORIES}
            measured = cls(peak=int(data["peak"]), categories=categories, phase=str(data["phase"]),
                           phases=tuple((str(name), int(value)) for name, value in data["phases"]),
                           seconds=float(data["seconds"]), fake=bool(data["fake"]),
                           trainable_bytes=int(data.get("trainable_bytes", 0)),
                           parallel=str(data.get("parallel", "single")), gpus=int(data.get("gpus", 1)),
                           notes=tuple(str(n) for n in data.get("notes", ())))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PlannerInputError("measurement", f"a stored measurement is incomplete or malformed ({exc}).") \
                from None
        if sum(measured.categories.values()) != measured.peak:
            raise PlannerInputError("measurement", "a stored measurement's parts do not add up to its peak.")
        return measured


def step_key(setup: TrainingSetup) -> tuple[str, int]:
    """The measured step ``setup`` needs: one single-device step for one card or DDP, one per card count for FSDP."""
    return ("fsdp", setup.gpus) if setup.parallel == "fsdp" else ("single", 1)


def measured_setup(setup: TrainingSetup) -> TrainingSetup:
    """The setup to simulate for ``setup``'s measured step."""
    parallel, gpus = step_key(setup)
    return setup.replace(parallel=parallel, gpus=gpus)


def to_breakdown(measured: Measurement, setup: TrainingSetup, reserve: Reserve = Reserve(),
                 spec: ModelSpec | None = None) -> Breakdown:
    """The measured step as a per-device ``Breakdown`` of ``setup``, with the reserve up to ``device_used_bytes``.

    ``setup`` may be the measured one or, for a single-device measurement,
    DDP over any number of cards (the buckets are added to the gradients:
    they are allocated tensors). The simulation sees live tensors only: with
    ``spec``, the caching allocator's terms (rounding, cache) are the ones the
    analytic model finds for the same step, added to the measured live bytes;
    without it they are left out (allocated and reserved taken as the live bytes).
    """
    if step_key(setup) != (measured.parallel, measured.gpus):
        raise PlannerInputError("parallel", f"a {measured.parallel} step on {measured.gpus} card(s) cannot stand for "
                                            f"{setup.parallel} on {setup.gpus}.")
    cats = measured.categories
    parts = [(name, "simulated live tensors", cats[name]) for name in CATEGORIES if cats.get(name)]
    notes = ("Simulated: one real step's operators on fake tensors (FakeTensorMode), live storage bytes "
             "tracked.",) + tuple(measured.notes)
    if setup.parallel == "ddp":
        parts.append(("gradients", "DDP gradient buckets", measured.ddp_buckets))
        notes += ("DDP: gradient buckets computed as a copy of the gradients (gradient_as_bucket_view=False), "
                  "not simulated; they are allocated like any tensor.",)
    live = sum(b for _c, _w, b in parts)
    step = None
    if spec is not None and reserve.allocator:
        analytic = estimate(spec, setup, reserve).step
        if analytic is not None and analytic.modelled:
            step = StepPeaks(live=live, allocated=live + analytic.allocated - analytic.live,
                             reserved=live + analytic.reserved - analytic.live, gpus=setup.gpus)
            notes += ("The caching allocator's rounding and cache are the analytic model's for the same step, "
                      "added to the simulated live bytes.",)
    if step is None:
        notes += ("The caching allocator's rounding and cache are not modelled here: allocated and reserved "
                  "are taken as the simulated live bytes.",)
    return with_reserve(parts, measured.phase, measured.phases, None, None, setup.gpus, reserve, notes, step=step)


class MeasuredSteps:
    """Measurements by ``step_key``; used as the planner's ``estimate_with`` for the setups they cover."""

    def __init__(self, measurements: Mapping[tuple[str, int], Measurement] | None = None):
        self.measurements: dict[tuple[str, int], Measurement] = dict(measurements or {})

    def add(self, measured: Measurement) -> None:
        self.measurements[(measured.parallel, measured.gpus)] = measured

    def covers(self, setup: TrainingSetup) -> bool:
        return step_key(setup) in self.measurements

    def __call__(self, spec: ModelSpec, setup: TrainingSetup, reserve: Reserve = Reserve()) -> Breakdown:
        measured = self.measurements.get(step_key(setup))
        if measured is None:
            parallel, gpus = step_key(setup)
            raise PlannerInputError("parallel", f"no simulated step for {parallel} on {gpus} card(s).")
        return to_breakdown(measured, setup, reserve, spec)

    def to_json(self) -> list[dict[str, Any]]:
        return [m.to_json() for _key, m in sorted(self.measurements.items())]

    @classmethod
    def from_json(cls, data: Any) -> MeasuredSteps:
        if not isinstance(data, list):
            raise PlannerInputError("measurement", "stored measurements are a list.")
        steps = cls()
        for item in data:
            if not isinstance(item, Mapping):
                raise PlannerInputError("measurement", "a stored measurement is an object.")
            steps.add(Measurement.from_json(item))
        return steps


def not_simulated(setup: TrainingSetup) -> tuple[str, str] | None:
    """``(field, sentence)`` for a setting the simulated step cannot reproduce, or None when it can.

    The simulation runs the CPU's operators on fake tensors, one device, in one address space: what needs
    a GPU library (bitsandbytes, Liger's Triton kernels) or a second memory (host offload, paged memory) is
    not there to run, and a step without it would be another step. Those setups are priced analytically."""
    if setup.method == "qlora":
        return "method", gettext_noop("QLoRA's 4-bit weights need bitsandbytes, which cannot run on simulated "
                                      "tensors: not simulable; use the analytic engine.")
    if setup.optimizer in ("adamw8bit", "paged_adamw", "paged_adamw8bit"):
        return "optimizer", gettext_noop("8-bit and paged optimizers need bitsandbytes, which cannot run on "
                                         "simulated tensors: not simulable; use the analytic engine.")
    if getattr(setup, "cross_entropy", "standard") != "standard":
        return "cross_entropy", gettext_noop("the simulation runs the model's own cross-entropy; chunked and fused "
                                             "linear cross-entropy are other kernels: not simulable; use the "
                                             "analytic engine.")
    if getattr(setup, "activation_offload", False) or getattr(setup, "offload", "none") != "none":
        return "activation_offload" if getattr(setup, "activation_offload", False) else "offload", gettext_noop(
            "offloading moves tensors to host memory, which a simulation on the CPU "
            "cannot tell apart from the device's: not simulable; use the analytic "
            "engine."
        )
    if getattr(setup, "packed", False):
        return "packed", gettext_noop("the simulation runs padded rows, and packed variable-length batches take "
                                      "another attention path: not simulable; use the analytic engine.")
    if getattr(setup, "parallel", "single") in ("zero2", "zero3"):
        return "parallel", gettext_noop("DeepSpeed ZeRO is not simulated (FSDP is): not simulable; use the "
                                        "analytic engine.")
    return None


def not_simulable(setup: TrainingSetup) -> str | None:
    """Why ``setup`` cannot be simulated, or ``None`` when it can (checked before a simulation is queued, with
    the same rules the engine applies when it builds the model: ``not_simulated``).

    The sentence is English and marked for the catalogs: a page shows it translated."""
    refused = not_simulated(setup)
    return None if refused is None else refused[1]
