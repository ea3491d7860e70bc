"""The planner against a real GPU: one prepared script for a session that is lent one (issues 5 and 6).

For a handful of ~1B-parameter configurations (Llama-3.2-1B's shape, random weights, nothing from a
hub) it runs a real warm-up step and a measured step on the GPU and prints, beside each other:

* ``torch.cuda.max_memory_allocated`` of the measured step (live tensors, as the allocator saw them)
  against the simulation's and the analytic engine's live peak (no reserve): like with like;
* the planner's three named measures for the card's generation (``Breakdown.measures``):
  ``allocated_peak_bytes`` against ``max_memory_allocated``, ``reserved_peak_bytes`` against
  ``max_memory_reserved`` (the allocator model) and ``device_used_bytes`` against NVML's used memory
  (the context and NCCL allowances).

Then it runs the pilot kit on the same shape (LoRA and full) and prints the report's key figures.

    .venv/bin/python bench/gpu_validation.py              # on a GPU machine, under 5 minutes on an H200
    .venv/bin/python bench/gpu_validation.py --cpu-smoke  # a tiny shape on the CPU: checks the script runs

On the CPU (``--cpu-smoke``) the "allocated" column is the storage tracker's peak of a real CPU step,
so the script's plumbing is tested without a GPU; its figures say nothing about a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from anchorgpu.planner.analytic import estimate
from anchorgpu.planner.device_memory import card_generation
from anchorgpu.planner.hf_build import build_meta_model, to_hf_config
from anchorgpu.planner.presets import preset_spec
from anchorgpu.planner.setup import TrainingSetup
from anchorgpu.planner.simulate import measure_step, simulate

GiB = 1024**3
CONFIGS = [
    ("LoRA r16 bf16 s2048 ckpt", TrainingSetup(method="lora", precision="bf16", seq_len=2048, grad_checkpointing=True)),
    ("LoRA r16 bf16 s4096 b2", TrainingSetup(method="lora", precision="bf16", seq_len=4096, micro_batch=2)),
    ("full bf16_mixed s2048", TrainingSetup(method="full", precision="bf16_mixed", seq_len=2048)),
    ("full bf16 s2048 b4 ckpt", TrainingSetup(method="full", precision="bf16", seq_len=2048, micro_batch=4,
                                              grad_checkpointing=True)),
    ("full fp32 sgd s1024", TrainingSetup(method="full", precision="fp32", optimizer="sgd", seq_len=1024)),
]


def _nvml_used() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used)
    except Exception:
        return None


def gpu_step(spec, setup: TrainingSetup) -> dict:
    """A real warm-up step and a measured step on cuda:0; the allocator's peaks of the measured one."""
    model = build_meta_model(spec, setup)
    model.to_empty(device="cuda")
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    base.tie_weights()
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.02)
    optimizer = {"adamw": lambda p: torch.optim.AdamW(p, lr=1e-5),
                 "sgd": lambda p: torch.optim.SGD(p, lr=1e-3)}[setup.optimizer](
        [p for p in model.parameters() if p.requires_grad])
    ids = torch.randint(0, spec.vocab_size, (setup.micro_batch, setup.seq_len), device="cuda")
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if setup.precision == "bf16_mixed"
                else contextlib.nullcontext())

    def step():
        with autocast:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    result = {"allocated": torch.cuda.max_memory_allocated(), "reserved": torch.cuda.max_memory_reserved(),
              "device_used": _nvml_used()}
    del model, optimizer, ids
    torch.cuda.empty_cache()
    return result


