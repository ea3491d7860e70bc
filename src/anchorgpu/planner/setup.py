"""What the customer wants to run: method, optimizer, precision, batch, parallelism, and the settings
that decide real peaks (gradient accumulation, attention kernel, loss, offloading, QLoRA details).

``TrainingSetup`` is a frozen value; ``validate(spec)`` checks it against a
model and raises ``PlannerInputError`` naming the first field at fault.
``setup_from_mapping`` reads the same fields from form or JSON input.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from anchorgpu.messages import gettext_noop

from .errors import PlannerInputError
from .model_spec import ATTENTION_MODULES, LINEAR_MODULES, MLP_MODULES, ModelSpec, resolve_targets

METHODS = ("full", "lora", "qlora")
OPTIMIZERS = ("adamw", "adamw8bit", "sgd", "sgd_momentum", "adafactor", "paged_adamw", "paged_adamw8bit")
PAGED_OPTIMIZERS = ("paged_adamw", "paged_adamw8bit")
PRECISIONS = ("fp32", "bf16_mixed", "bf16")
PARALLEL = ("single", "ddp", "fsdp", "zero2", "zero3")
ZERO = ("zero2", "zero3")  # DeepSpeed ZeRO stages; they also run on one GPU (e.g. ZeRO-Offload)
ADAPTER_DTYPES = ("fp32", "bf16")
ATTENTION = ("auto", "eager", "sdpa", "flash_attention_2", "flash_attention_3")
FLASH = ("flash_attention_2", "flash_attention_3")
CROSS_ENTROPY = ("standard", "chunked", "fused_linear")
OFFLOAD = ("none", "optimizer", "optimizer_and_params")
FSDP_VERSIONS = (1, 2)  # 2: fully_shard (FSDP2, per-parameter DTensor shards); 1: FullyShardedDataParallel
DEFAULT_LORA_TARGETS: tuple[str, ...] = ATTENTION_MODULES
# LoRA targets outside the decoder layers' linear modules (peft wraps them as Linear and Embedding), and the
# experts of a mixture-of-experts layer.
HEAD_TARGETS = ("lm_head", "embed_tokens")
EXPERTS_TARGET = "experts"

# Short names a form may use for groups of LoRA targets.
TARGET_GROUPS: Mapping[str, tuple[str, ...]] = {
    "attention": ATTENTION_MODULES, "mlp": MLP_MODULES, "all-linear": LINEAR_MODULES,
}


def _targets(value: Any) -> Any:
    """Turns "q_proj, v_proj", lists and group names into a tuple of module names; leaves odd input for validate."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, (list, tuple)):
        return value
    names: list[Any] = []
    for item in value:
        for name in TARGET_GROUPS.get(item, (item,)) if isinstance(item, str) else (item,):
            if name not in names:
                names.append(name)
    return tuple(names)


