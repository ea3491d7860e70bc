"""The model a pilot trains: read from a local directory (or built from a config with random weights), then
set up as asked (LoRA, gradient checkpointing, precision) on the chosen device. Nothing comes from a hub."""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from .data import file_sha256
from .errors import PilotInputError
from .options import PilotOptions, read_config

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


@dataclass
class BuiltModel:
    model: torch.nn.Module
    config: dict
    device: torch.device
    weights: str  # where the weights came from: file hashes, or "random (seed N)"
    config_sha256: str


def pick_device(choice: str) -> torch.device:
    if choice == "cuda" or (choice == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise PilotInputError("device", "no CUDA or ROCm device is visible to PyTorch.")
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def weight_files(model: str) -> list[Path]:
    path = Path(model)
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file())


def check_against_config(options: PilotOptions, config: dict) -> None:
    """What depends on the model: the sequence length and the LoRA targets."""
    maximum = config.get("max_position_embeddings")
    if isinstance(maximum, int) and options.seq_len > maximum:
        raise PilotInputError("seq_len", f"a sequence of {options.seq_len} tokens is longer than the {maximum} "
                                         "positions this model supports.")


def _check_lora_targets(model: torch.nn.Module, targets: tuple[str, ...]) -> None:
    names = {name.rsplit(".", 1)[-1] for name, module in model.named_modules()
             if isinstance(module, torch.nn.Linear)}
    for target in targets:
        if target not in names:
            raise PilotInputError("lora_targets", f"“{target}” is not a linear layer of this model; its linear "
                                                  f"layers are {', '.join(sorted(names))}.")


def build_model(options: PilotOptions, device: torch.device | None = None) -> BuiltModel:
    """The model on ``device``, set up for ``options``; the same options build the same weights every time."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = read_config(options.model)
    check_against_config(options, config)
    device = device or pick_device(options.device)
    dtype = torch.bfloat16 if options.precision == "bf16" else torch.float32
    files = weight_files(options.model)
    config_path = Path(options.model) / "config.json" if Path(options.model).is_dir() else Path(options.model)
    try:
        if files:
            model = AutoModelForCausalLM.from_pretrained(options.model, local_files_only=True, dtype=dtype)
            weights = ", ".join(f"{p.name} sha256:{file_sha256(str(p))}" for p in files)
        else:
            hf = dict(config)
            hf_config = AutoConfig.for_model(hf.pop("model_type"), **hf)
            torch.manual_seed(options.seed)  # the same seed builds the same random weights in a fresh process
            model = AutoModelForCausalLM.from_config(hf_config, dtype=dtype)
            weights = f"random (seed {options.seed})"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PilotInputError("model", f"{options.model} cannot be loaded as a causal language model "
                                       f"({type(exc).__name__}: {str(exc)[:300]}).") from None
    model.config.use_cache = False
    if options.method == "lora":
        _check_lora_targets(model, options.lora_targets)
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=options.lora_rank, lora_alpha=2 * options.lora_rank,
                                                 target_modules=list(options.lora_targets), lora_dropout=0.0,
                                                 bias="none", task_type="CAUSAL_LM"))
    if options.grad_checkpointing:
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        kwargs = {"use_reentrant": False}
        if hasattr(base, "activation_checkpointing_enable"):  # transformers 5 renamed it
            base.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    model.to(device)
    model.train()
    return BuiltModel(model, config, device, weights, hashlib.sha256(config_path.read_bytes()).hexdigest())


def autocast(options: PilotOptions, device: torch.device):
    """bf16 mixed precision: fp32 master weights, bf16 compute. The others compute in the weights' dtype."""
    if options.precision == "bf16-mixed":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def trainable(model: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad]


def make_optimizer(options: PilotOptions, model: torch.nn.Module) -> torch.optim.Optimizer:
    params = [p for _name, p in trainable(model)]
    if options.optimizer == "sgd":
        return torch.optim.SGD(params, lr=options.lr, momentum=0.9)
    return torch.optim.AdamW(params, lr=options.lr, weight_decay=0.0)


def make_scheduler(options: PilotOptions, optimizer: torch.optim.Optimizer):
    """Linear warm-up over the warm-up steps, then constant: enough to prove the scheduler's state restores."""
    warmup = max(1, options.warmup)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