def compare(preset: str, configs, cpu: bool) -> None:
    spec = preset_spec(preset)
    print(f"{spec.label}: {'CPU smoke (tracker peak of a real CPU step)' if cpu else torch.cuda.get_device_name(0)}")
    card = None if cpu else card_generation(torch.cuda.get_device_name(0))
    print("| config | allocated | sim live (err) | analytic live (err) | our allocated (err) | reserved | "
          "our reserved (err) | device used | our device used (err) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, setup in configs:
        started = time.perf_counter()
        measured = ({"allocated": measure_step(spec, setup, fake=False).peak, "reserved": None, "device_used": None}
                    if cpu else gpu_step(spec, setup))
        sim = simulate(spec, setup).measurement.peak
        analytic = estimate(spec, setup)
        real = measured["allocated"]

        def err(x, against=real):
            return "—" if against is None else f"{(x - against) / against:+.1%}"

        def gb(x):
            return "—" if x is None else f"{x / GiB:.2f}"

        ours = analytic.measures(card)
        print(f"| {label} | {gb(real)} | {gb(sim)} ({err(sim)}) | {gb(analytic.live)} ({err(analytic.live)}) | "
              f"{gb(ours.allocated_peak_bytes)} ({err(ours.allocated_peak_bytes)}) | {gb(measured['reserved'])} | "
              f"{gb(ours.reserved_peak_bytes)} ({err(ours.reserved_peak_bytes, measured['reserved'])}) | "
              f"{gb(measured['device_used'])} | {gb(ours.device_used_bytes)} "
              f"({err(ours.device_used_bytes, measured['device_used'])}) |"
              f"  ({time.perf_counter() - started:.0f} s)", flush=True)


def pilot(preset: str, cpu: bool, seq_len: int, steps: int) -> None:
    """The pilot kit on the same shape, LoRA and full: the report's key figures."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(to_hf_config(preset_spec(preset))))
        data = Path(tmp) / "data.txt"
        data.write_text("\n".join(" ".join(f"w{(i * k) % 997}" for k in range(seq_len)) for i in range(64)))
        for method in ("lora", "full"):
            report = Path(tmp) / f"{method}.json"
            command = [sys.executable, "-m", "anchorgpu.cli", "pilot", "run", "--model", str(config), "--data",
                       str(data), "--seq-len", str(seq_len), "--micro-batch", "1", "--warmup", "2", "--steps",
                       str(steps), "--method", method, "--precision", "bf16-mixed", "--checkpoint-dir",
                       str(Path(tmp) / f"ckpt-{method}"), "--report", str(report), "--no-progress",
                       "--device", "cpu" if cpu else "cuda"]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode not in (0, 1):
                print(f"pilot {method}: failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(report.read_text())
            memory = {k: v.get("bytes") for k, v in r["memory"].items() if isinstance(v, dict)}
            print(f"pilot {method}: step median {r['step_time_s']['median']:.3f} s (p90 {r['step_time_s']['p90']:.3f}),"
                  f" {r['tokens_per_s']:,.0f} tokens/s, data wait {r['data_wait_s']['share_of_step_time']:.1%}, "
                  f"memory {json.dumps(memory)}, checkpoint {r['checkpoint']['bytes'] / GiB:.2f} GiB in "
                  f"{r['checkpoint']['write_s']:.1f} s, restore {'passed' if r['restore']['passed'] else 'FAILED'} "
                  f"{r['restore'].get('first_difference') or ''}, versions {r['versions'].get('device')} "
                  f"driver {r['versions'].get('driver')} cuda {r['versions'].get('cuda')}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-smoke", action="store_true", help="a tiny shape on the CPU (tests the script)")
    args = parser.parse_args()
    if not args.cpu_smoke and not torch.cuda.is_available():
        sys.exit("no GPU visible: run with --cpu-smoke to check the script, or on a machine with a GPU")
    if args.cpu_smoke:
        small = [(label, setup.replace(seq_len=64, micro_batch=1)) for label, setup in CONFIGS[:2]]
        compare("tiny-llama", small, cpu=True)
        pilot("tiny-llama", cpu=True, seq_len=32, steps=2)
    else:
        compare("llama-3.2-1b", CONFIGS, cpu=False)
        pilot("llama-3.2-1b", cpu=False, seq_len=2048, steps=10)


if __name__ == "__main__":
    main()