@dataclass(frozen=True)
class TrainingSetup:
    """One training step's configuration, per device.

    ``method``: ``full`` fine-tuning, ``lora`` (adapters on a frozen base) or
    ``qlora`` (adapters on a 4-bit NF4 base, bf16 compute).
    ``precision``: ``fp32``; ``bf16_mixed`` (fp32 weights as masters,
    bf16 compute via autocast or FSDP's mixed-precision policy); ``bf16``
    (weights, gradients and optimizer state all in bf16).
    ``lora_alpha`` only scales the adapters' update: it has no effect on memory.

    ``grad_accumulation``: micro-batches per optimizer step (1: none); from the
    second on, every gradient is alive through the forward and the backward.
    ``attention``: the kernel transformers runs (``auto``: what it picks for the
    model, SDPA or eager where soft-capping needs it). ``packed``: variable-length
    sequences packed in one row (position_ids / cu_seqlens, no padding).
    ``cross_entropy``: ``standard`` (full logits and their fp32 copy), ``chunked``
    (fp32 upcast one of 8 chunks at a time, torchtune's CEWithChunkedOutputLoss) or
    ``fused_linear`` (Liger's fused linear cross-entropy: logits never whole).
    ``activation_offload``: saved activations moved to pinned host memory.
    ``offload``: ``optimizer`` (state and fp32 masters on the CPU: ZeRO-Offload) or
    ``optimizer_and_params`` (FSDP2's CPUOffloadPolicy, ZeRO-3's offload_param).
    ``lora_dropout``: peft's dropout on each adapter's input. ``quantize_lm_head``
    and ``double_quant``: QLoRA only (bitsandbytes 4-bit head; quantised absmax).
    ``prepare_kbit_training``: QLoRA only, peft's ``prepare_model_for_kbit_training``
    as most single-GPU QLoRA scripts call it: every weight not in 4 bits (embeddings,
    head, norms) cast to fp32, trained under autocast (bf16_mixed).
    ``fsdp_version``: with ``parallel="fsdp"``, which FSDP runs: ``2`` (the default: ``fully_shard``, FSDP2)
    or ``1`` (the ``FullyShardedDataParallel`` wrapper, flat parameters, FULL_SHARD with BACKWARD_PRE
    prefetch). They differ in where the gathered weights live (FSDP1 all-gathers straight into the flat
    parameter, FSDP2 into a buffer it then copies out) and on which CUDA streams the allocator serves them
    (``analytic._fsdp_streams``). Only FSDP reads it.
    """

    method: str = "full"
    lora_rank: int = 16
    lora_alpha: float = 32.0
    lora_targets: tuple[str, ...] = DEFAULT_LORA_TARGETS
    adapter_dtype: str = "fp32"
    optimizer: str = "adamw"
    precision: str = "bf16_mixed"
    seq_len: int = 2048
    micro_batch: int = 1
    grad_checkpointing: bool = False
    parallel: str = "single"
    gpus: int = 1
    grad_accumulation: int = 1
    attention: str = "auto"
    packed: bool = False
    cross_entropy: str = "standard"
    activation_offload: bool = False
    offload: str = "none"
    lora_dropout: float = 0.0
    quantize_lm_head: bool = False
    double_quant: bool = True
    prepare_kbit_training: bool = False
    fsdp_version: int = 2

    def __post_init__(self):
        object.__setattr__(self, "lora_targets", _targets(self.lora_targets))

    @property
    def is_lora(self) -> bool:
        return self.method in {"lora", "qlora"}

    @property
    def tokens_per_step(self) -> int:
        """Tokens one device processes in one micro-batch."""
        return self.seq_len * self.micro_batch

    @property
    def is_zero(self) -> bool:
        return self.parallel in ZERO

    @property
    def is_paged(self) -> bool:
        return self.optimizer in PAGED_OPTIMIZERS

    def attention_for(self, spec: ModelSpec) -> str:
        """The attention kernel that runs: the one chosen, or for ``auto`` the model's own (sdpa or eager)."""
        return spec.attention if self.attention == "auto" else self.attention

    def replace(self, **changes: Any) -> TrainingSetup:
        return dataclasses.replace(self, **changes)

    def validate(self, spec: ModelSpec) -> TrainingSetup:
        """Checks the setup against ``spec``; returns it unchanged or raises ``PlannerInputError``."""
        _choice("method", self.method, METHODS)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("precision", self.precision, PRECISIONS)
        _choice("parallel", self.parallel, PARALLEL)
        _whole("seq_len", self.seq_len)
        _whole("micro_batch", self.micro_batch)
        _whole("gpus", self.gpus)
        if not isinstance(self.grad_checkpointing, bool):
            raise PlannerInputError("grad_checkpointing", gettext_noop("gradient checkpointing is on or off (true "
                                                                       "or false)."))
        if self.seq_len > spec.max_position_embeddings:
            raise PlannerInputError("seq_len", gettext_noop("a sequence of %(seq_len)s tokens is longer than the "
                                                            "%(positions)s positions %(model)s supports."),
                                    seq_len=self.seq_len, positions=spec.max_position_embeddings, model=spec.label)
        if self.parallel == "single" and self.gpus != 1:
            raise PlannerInputError("gpus", gettext_noop("one device means gpus = 1, not %(gpus)s; choose ddp or "
                                                         "fsdp for several."), gpus=self.gpus)
        if self.parallel in {"ddp", "fsdp"} and self.gpus < 2:
            raise PlannerInputError("gpus", gettext_noop("%(parallel)s needs at least 2 GPUs, not %(gpus)s."),
                                    parallel=self.parallel.upper(), gpus=self.gpus)
        self._validate_settings(spec)
        if self.is_lora:
            self._validate_lora(spec)
        else:
            self._refuse_lora_only()
        return self

    def _validate_settings(self, spec: ModelSpec) -> None:
        _whole("grad_accumulation", self.grad_accumulation)
        _choice("attention", self.attention, ATTENTION)
        _choice("cross_entropy", self.cross_entropy, CROSS_ENTROPY)
        _choice("offload", self.offload, OFFLOAD)
        for name in ("packed", "activation_offload", "quantize_lm_head", "double_quant", "prepare_kbit_training"):
            if not isinstance(getattr(self, name), bool):
                raise PlannerInputError(name, _ON_OFF[name])
        attention = self.attention_for(spec)
        if attention in FLASH and self.precision == "fp32":
            raise PlannerInputError("attention", gettext_noop("FlashAttention computes in bf16 or fp16 only; "
                                                              "choose sdpa or eager for fp32, or bf16 precision."))
        if attention == "sdpa" and spec.attn_logit_softcapping is not None:
            raise PlannerInputError("attention", gettext_noop("%(model)s soft-caps its attention scores, which "
                                                              "SDPA cannot do; choose eager or "
                                                              "flash_attention_2."), model=spec.label)
        if isinstance(self.fsdp_version, bool) or self.fsdp_version not in FSDP_VERSIONS:
            raise PlannerInputError("fsdp_version", gettext_noop("“%(value)s” is not one of %(allowed)s."),
                                    value=self.fsdp_version, allowed=", ".join(map(str, FSDP_VERSIONS)))
        if self.offload == "optimizer_and_params" and self.parallel not in {"fsdp", "zero3"}:
            raise PlannerInputError("offload", gettext_noop("parameters are offloaded to the CPU only when they "
                                                            "are sharded: choose fsdp (CPUOffloadPolicy) or zero3 "
                                                            "(offload_param)."))
        if self.offload == "optimizer" and self.parallel == "fsdp":
            raise PlannerInputError("offload", gettext_noop("FSDP offloads parameters, gradients and optimizer "
                                                            "state together; choose optimizer_and_params."))
        if self.offload != "none" and self.optimizer in {"adamw8bit", *PAGED_OPTIMIZERS}:
            raise PlannerInputError("optimizer", gettext_noop("%(optimizer)s runs on the GPU; with the optimizer "
                                                              "offloaded to the CPU choose adamw (DeepSpeed's CPU "
                                                              "Adam) or another plain optimizer."),
                                    optimizer=self.optimizer)

    def _refuse_lora_only(self) -> None:
        dropout = self.lora_dropout
        if not (isinstance(dropout, (int, float)) and not isinstance(dropout, bool) and dropout == 0):
            raise PlannerInputError("lora_dropout", gettext_noop("LoRA dropout applies to adapters; %(method)s "
                                                                 "fine-tuning has none, so leave it at 0."),
                                    method=self.method)
        self._refuse_qlora_only()

    def _refuse_qlora_only(self) -> None:
        if self.method == "qlora":
            return
        if self.quantize_lm_head is True:
            raise PlannerInputError("quantize_lm_head", gettext_noop("only QLoRA quantises the output head to 4 "
                                                                     "bits; choose method qlora or leave it off."))
        if self.double_quant is False:
            raise PlannerInputError("double_quant", gettext_noop("double quantisation is a QLoRA setting; choose "
                                                                 "method qlora or leave it on."))
        if self.prepare_kbit_training is True:
            raise PlannerInputError("prepare_kbit_training", gettext_noop("peft's k-bit preparation is for a "
                                                                          "quantised base; choose method qlora or "
                                                                          "leave it off."))

    def _validate_lora(self, spec: ModelSpec) -> None:
        _whole("lora_rank", self.lora_rank)
        alpha = self.lora_alpha
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha <= 0:
            raise PlannerInputError("lora_alpha", gettext_noop("the LoRA alpha must be a positive number, not "
                                                               "%(value)s."), value=repr(alpha))
        _choice("adapter_dtype", self.adapter_dtype, ADAPTER_DTYPES)
        dropout = self.lora_dropout
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise PlannerInputError("lora_dropout", gettext_noop("the LoRA dropout is a probability from 0 up to "
                                                                 "(not including) 1, not %(value)s."),
                                    value=repr(dropout))
        self._refuse_qlora_only()
        if self.prepare_kbit_training is True and self.precision != "bf16_mixed":
            raise PlannerInputError("prepare_kbit_training", gettext_noop("peft's k-bit preparation casts the "
                                                                          "weights not in 4 bits to fp32 and is "
                                                                          "trained under autocast: choose "
                                                                          "bf16_mixed."))
        if self.method == "qlora" and self.precision == "fp32":
            raise PlannerInputError("precision", gettext_noop("QLoRA computes in bf16 on its 4-bit base weights; "
                                                              "choose bf16_mixed or bf16."))
        targets = self.lora_targets
        if not isinstance(targets, tuple) or not targets:
            raise PlannerInputError("lora_targets", gettext_noop("LoRA needs at least one target module, e.g. "
                                                                 "%(example)s."),
                                    example=", ".join(DEFAULT_LORA_TARGETS))
        targets = resolve_targets(spec, targets)
        linear = _linear_names(spec)
        for name in targets:
            if name == EXPERTS_TARGET:
                if not getattr(spec, "is_moe", False):
                    raise PlannerInputError("lora_targets", gettext_noop("“experts” targets the experts of a "
                                                                         "mixture-of-experts layer, and %(model)s "
                                                                         "has none (it is a dense model)."),
                                            model=spec.label)
                continue
            if not isinstance(name, str) or name not in linear + HEAD_TARGETS:
                raise PlannerInputError("lora_targets", gettext_noop("“%(name)s” is not a linear layer of "
                                                                     "%(model)s; its linear layers are %(layers)s."),
                                        name=name, model=spec.label, layers=", ".join(linear + HEAD_TARGETS))
            rows, columns = (spec.hidden_size, spec.vocab_size) if name in HEAD_TARGETS else (
                spec.linear(name).in_features, spec.linear(name).out_features)
            if self.lora_rank > min(rows, columns):
                raise PlannerInputError("lora_rank", gettext_noop("rank %(rank)s is larger than %(name)s itself "
                                                                  "(%(rows)s × %(columns)s)."),
                                        rank=self.lora_rank, name=name, rows=rows, columns=columns)


