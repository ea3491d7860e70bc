"""Writing a pilot checkpoint, and the fingerprints that prove a restore brought everything back.

A checkpoint is a directory: the model's trainable weights (all of them for
a full fine-tune; the adapters for LoRA, whose frozen base is rebuilt from
the model source and checked by fingerprint), the optimizer, the scheduler,
every random state (Python, NumPy, torch CPU and each CUDA device), the
data position, and ``pilot.json`` with the options and ``manifest`` — a
SHA-256 of every tensor and state taken from the live objects just before
writing. The restore (``restore.py``, in a fresh process) recomputes the
same fingerprints from what it loaded and names the first that differs.

The directory is written under a temporary name, each file flushed to disk,
then renamed: the write time is the honest one, and a crash never leaves a
half checkpoint under the real name.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from .model import trainable
from .options import PilotOptions

FORMAT = 1


def digest(value) -> str:
    """SHA-256 of a tensor's bytes (dtype and shape included), or of any other value's repr."""
    h = hashlib.sha256()
    if isinstance(value, torch.Tensor):
        tensor = value.detach().to("cpu").contiguous().reshape(-1)
        h.update(f"{tensor.dtype}{tuple(value.shape)}".encode())
        h.update(tensor.view(torch.uint8).numpy().tobytes())
    else:
        h.update(repr(value).encode())
    return h.hexdigest()


def rng_states(device: torch.device) -> dict:
    states = {"python": random.getstate(), "numpy": np.random.get_state(), "torch_cpu": torch.get_rng_state()}
    if device.type == "cuda":
        states["torch_cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch_cpu"])
    if "torch_cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["torch_cuda"])


def _scheduler_state(scheduler) -> dict:
    return {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"}


def fingerprints(model, optimizer, scheduler, batches, device: torch.device) -> dict[str, str]:
    """Name -> fingerprint, in the order a restore checks them: model, optimizer, scheduler, random states, data."""
    found: dict[str, str] = {}
    for name, tensor in model.state_dict().items():
        found[f"model {name}"] = digest(tensor)
    names = {id(p): n for n, p in trainable(model)}
    for number, group in enumerate(optimizer.param_groups):
        found[f"optimizer group {number} settings"] = digest(sorted((k, v) for k, v in group.items() if k != "params"))
        for param in group["params"]:
            for key, value in sorted(optimizer.state.get(param, {}).items()):
                found[f"optimizer state {names.get(id(param), '?')} {key}"] = digest(value)
    found["scheduler"] = digest(sorted(_scheduler_state(scheduler).items()))
    states = rng_states(device)
    found["random state python"] = digest(states["python"])
    found["random state numpy"] = digest((states["numpy"][0], states["numpy"][1].tobytes(), *states["numpy"][2:]))
    found["random state torch cpu"] = digest(states["torch_cpu"])
    for index, state in enumerate(states.get("torch_cuda", [])):
        found[f"random state torch cuda:{index}"] = digest(state)
    found["data position"] = str(batches.position)
    return found


def model_weights(model, options: PilotOptions) -> dict[str, torch.Tensor]:
    """What the checkpoint keeps of the model: all weights for a full fine-tune, the adapters for LoRA."""
    if options.method == "lora":
        return {name: p.detach() for name, p in trainable(model)}
    return model.state_dict()


def _save(obj, path: Path) -> None:
    with open(path, "wb") as handle:
        torch.save(obj, handle)
        handle.flush()
        os.fsync(handle.fileno())


def write_checkpoint(directory: str, *, model, optimizer, scheduler, batches, options: PilotOptions,
                     device: torch.device, step: int, extra: dict | None = None) -> dict:
    """Writes the checkpoint; returns ``{"path", "write_s", "bytes", "files"}``."""
    manifest = fingerprints(model, optimizer, scheduler, batches, device)
    final = Path(directory)
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    started = time.perf_counter()
    _save(model_weights(model, options), partial / "model.pt")
    _save(optimizer.state_dict(), partial / "optimizer.pt")
    _save(scheduler.state_dict(), partial / "scheduler.pt")
    _save(rng_states(device), partial / "rng.pt")
    meta = {"format": FORMAT, "step": step, "options": options.to_json(), "data": batches.state_dict(),
            "device": device.type, "threads": torch.get_num_threads(), "manifest": manifest, **(extra or {})}
    with open(partial / "pilot.json", "w", encoding="utf-8") as handle:
        json.dump(meta, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    if final.exists():
        shutil.rmtree(final)
    partial.rename(final)
    seconds = time.perf_counter() - started
    files = {p.name: p.stat().st_size for p in sorted(final.iterdir())}
    return {"path": str(final), "write_s": seconds, "bytes": sum(files.values()), "files": files}


def read_meta(directory: str) -> dict:
    with open(Path(directory) / "pilot.json", encoding="utf-8") as handle:
        return json.load(handle)


def load_into(directory: str, *, model, optimizer, scheduler, batches, options: PilotOptions) -> None:
    """Restores a checkpoint into freshly built objects (the random states too)."""
    path = Path(directory)
    weights = torch.load(path / "model.pt", map_location="cpu", weights_only=True)
    missing, unexpected = model.load_state_dict(weights, strict=options.method != "lora")
    if unexpected:
        raise ValueError(f"the checkpoint holds weights this model does not have: {unexpected[:3]}")
    if options.method == "lora":
        adapters = {name for name, _p in trainable(model)}
        absent = sorted(adapters & set(missing))
        if absent:
            raise ValueError(f"the checkpoint lacks adapter weights: {absent[:3]}")
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu", weights_only=True))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
    batches.load_state_dict(read_meta(directory)["data"])
    set_rng_states(torch.load(path / "rng.pt", weights_only=False))
