"""The planner page: the analytic estimate at once, and every card and quantity
of the catalog with whether the step fits, its price, and a link to checkout.
From there a simulation can be queued (``simulations.views``)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from anchorgpu.i18n import message
from anchorgpu.pilotreports.services import report_summary, reports_of
from anchorgpu.planner.analytic import Reserve, estimate
from anchorgpu.planner.errors import PlannerInputError
from anchorgpu.planner.measured import not_simulable
from anchorgpu.planner.model_tree import spec_from_any_config
from anchorgpu.planner.presets import preset_spec
from anchorgpu.planner.recommend import GB, plan
from anchorgpu.planner.setup import setup_from_mapping
from anchorgpu.planner.shop_offers import shop_offers

from .form import PlannerForm
from .run_plans import run_context, run_size

COMPONENT_LABELS = {"weights": gettext_lazy("Weights"), "gradients": gettext_lazy("Gradients"),
                    "optimizer": gettext_lazy("Optimizer state"), "activations": gettext_lazy("Activations"),
                    "temporaries": gettext_lazy("Temporary buffers"),
                    "reserve": gettext_lazy("Above the live tensors (allocator rounding and cache, BLAS workspaces, "
                                            "CUDA/ROCm context, communication buffers)")}
# Which number each measure is, in the words of the tool that reports it.
MEASURE_LABELS = (
    ("allocated_peak_bytes", gettext_lazy("Allocated peak"),
     gettext_lazy("what torch.cuda.max_memory_allocated reports: live tensors in the allocator's blocks")),
    ("reserved_peak_bytes", gettext_lazy("Reserved peak"),
     gettext_lazy("what torch.cuda.max_memory_reserved reports: the allocator's segments, cached blocks included")),
    ("device_used_bytes", gettext_lazy("Device memory used"),
     gettext_lazy("what nvidia-smi or amd-smi shows: reserved, plus the CUDA/ROCm context and NCCL/RCCL buffers")),
)
MOMENT_LABELS = {"loading": gettext_lazy("Loading the model"), "saving": gettext_lazy("Saving a checkpoint"),
                 "evaluation": gettext_lazy("Evaluation")}
CHANGE_LABELS = {"grad_checkpointing": gettext_lazy("gradient checkpointing"), "lora": gettext_lazy("LoRA adapters"),
                 "qlora": gettext_lazy("QLoRA (4-bit base)"), "fsdp": gettext_lazy("FSDP across the cards"),
                 "adamw8bit": gettext_lazy("8-bit AdamW"), "bf16_mixed": gettext_lazy("bf16 mixed precision"),
                 "micro_batch": gettext_lazy("micro-batches of 1 with gradient accumulation")}


def _change_label(suggestion) -> str:
    if suggestion.change == "seq_len":
        return _("sequences of %(n)d tokens") % {"n": suggestion.setup.seq_len}
    return " + ".join(str(CHANGE_LABELS.get(part, part)) for part in suggestion.change.split("+"))


def _checkout(option, term: int) -> str:
    return reverse("checkout", kwargs={"slug": option.offer.slug}) + "?" + urlencode(
        {"quantity": option.quantity, "term": term})


def model_source(data: dict) -> dict:
    """The model as the form gave it, in the form a simulation job stores."""
    return {"preset": data["preset"]} if data["preset"] else {"config": data["config"]}


def spec_from_source(source: dict):
    return preset_spec(source["preset"]) if "preset" in source else spec_from_any_config(source["config"])


def breakdown_rows(breakdown) -> list:
    return [(COMPONENT_LABELS[name], value / GB) for name, value in breakdown.components().items()]


def measure_rows(measures) -> list:
    """(label, GB, what reports it) for the three measures of one device."""
    return [(label, getattr(measures, name) / GB, what) for name, label, what in MEASURE_LABELS]


def other_peak_rows(breakdown) -> list:
    """The moments outside the step that need more than it (loading, saving, evaluation), with their figures."""
    return [{"moment": MOMENT_LABELS.get(p.moment, p.moment), "how": p.how, "gb": p.bytes / GB, "avoid": p.avoid}
            for p in breakdown.other_peaks if p.bytes > breakdown.live]


def results_context(spec, setup, *, headroom: float, term: int, offers=None, estimate_with=estimate) -> dict:
    """Where the step fits, at what price, and what would fit on less: the part both pages show."""
    result = plan(spec, setup, shop_offers() if offers is None else offers, headroom=headroom, term_days=term,
                  estimate_with=estimate_with)
    breakdown = estimate_with(spec, setup, Reserve())
    return {
        "spec": spec, "term": term, "peak_gb": breakdown.peak / GB, "best": result.best,
        "breakdown": breakdown_rows(breakdown), "breakdown_object": breakdown,
        "measures": measure_rows(breakdown.measures()), "other_peaks": other_peak_rows(breakdown),
        "options": [{"option": o, "peak_gb": o.device_used_bytes / GB,
                     "allocated_gb": o.measures.allocated_peak_bytes / GB,
                     "reserved_gb": o.measures.reserved_peak_bytes / GB, "price": o.prices.get(term),
                     "overflow": COMPONENT_LABELS.get(o.overflow) if o.overflow else None,
                     "checkout": _checkout(o, term), "best": o is result.best} for o in result.options],
        "suggestions": [{"label": _change_label(s), "option": s.option, "price": s.option.prices.get(term),
                         "checkout": _checkout(s.option, term)} for s in result.suggestions],
    }


def _run_section(form, spec, setup, data) -> dict:
    """The term and the cost per result, when the customer gave the run's size."""
    size = run_size(data, setup.seq_len)
    if size is None:
        return {}
    report = form.chosen_report()
    summary = report_summary(report) if report is not None else None
    return {"run": run_context(spec=spec, setup=setup, size=size, headroom=data["headroom"] / 100, term=data["term"],
                               report=report, summary=summary, purpose=data.get("purpose") or "",
                               experiments=data.get("experiments") or 1),
            "report": report, "report_summary": summary}


def planner(request):
    reports = list(reports_of(request.user)[:20]) if request.user.is_authenticated else []
    if request.GET and set(request.GET) <= {"report"}:  # from a report's page: the form, with that report chosen
        form = PlannerForm(initial={"report": request.GET["report"][:40]}, reports=reports)
    else:
        form = PlannerForm(request.GET or None, reports=reports)
    context = {"form": form}
    status = 200
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        try:
            spec = spec_from_source(model_source(data))
            setup = setup_from_mapping(form.setup_fields()).validate(spec)
            context.update(results_context(spec, setup, headroom=data["headroom"] / 100, term=data["term"]))
            context.update(_run_section(form, spec, setup, data))
        except PlannerInputError as exc:
            form.add_error(None, _("The planner cannot use this input: %(problem)s") % {"problem": message(exc)})
            status = 400
        else:
            from anchorgpu.simulations.availability import simulation_unavailable

            refusal = not_simulable(setup)
            context.update(engine="analytic", query=request.GET.urlencode(),
                           simulation_refusal=_(refusal) if refusal else simulation_unavailable())
    elif form.is_bound:
        status = 400
    return render(request, "planner_pages/planner.html", context, status=status)
