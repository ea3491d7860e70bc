"""What the customer wants to run: method, optimizer, precision, batch, parallelism.

``TrainingSetup`` is a frozen value; ``validate(spec)`` checks it against a
model and raises ``PlannerInputError`` naming the first field at fault.
``setup_from_mapping`` reads the same fields from form or JSON input.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

from anchorgpu.messages import gettext_noop

from .errors import PlannerInputError
from .model_spec import ATTENTION_MODULES, LINEAR_MODULES, MLP_MODULES, ModelSpec

METHODS = ("full", "lora", "qlora")
OPTIMIZERS = ("adamw", "adamw8bit", "sgd", "sgd_momentum", "adafactor")
PRECISIONS = ("fp32", "bf16_mixed", "bf16")
PARALLEL = ("single", "ddp", "fsdp")
ADAPTER_DTYPES = ("fp32", "bf16")
DEFAULT_LORA_TARGETS: tuple[str, ...] = ATTENTION_MODULES

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

    def __post_init__(self):
        object.__setattr__(self, "lora_targets", _targets(self.lora_targets))

    @property
    def is_lora(self) -> bool:
        return self.method in {"lora", "qlora"}

    @property
    def tokens_per_step(self) -> int:
        """Tokens one device processes in one micro-batch."""
        return self.seq_len * self.micro_batch

    def replace(self, **changes: Any) -> "TrainingSetup":
        return dataclasses.replace(self, **changes)

    def validate(self, spec: ModelSpec) -> "TrainingSetup":
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
        if self.parallel != "single" and self.gpus < 2:
            raise PlannerInputError("gpus", gettext_noop("%(parallel)s needs at least 2 GPUs, not %(gpus)s."),
                                    parallel=self.parallel.upper(), gpus=self.gpus)
        if self.is_lora:
            self._validate_lora(spec)
        return self

    def _validate_lora(self, spec: ModelSpec) -> None:
        _whole("lora_rank", self.lora_rank)
        alpha = self.lora_alpha
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha <= 0:
            raise PlannerInputError("lora_alpha", gettext_noop("the LoRA alpha must be a positive number, not "
                                                               "%(value)s."), value=repr(alpha))
        _choice("adapter_dtype", self.adapter_dtype, ADAPTER_DTYPES)
        if self.method == "qlora" and self.precision == "fp32":
            raise PlannerInputError("precision", gettext_noop("QLoRA computes in bf16 on its 4-bit base weights; "
                                                              "choose bf16_mixed or bf16."))
        targets = self.lora_targets
        if not isinstance(targets, tuple) or not targets:
            raise PlannerInputError("lora_targets", gettext_noop("LoRA needs at least one target module, e.g. "
                                                                 "%(example)s."),
                                    example=", ".join(DEFAULT_LORA_TARGETS))
        for name in targets:
            if not isinstance(name, str) or name not in LINEAR_MODULES:
                raise PlannerInputError("lora_targets", gettext_noop("“%(name)s” is not a linear layer of "
                                                                     "%(model)s; its linear layers are %(layers)s."),
                                        name=name, model=spec.label, layers=", ".join(LINEAR_MODULES))
            shape = spec.linear(name)
            if self.lora_rank > min(shape.in_features, shape.out_features):
                raise PlannerInputError("lora_rank", gettext_noop("rank %(rank)s is larger than %(name)s itself "
                                                                  "(%(rows)s × %(columns)s)."),
                                        rank=self.lora_rank, name=name, rows=shape.in_features,
                                        columns=shape.out_features)


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
