"""The planner page's form: a model (preset or pasted config.json) and a training setup."""

from __future__ import annotations

import json

from django import forms
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from anchorgpu.formats.display import moment, number
from anchorgpu.orders.models import PURPOSE_CHOICES
from anchorgpu.planner.presets import PRESETS

MAX_CONFIG = 20_000

METHOD_CHOICES = [("full", _("Full fine-tuning")), ("lora", _("LoRA adapters")),
                  ("qlora", _("QLoRA (LoRA on a 4-bit base)"))]
OPTIMIZER_CHOICES = [("adamw", "AdamW"), ("adamw8bit", _("AdamW 8-bit")), ("sgd", "SGD"),
                     ("sgd_momentum", _("SGD with momentum")), ("adafactor", "Adafactor"),
                     ("paged_adamw", _("Paged AdamW (bitsandbytes)")),
                     ("paged_adamw8bit", _("Paged AdamW 8-bit (bitsandbytes)"))]
PRECISION_CHOICES = [("bf16_mixed", _("bf16 mixed (fp32 master weights)")), ("bf16", _("pure bf16")),
                     ("fp32", "fp32")]
PARALLEL_CHOICES = [("single", _("One card")), ("ddp", _("DDP (a full copy per card)")),
                    ("fsdp", _("FSDP (full shard)")),
                    ("zero2", _("DeepSpeed ZeRO-2 (gradients and optimizer state sharded)")),
                    ("zero3", _("DeepSpeed ZeRO-3 (everything sharded)"))]
ATTENTION_CHOICES = [("auto", _("Automatic (what transformers picks)")), ("sdpa", "SDPA"), ("eager", "eager"),
                     ("flash_attention_2", "FlashAttention 2"), ("flash_attention_3", "FlashAttention 3")]
CROSS_ENTROPY_CHOICES = [("standard", _("Standard")), ("chunked", _("Chunked")),
                         ("fused_linear", _("Fused linear (Liger)"))]
OFFLOAD_CHOICES = [("none", _("Nothing: all on the card")), ("optimizer", _("Optimizer state")),
                   ("optimizer_and_params", _("Optimizer state and weights"))]
ADAPTER_DTYPE_CHOICES = [("fp32", "fp32"), ("bf16", "bf16")]
ON_OFF_CHOICES = [("true", pgettext_lazy("a setting", "On")), ("false", pgettext_lazy("a setting", "Off"))]

# The fields of the "Advanced settings" part, named as the setup's JSON fields. Each reaches the setup only
# when it says something else than the setup's default, so a link made before they existed plans as it did.
ADVANCED = ("grad_accumulation", "lora_targets", "lora_dropout", "adapter_dtype", "attention", "packed",
            "cross_entropy", "activation_offload", "offload", "quantize_lm_head", "double_quant",
            "prepare_kbit_training")
ADVANCED_DEFAULTS = {"grad_accumulation": 1, "lora_targets": "", "lora_dropout": 0.0, "adapter_dtype": "fp32",
                     "attention": "auto", "packed": False, "cross_entropy": "standard", "activation_offload": False,
                     "offload": "none", "quantize_lm_head": False, "double_quant": True,
                     "prepare_kbit_training": False}


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
    gpus = forms.IntegerField(label=_("Cards (for DDP, FSDP or ZeRO)"), min_value=1, max_value=64, initial=1)
    # Advanced settings: all optional, each with its effect on memory in one line.
    grad_accumulation = forms.IntegerField(
        label=_("Gradient accumulation (micro-batches per step)"), min_value=1, max_value=4096, required=False,
        initial=1, help_text=_("Gradients stay in memory across the micro-batches; with FSDP they stay unsharded."),
        error_messages={"min_value": _("Gradient accumulation counts micro-batches per optimizer step: 1 or more.")})
    lora_targets = forms.CharField(
        label=_("LoRA targets"), required=False, max_length=300,
        widget=forms.TextInput(attrs={"placeholder": "attention", "spellcheck": "false"}),
        help_text=_("attention, mlp, all-linear or module names (q_proj, v_proj); also lm_head, embed_tokens, "
                    "and experts on a mixture of experts. Each target adds its adapters and their optimizer state."))
    lora_dropout = forms.FloatField(
        label=_("LoRA dropout"), min_value=0, max_value=0.99, required=False, initial=0,
        help_text=_("Above 0, each adapter keeps a dropped copy of its input for the backward pass."))
    adapter_dtype = forms.ChoiceField(
        label=_("Adapter dtype"), choices=ADAPTER_DTYPE_CHOICES, required=False, initial="fp32",
        help_text=_("bf16 adapters take half the memory of fp32 ones, with their gradients and optimizer state."))
    attention = forms.ChoiceField(
        label=_("Attention implementation"), choices=ATTENTION_CHOICES, required=False, initial="auto",
        help_text=_("Eager attention keeps a score matrix that grows with the square of the sequence; "
                    "the others do not."))
    packed = forms.BooleanField(
        label=_("Packed sequences (no padding)"), required=False,
        help_text=_("Several sequences share a row without padding; attention stays within each."))
    cross_entropy = forms.ChoiceField(
        label=_("Cross-entropy"), choices=CROSS_ENTROPY_CHOICES, required=False, initial="standard",
        help_text=_("Chunked or fused, the loss never holds the logits of the whole batch at once."))
    activation_offload = forms.BooleanField(
        label=_("Offload activations to host memory"), required=False,
        help_text=_("Saved activations wait in host memory until the backward pass needs them."))
    offload = forms.ChoiceField(
        label=_("CPU offload"), choices=OFFLOAD_CHOICES, required=False, initial="none",
        help_text=_("What waits in host memory instead of on the card (FSDP CPU offload, ZeRO-Offload)."))
    quantize_lm_head = forms.BooleanField(
        label=_("QLoRA: 4-bit output head"), required=False,
        help_text=_("Quantises lm_head too; by default it stays in bf16."))
    double_quant = forms.TypedChoiceField(
        label=_("QLoRA: double quantisation"), choices=ON_OFF_CHOICES, required=False, initial="true",
        coerce=lambda value: value == "true", empty_value=None,
        help_text=_("Quantises the 4-bit weights' scales too, saving about 0.4 bits per weight."))
    prepare_kbit_training = forms.BooleanField(
        label=_("QLoRA: peft's k-bit preparation"), required=False,
        help_text=_("As most QLoRA scripts call it: the weights not in 4 bits (embeddings, head, norms) "
                    "kept in fp32."))

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
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the JSON reader goes
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
                "gpus": data["gpus"] if data["parallel"] != "single" else 1, **self.advanced_fields()}

    def advanced_fields(self) -> dict:
        """The advanced settings the customer changed (left empty or at its default, a field is left out)."""
        data = self.cleaned_data
        given = {name: data.get(name) for name in ADVANCED}
        return {name: value for name, value in given.items()
                if value not in (None, "") and value != ADVANCED_DEFAULTS[name]}

    def advanced_open(self) -> bool:
        """Whether the advanced part opens by itself: one of its fields is at fault or was changed."""
        if not self.is_bound:
            return False
        if any(name in self.errors for name in ADVANCED):
            return True
        return self.is_valid() and bool(self.advanced_fields())
