"""One optimizer step and one validation pass: the same code for the timed run, the restore proof and the
scaling test, so what is measured is what is checked."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch

from .data import Batches
from .model import autocast
from .options import PilotOptions


@dataclass(frozen=True)
class StepResult:
    loss: float  # mean over the micro-batches of the step
    seconds: float  # wall time of the whole step, the device synchronised at both ends
    data_wait: float  # seconds of it spent preparing batches
    tokens: int  # tokens that took part (padding excluded)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_step(model, optimizer, scheduler, batches: Batches, options: PilotOptions, device: torch.device,
               *, no_sync=None) -> StepResult:
    """``grad_accum`` micro-batches, then the optimizer and the scheduler; gradients dropped after.

    ``no_sync``: DDP's context that skips the gradient all-reduce, used on
    every micro-batch but the last.
    """
    synchronize(device)
    started = time.perf_counter()
    wait, tokens, total = 0.0, 0, torch.zeros((), device=device, dtype=torch.float32)
    for micro in range(options.grad_accum):
        batch, waited = batches.next(device)
        wait += waited
        tokens += batches.tokens(batch)
        last = micro == options.grad_accum - 1
        skip = no_sync() if (no_sync is not None and not last) else contextlib.nullcontext()
        with skip:
            with autocast(options, device):
                loss = model(**batch).loss / options.grad_accum
            loss.backward()
        total += loss.detach().float()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    value = float(total.item())  # .item() waits for the device
    synchronize(device)
    return StepResult(value, time.perf_counter() - started, wait, tokens)


def validate(model, batches: Batches, count: int, options: PilotOptions, device: torch.device) -> tuple[float, float]:
    """Mean loss over ``count`` micro-batches without gradients, and the seconds it took."""
    if count == 0:
        return float("nan"), 0.0
    synchronize(device)
    started = time.perf_counter()
    model.eval()
    total = 0.0
    with torch.no_grad():
        for _ in range(count):
            batch, _waited = batches.next(device)
            with autocast(options, device):
                total += float(model(**batch).loss)
    model.train()
    synchronize(device)
    return total / count, time.perf_counter() - started