def _linear_names(spec: ModelSpec) -> tuple[str, ...]:
    names = getattr(spec, "linear_names", None)
    return tuple(names()) if names else LINEAR_MODULES


_ON_OFF = {
    "packed": gettext_noop("packed batches are on or off (true or false)."),
    "activation_offload": gettext_noop("activation offloading is on or off (true or false)."),
    "quantize_lm_head": gettext_noop("a 4-bit lm_head is on or off (true or false)."),
    "double_quant": gettext_noop("double quantisation is on or off (true or false)."),
    "prepare_kbit_training": gettext_noop("peft's k-bit preparation is on or off (true or false)."),
}


def _choice(field: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise PlannerInputError(field, gettext_noop("“%(value)s” is not one of %(allowed)s."), value=value,
                                allowed=", ".join(allowed))


# Per field: (not a whole number, not positive). Whole sentences, so each language can word them.
_WHOLE = {
    "seq_len": (gettext_noop("the sequence length must be a whole number, not %(value)s."),
                gettext_noop("the sequence length must be positive, not %(value)s.")),
    "micro_batch": (gettext_noop("the micro-batch must be a whole number, not %(value)s."),
                    gettext_noop("the micro-batch must be positive, not %(value)s.")),
    "gpus": (gettext_noop("the number of GPUs must be a whole number, not %(value)s."),
             gettext_noop("the number of GPUs must be positive, not %(value)s.")),
    "lora_rank": (gettext_noop("the LoRA rank must be a whole number, not %(value)s."),
                  gettext_noop("the LoRA rank must be positive, not %(value)s.")),
    "grad_accumulation": (gettext_noop("gradient accumulation is a whole number of micro-batches per step, not "
                                       "%(value)s."),
                          gettext_noop("gradient accumulation needs at least 1 micro-batch per optimizer step (1 "
                                       "means none), not %(value)s.")),
}


def _whole(field: str, value: Any) -> None:
    not_whole, not_positive = _WHOLE[field]
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlannerInputError(field, not_whole, value=repr(value))
    if value <= 0:
        raise PlannerInputError(field, not_positive, value=value)


_FIELDS = {f.name: f for f in dataclasses.fields(TrainingSetup)}


def _parse(name: str, value: Any) -> Any:
    kind = _FIELDS[name].type
    if not isinstance(value, str):
        return value
    text = value.strip()
    if kind == "bool":
        if text.lower() in {"true", "yes", "on", "1"}:
            return True
        if text.lower() in {"false", "no", "off", "0", ""}:
            return False
        raise PlannerInputError(name, gettext_noop("“%(value)s” is neither true nor false."), value=value)
    if kind in {"int", "float"}:
        try:
            return int(text) if kind == "int" else float(text)
        except ValueError:
            raise PlannerInputError(name, gettext_noop("“%(value)s” is not a number."), value=value) from None
    return text


def setup_from_mapping(data: Mapping[str, Any]) -> TrainingSetup:
    """Builds a setup from form or JSON fields (strings allowed); unknown fields are refused."""
    if not isinstance(data, Mapping):
        raise PlannerInputError("setup", gettext_noop("the training setup must be an object of fields."))
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise PlannerInputError(str(unknown[0]), gettext_noop("unknown field; the fields are %(fields)s."),
                                fields=", ".join(_FIELDS))
    return TrainingSetup(**{name: _parse(name, value) for name, value in data.items()})
