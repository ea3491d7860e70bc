"""``anchorgpu pilot run``: warm-up, timed steps on the longest batches, validation, checkpoint, restore proof.

The warm-up steps (not timed) let kernels compile, the allocator settle and
the optimizer create its state; the peaks are reset after them, so the
figures describe the steady state a term will run in. Each timed step is
synchronised with the device at both ends.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from .check import probe_and_judge
from .checkpoint import write_checkpoint
from .data import Batches, load_dataset
from .measure import MemoryProbe, versions
from .model import build_model, make_optimizer, make_scheduler, trainable
from .options import PilotOptions
from .restore import NEXT_STEP, next_step_record, run_fresh
from .steps import train_step, validate

SCHEMA_VERSION = 1
REPORT_KIND = "anchorgpu-pilot-report"


def percentile(values: list[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def spread(values: list[float]) -> dict:
    median = statistics.median(values)
    return {"median": median, "p90": percentile(values, 0.9), "min": min(values), "max": max(values),
            "mean": statistics.fmean(values), "stdev": statistics.pstdev(values),
            "spread": (max(values) - min(values)) / median if median else 0.0, "per_step": values}


def _bar(total: int, label: str, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit="step", file=sys.stderr, leave=False)


def run_pilot(options: PilotOptions, *, say: Callable[[str], None] = lambda _m: None) -> dict:
    """Runs the pilot and returns its report (also written to ``options.report``)."""
    options.validate()
    started_at = dt.datetime.now(dt.UTC)
    torch.manual_seed(options.seed)
    say("loading the model")
    built = build_model(options)
    model, device = built.model, built.device
    say("reading the data")
    dataset = load_dataset(options.data, options.text_field, options.model, int(built.config["vocab_size"]),
                           options.seq_len)
    batches = Batches(dataset.train, options.micro_batch)
    optimizer = make_optimizer(options, model)
    scheduler = make_scheduler(options, optimizer)
    probe = MemoryProbe(device)

    bar = _bar(options.warmup, "warm-up", options.progress)
    for _ in range(options.warmup):
        train_step(model, optimizer, scheduler, batches, options, device)
        bar and bar.update()
    bar and bar.close()
    batches.position = 0  # the timed steps start again from the longest batches
    probe.reset_peak()
    steps = []
    bar = _bar(options.steps, "timed steps", options.progress)
    for number in range(options.steps):
        result = train_step(model, optimizer, scheduler, batches, options, device)
        steps.append(result)
        probe.sample(number)
        bar and bar.update()
    bar and bar.close()
    memory = probe.summary()

    say("validation")
    validation_batches = Batches(dataset.validation, options.micro_batch)
    val_loss, val_seconds = validate(model, validation_batches, options.val_batches, options, device)

    say("writing the checkpoint")
    step_number = options.warmup + options.steps
    checkpoint = write_checkpoint(options.checkpoint_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                                  batches=batches, options=options, device=device, step=step_number,
                                  extra={"data_files": dataset.files})
    # The original process's next step is the reference the fresh process must reproduce.
    after = train_step(model, optimizer, scheduler, batches, options, device)
    (Path(options.checkpoint_dir) / NEXT_STEP).write_text(json.dumps(next_step_record(after, model)),
                                                          encoding="utf-8")
    restore = {"passed": None, "skipped": "--no-restore-check"}
    if options.restore_check:
        say("restoring the checkpoint in a fresh process")
        restore = run_fresh(options.checkpoint_dir)

    say("recording the accelerator stack")
    stack = probe_and_judge()
    report = build_report(options, built, dataset, steps, memory, (val_loss, val_seconds), checkpoint, restore,
                          started_at, stack=stack)
    write_report(report, options.report)
    return report


def build_report(options, built, dataset, steps, memory, validation, checkpoint, restore, started_at,
                 stack: dict | None = None) -> dict:
    seconds = [s.seconds for s in steps]
    waits = [s.data_wait for s in steps]
    tokens = sum(s.tokens for s in steps)
    total = sum(seconds)
    tokens_per_s = tokens / total if total else 0.0
    samples_per_s = len(steps) * options.global_batch / total if total else 0.0
    params = sum(p.numel() for p in built.model.parameters())
    warnings = []
    if not dataset.validation_is_held_out:
        warnings.append("fewer than ten examples: validation ran on the training examples")
    if dataset.truncated:
        warnings.append(f"{dataset.truncated} example(s) were longer than --seq-len and were cut")
    if len(dataset.train) < options.steps * options.global_batch:
        warnings.append("the data has fewer examples than the timed steps use: batches repeat")
    report = {
        "schema_version": SCHEMA_VERSION,
        "kind": REPORT_KIND,
        "created_at": started_at.isoformat(),
        "command": sys.argv,
        "options": options.to_json(),
        "model": {"source": options.model, "family": built.config.get("model_type"),
                  "config_sha256": built.config_sha256, "weights": built.weights, "parameters": params,
                  "trainable_parameters": sum(p.numel() for _n, p in trainable(built.model))},
        "data": {"files": dataset.files, "tokenizer": dataset.tokenizer, "train_examples": len(dataset.train),
                 "validation_examples": len(dataset.validation),
                 "validation_held_out": dataset.validation_is_held_out, "truncated": dataset.truncated,
                 "longest_tokens": len(dataset.train[0])},
        "device": {"type": built.device.type, "count": 1},
        "step_time_s": spread(seconds),
        "data_wait_s": {**spread(waits), "total": sum(waits), "share_of_step_time": sum(waits) / total if total else 0},
        "memory": memory,
        "tokens_per_s": tokens_per_s,
        "throughput": {"tokens_per_s": tokens_per_s, "samples_per_s": samples_per_s,
                       "tokens_per_hour": tokens_per_s * 3600, "samples_per_hour": samples_per_s * 3600,
                       "tokens_per_step": tokens / len(steps), "samples_per_step": options.global_batch,
                       "note": "useful tokens: padding excluded; on the longest batches, so a full epoch of "
                               "shorter ones runs faster"},
        "losses": [s.loss for s in steps],
        "validation": {"batches": options.val_batches, "loss": validation[0], "seconds": validation[1]},
        "checkpoint": checkpoint,
        "restore": restore,
        "versions": versions(built.device),
        "seed": options.seed,
        "warnings": warnings,
    }
    if stack is not None:  # optional and additive: schema_version 1 readers that do not know it skip it
        report["stack"] = stack
    return report


def write_report(report: dict, path: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    partial.replace(target)
