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
        _whole("seq_len", self.seq_len, "the sequence length")
        _whole("micro_batch", self.micro_batch, "the micro-batch")
        _whole("gpus", self.gpus, "the number of GPUs")
        if not isinstance(self.grad_checkpointing, bool):
            raise PlannerInputError("grad_checkpointing", "gradient checkpointing is on or off (true or false).")
        if self.seq_len > spec.max_position_embeddings:
            raise PlannerInputError("seq_len", f"a sequence of {self.seq_len} tokens is longer than the "
                                               f"{spec.max_position_embeddings} positions {spec.label} supports.")
        if self.parallel == "single" and self.gpus != 1:
            raise PlannerInputError("gpus", f"one device means gpus = 1, not {self.gpus}; "
                                            "choose ddp or fsdp for several.")
        if self.parallel != "single" and self.gpus < 2:
            raise PlannerInputError("gpus", f"{self.parallel.upper()} needs at least 2 GPUs, not {self.gpus}.")
        if self.is_lora:
            self._validate_lora(spec)
        return self

    def _validate_lora(self, spec: ModelSpec) -> None:
        _whole("lora_rank", self.lora_rank, "the LoRA rank")
        alpha = self.lora_alpha
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha <= 0:
            raise PlannerInputError("lora_alpha", f"the LoRA alpha must be a positive number, not {alpha!r}.")
        _choice("adapter_dtype", self.adapter_dtype, ADAPTER_DTYPES)
        if self.method == "qlora" and self.precision == "fp32":
            raise PlannerInputError("precision", "QLoRA computes in bf16 on its 4-bit base weights; "
                                                 "choose bf16_mixed or bf16.")
        targets = self.lora_targets
        if not isinstance(targets, tuple) or not targets:
            raise PlannerInputError("lora_targets", "LoRA needs at least one target module, e.g. "
                                                    f"{', '.join(DEFAULT_LORA_TARGETS)}.")
        for name in targets:
            if not isinstance(name, str) or name not in LINEAR_MODULES:
                raise PlannerInputError("lora_targets", f"“{name}” is not a linear layer of {spec.label}; "
                                                        f"its linear layers are {', '.join(LINEAR_MODULES)}.")
            shape = spec.linear(name)
            if self.lora_rank > min(shape.in_features, shape.out_features):
                raise PlannerInputError("lora_rank", f"rank {self.lora_rank} is larger than {name} itself "
                                                     f"({shape.in_features} × {shape.out_features}).")


def _choice(field: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise PlannerInputError(field, f"“{value}” is not one of {', '.join(allowed)}.")


def _whole(field: str, value: Any, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlannerInputError(field, f"{what} must be a whole number, not {value!r}.")
    if value <= 0:
        raise PlannerInputError(field, f"{what} must be positive, not {value}.")


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
        raise PlannerInputError(name, f"“{value}” is neither true nor false.")
    if kind in {"int", "float"}:
        try:
            return int(text) if kind == "int" else float(text)
        except ValueError:
            raise PlannerInputError(name, f"“{value}” is not a number.") from None
    return text


def setup_from_mapping(data: Mapping[str, Any]) -> TrainingSetup:
    """Builds a setup from form or JSON fields (strings allowed); unknown fields are refused."""
    if not isinstance(data, Mapping):
        raise PlannerInputError("setup", "the training setup must be an object of fields.")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise PlannerInputError(str(unknown[0]), f"unknown field; the fields are {', '.join(_FIELDS)}.")
    return TrainingSetup(**{name: _parse(name, value) for name, value in data.items()})
