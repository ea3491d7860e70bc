"""The planner page's form: a model (preset or pasted config.json) and a training setup."""

from __future__ import annotations

import json

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from anchorgpu.formats.display import moment, number
from anchorgpu.orders.models import PURPOSE_CHOICES
from anchorgpu.planner.presets import PRESETS

MAX_CONFIG = 20_000

METHOD_CHOICES = [("full", _("Full fine-tuning")), ("lora", _("LoRA adapters")),
                  ("qlora", _("QLoRA (LoRA on a 4-bit base)"))]
OPTIMIZER_CHOICES = [("adamw", "AdamW"), ("adamw8bit", _("AdamW 8-bit")), ("sgd", "SGD"),
                     ("sgd_momentum", _("SGD with momentum")), ("adafactor", "Adafactor")]
PRECISION_CHOICES = [("bf16_mixed", _("bf16 mixed (fp32 master weights)")), ("bf16", _("pure bf16")),
                     ("fp32", "fp32")]
PARALLEL_CHOICES = [("single", _("One card")), ("ddp", _("DDP (a full copy per card)")),
                    ("fsdp", _("FSDP (full shard)"))]


class PlannerForm(forms.Form):
    preset = forms.ChoiceField(label=_("Model"), required=False,
                               choices=[("", _("Paste a config.json below"))] +
                               [(key, p.repo or key) for key, p in PRESETS.items() if not key.startswith("tiny-")])
    config = forms.CharField(label=_("Hugging Face config.json (instead of a preset)"), required=False,
                             max_length=MAX_CONFIG, widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}))
    method = forms.ChoiceField(label=_("Method"), choices=METHOD_CHOICES, initial="lora")
    lora_rank = forms.IntegerField(label=_("LoRA rank"), min_value=1, max_value=4096, initial=16)
    optimizer = forms.ChoiceField(label=_("Optimizer"), choices=OPTIMIZER_CHOICES, initial="adamw")
    precision = forms.ChoiceField(label=_("Precision"), choices=PRECISION_CHOICES, initial="bf16_mixed")
    seq_len = forms.IntegerField(label=_("Sequence length (tokens)"), min_value=1, max_value=1_048_576, initial=2048)
    micro_batch = forms.IntegerField(label=_("Micro-batch"), min_value=1, max_value=4096, initial=1)
    grad_checkpointing = forms.BooleanField(label=_("Gradient checkpointing"), required=False)
    parallel = forms.ChoiceField(label=_("Parallelism"), choices=PARALLEL_CHOICES, initial="single")
    gpus = forms.IntegerField(label=_("Cards (for DDP or FSDP)"), min_value=1, max_value=64, initial=1)
    headroom = forms.IntegerField(label=_("Headroom to keep free (%)"), min_value=0, max_value=90, initial=10)
    term = forms.TypedChoiceField(label=_("Term for the cheapest option"), coerce=int, initial=7,
                                  choices=[(3, _("3 days")), (7, _("7 days")), (30, _("30 days"))])

    # The run (optional): its size gives the term it needs and the cost of a result on each card.
    tokens_per_epoch = forms.IntegerField(label=_("Training tokens per epoch"), min_value=1, max_value=10**15,
                                          required=False)
    epochs = forms.IntegerField(label=_("Epochs"), min_value=1, max_value=1000, required=False, initial=1)
    steps = forms.IntegerField(label=_("Or: optimizer steps"), min_value=1, max_value=10**9, required=False)
    global_batch = forms.IntegerField(label=_("Global batch (sequences per step)"), min_value=1, max_value=10**6,
                                      required=False)
    report = forms.ChoiceField(label=_("Throughput from my pilot report"), required=False, choices=[])
    purpose = forms.ChoiceField(label=_("What the rental is for"), required=False,
                                choices=[("", _("Not said"))] + PURPOSE_CHOICES)
    experiments = forms.IntegerField(label=_("Independent experiments"), min_value=1, max_value=256, initial=1,
                                     required=False)

    def __init__(self, *args, reports=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.reports = {str(r.pk): r for r in reports}
        self.fields["report"].choices = [("", _("None: use the planner's estimate"))] + [
            (key, f"{moment(r.uploaded_at)} · {r.device_name or '?'} · {number(r.tokens_per_s)} {gettext('tokens/s')}")
            for key, r in self.reports.items()]  # made per request, in the reader's language

    def clean_config(self):
        text = self.cleaned_data.get("config", "").strip()
        if not text:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            raise forms.ValidationError(_("This is not valid JSON.")) from None
        if not isinstance(data, dict):
            raise forms.ValidationError(_("A config.json is a JSON object."))
        return data

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("preset") and not cleaned.get("config") and "config" not in self.errors:
            self.add_error("preset", _("Choose a model, or paste its config.json."))
        if cleaned.get("preset") and cleaned.get("config"):
            self.add_error("config", _("Give a preset or a config.json, not both."))
        if cleaned.get("tokens_per_epoch") and cleaned.get("steps"):
            self.add_error("steps", _("Give the run's size one way: tokens per epoch, or steps and a global batch."))
        if cleaned.get("steps") and not cleaned.get("global_batch"):
            self.add_error("global_batch", _("Give the global batch that goes with the number of steps."))
        return cleaned

    def chosen_report(self):
        return self.reports.get(self.cleaned_data.get("report") or "")

    def setup_fields(self) -> dict:
        data = self.cleaned_data
        return {"method": data["method"], "lora_rank": data["lora_rank"], "optimizer": data["optimizer"],
                "precision": data["precision"], "seq_len": data["seq_len"], "micro_batch": data["micro_batch"],
                "grad_checkpointing": data["grad_checkpointing"], "parallel": data["parallel"],
                "gpus": data["gpus"] if data["parallel"] != "single" else 1}
