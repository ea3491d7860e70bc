"""What a pilot run is asked to do, checked before anything heavy is imported.

Pure Python: the command line fills ``PilotOptions``, ``validate()`` checks
what can be checked without torch (files exist, numbers are sane); the
model-dependent checks (sequence length against the model's maximum, LoRA
targets) happen once the model's config is read (``model.py``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import PilotInputError

METHODS = ("full", "lora")
OPTIMIZERS = ("adamw", "sgd")
PRECISIONS = ("fp32", "bf16-mixed", "bf16")
DEVICES = ("auto", "cpu", "cuda")
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class PilotOptions:
    model: str  # a Hugging Face-format directory (config + weights), or a config.json alone (random weights)
    data: tuple[str, ...]  # JSONL ({"text": ...} per line) or plain text files (one example per line)
    seq_len: int = 2048
    micro_batch: int = 1
    grad_accum: int = 1
    warmup: int = 2
    steps: int = 10
    method: str = "full"
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = DEFAULT_LORA_TARGETS
    optimizer: str = "adamw"
    lr: float = 1e-5
    precision: str = "bf16-mixed"
    grad_checkpointing: bool = False
    checkpoint_dir: str = "pilot-checkpoint"
    report: str = "pilot-report.json"
    val_batches: int = 2
    text_field: str = "text"
    seed: int = 0
    device: str = "auto"
    restore_check: bool = True
    progress: bool = True
    # Set by the scaling test on each rank; a single run leaves them alone.
    parallel: str = "single"  # single | ddp | fsdp
    extra: dict = field(default_factory=dict, compare=False)

    def validate(self) -> PilotOptions:
        path = Path(self.model)
        if not path.exists():
            raise PilotInputError("model", f"there is no model at {self.model}: give a Hugging Face-format "
                                           "directory (config.json and weights) or a config.json file.")
        if path.is_dir() and not (path / "config.json").is_file():
            raise PilotInputError("model", f"{self.model} has no config.json; is it a Hugging Face-format model "
                                           "directory?")
        if not self.data:
            raise PilotInputError("data", "give at least one data file (JSONL or text).")
        for name in self.data:
            data = Path(name)
            if not data.is_file():
                raise PilotInputError("data", f"there is no data file at {name}.")
        for name in ("seq_len", "micro_batch", "grad_accum", "steps", "lora_rank"):
            _whole(name, getattr(self, name), minimum=1)
        for name in ("warmup", "val_batches", "seed"):
            _whole(name, getattr(self, name), minimum=0)
        _choice("method", self.method, METHODS)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("precision", self.precision, PRECISIONS)
        _choice("device", self.device, DEVICES)
        _choice("parallel", self.parallel, ("single", "ddp", "fsdp"))
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not 0 < self.lr < 1:
            raise PilotInputError("lr", f"the learning rate is a number above 0 and below 1, not {self.lr!r}.")
        if self.method == "lora" and not self.lora_targets:
            raise PilotInputError("lora_targets", "LoRA needs at least one target module, e.g. q_proj,v_proj.")
        return self

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step on one process."""
        return self.micro_batch * self.grad_accum

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["data"] = list(self.data)
        data["lora_targets"] = list(self.lora_targets)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PilotOptions:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["data"] = tuple(values.get("data", ()))
        values["lora_targets"] = tuple(values.get("lora_targets", DEFAULT_LORA_TARGETS))
        return cls(**values)

    def replace(self, **changes: Any) -> PilotOptions:
        return dataclasses.replace(self, **changes)


def _whole(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PilotInputError(name, f"must be a whole number, not {value!r}.")
    if value < minimum:
        raise PilotInputError(name, f"must be at least {minimum}, not {value}.")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise PilotInputError(name, f"“{value}” is not one of {', '.join(allowed)}.")


def read_config(model: str) -> dict[str, Any]:
    """The model's config.json as a dict (the path is a directory holding it, or the file itself)."""
    path = Path(model)
    path = path / "config.json" if path.is_dir() else path
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PilotInputError("model", f"{path} cannot be read ({exc.strerror or exc}).") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PilotInputError("model", f"{path} is not a JSON config ({exc}).") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise PilotInputError("model", f"{path} is not a Hugging Face model config (no “model_type”).")
    return data
