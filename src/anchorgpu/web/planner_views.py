"""The planner page: the analytic estimate at once, and every card and quantity
of the catalog with whether the step fits, its price, and a link to checkout."""

from __future__ import annotations

from urllib.parse import urlencode

from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from anchorgpu.planner.analytic import estimate
from anchorgpu.planner.errors import PlannerInputError
from anchorgpu.planner.model_spec import model_spec_from_config
from anchorgpu.planner.presets import preset_spec
from anchorgpu.planner.recommend import GB, plan
from anchorgpu.planner.setup import setup_from_mapping
from anchorgpu.planner.shop_offers import shop_offers

from .planner_form import PlannerForm

COMPONENT_LABELS = {"weights": gettext_lazy("Weights"), "gradients": gettext_lazy("Gradients"),
                    "optimizer": gettext_lazy("Optimizer state"), "activations": gettext_lazy("Activations"),
                    "temporaries": gettext_lazy("Temporary buffers"),
                    "reserve": gettext_lazy("Framework reserve (context, fragmentation, communication)")}
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


def planner(request):
    form = PlannerForm(request.GET or None)
    context = {"form": form}
    status = 200
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        try:
            spec = preset_spec(data["preset"]) if data["preset"] else model_spec_from_config(data["config"])
            setup = setup_from_mapping(form.setup_fields()).validate(spec)
            result = plan(spec, setup, shop_offers(), headroom=data["headroom"] / 100, term_days=data["term"])
            breakdown = estimate(spec, setup)
        except PlannerInputError as exc:
            form.add_error(None, _("The planner cannot use this input: %(problem)s") % {"problem": exc.message})
            status = 400
        else:
            term = data["term"]
            context.update(
                spec=spec, term=term, peak_gb=breakdown.peak / GB, best=result.best,
                breakdown=[(COMPONENT_LABELS[name], value / GB) for name, value in breakdown.components().items()],
                options=[{"option": o, "peak_gb": o.breakdown.peak / GB, "price": o.prices.get(term),
                          "overflow": COMPONENT_LABELS.get(o.overflow) if o.overflow else None,
                          "checkout": _checkout(o, term), "best": o is result.best} for o in result.options],
                suggestions=[{"label": _change_label(s), "option": s.option, "price": s.option.prices.get(term),
                              "checkout": _checkout(s.option, term)} for s in result.suggestions])
    elif form.is_bound:
        status = 400
    return render(request, "web/planner.html", context, status=status)
