"""The essential operations, run briefly and checked against a reference: the second half of ``pilot check``.

- bf16 matrix multiply, against the fp32 product of the same (bf16-rounded) inputs;
- scaled-dot-product attention, forward and backward in bf16 with a causal mask, against attention written
  out by hand in fp32 (output and the three input gradients, which must also be finite);
- an all-reduce across the visible devices, one process per device (NCCL, which is RCCL on ROCm), or two
  gloo processes on the CPU so the same path runs where there is no GPU;
- the customer's compiled extensions: imported, and a named function called with no arguments.

Each result says passed or failed, the seconds the whole check took, what it measured, and the error
message when it failed; an exception never escapes. Every check has a CPU path.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path

MATMUL_TOLERANCE = 1e-2  # relative (Frobenius) error of a bf16 product: bf16 keeps 8 significant bits
SDPA_TOLERANCE = 2e-2  # relative error of bf16 attention output and gradients against fp32
ALL_REDUCE_TIMEOUT = 180.0  # seconds for the whole all-reduce check, process start-up included


@dataclass
class OpResult:
    name: str
    device: str
    passed: bool
    seconds: float
    detail: dict = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def _message(exc: BaseException) -> str:
    """One line: a spawned process's failure arrives as its whole traceback, whose last line names the error."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if lines and re.match(r"[\w.]+(Error|Exception|Interrupt|Exit)\b", lines[-1]):
        return lines[-1]
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}".rstrip(": ")


def _timed(name: str, device: str, check) -> OpResult:
    started = time.perf_counter()
    try:
        passed, detail, error = check()
    except Exception as exc:  # the check's own failure is the finding: report it, never raise
        passed, detail, error = False, {}, _message(exc)
    return OpResult(name, device, passed, time.perf_counter() - started, detail, error)


def _sync(torch, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _relative_error(torch, found, reference) -> float:
    found, reference = found.detach().float(), reference.detach().float()
    return float((found - reference).norm() / reference.norm().clamp_min(1e-30))


def check_matmul(device: str = "cpu", size: int | None = None, repeats: int = 5) -> OpResult:
    def run():
        import torch

        n = size or (4096 if device.startswith("cuda") else 256)
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(n, n, generator=generator).to(device=device, dtype=torch.bfloat16)
        b = torch.randn(n, n, generator=generator).to(device=device, dtype=torch.bfloat16)
        product = a @ b
        with _full_fp32(torch):
            reference = a.float() @ b.float()
        error = _relative_error(torch, product, reference)
        _sync(torch, device)
        started = time.perf_counter()
        for _ in range(repeats):
            product = a @ b
        _sync(torch, device)
        each = (time.perf_counter() - started) / repeats
        finite = bool(torch.isfinite(product).all())
        detail = {"size": n, "relative_error": error, "tolerance": MATMUL_TOLERANCE, "seconds_each": each,
                  "tflops": 2 * n**3 / each / 1e12 if each else None}
        if not finite:
            return False, detail, "the bf16 product has non-finite values"
        if not error <= MATMUL_TOLERANCE:
            return False, detail, f"relative error {error:.2e} against fp32 is above {MATMUL_TOLERANCE:.0e}"
        return True, detail, None

    return _timed("bf16 matmul", device, run)


class _full_fp32:
    """The fp32 reference in full fp32, even where TF32 was switched on for matmuls."""

    def __init__(self, torch):
        self.torch = torch

    def __enter__(self):
        self.before = self.torch.get_float32_matmul_precision()
        self.torch.set_float32_matmul_precision("highest")

    def __exit__(self, *exc):
        self.torch.set_float32_matmul_precision(self.before)


def _manual_attention(torch, q, k, v):
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * scale
    causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def check_sdpa(device: str = "cpu", shape: tuple[int, int, int, int] | None = None) -> OpResult:
    def run():
        import torch
        import torch.nn.functional as F

        b, h, s, d = shape or ((4, 16, 1024, 128) if device.startswith("cuda") else (2, 4, 128, 64))
        generator = torch.Generator().manual_seed(1)
        q, k, v, grad = (torch.randn(b, h, s, d, generator=generator).to(device=device, dtype=torch.bfloat16)
                         for _ in range(4))
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(grad)
        qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
        with _full_fp32(torch):
            reference = _manual_attention(torch, qf, kf, vf)
            reference.backward(grad.float())
        errors = {"output": _relative_error(torch, out, reference)}
        for label, mine, theirs in (("grad_q", q, qf), ("grad_k", k, kf), ("grad_v", v, vf)):
            errors[label] = _relative_error(torch, mine.grad, theirs.grad)
        finite = all(bool(torch.isfinite(t.grad).all()) for t in (q, k, v)) and bool(torch.isfinite(out).all())
        _sync(torch, device)
        started = time.perf_counter()
        for _ in range(3):
            q.grad = k.grad = v.grad = None
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)
        _sync(torch, device)
        detail = {"shape": [b, h, s, d], "dtype": "bfloat16", "causal": True, "relative_errors": errors,
                  "tolerance": SDPA_TOLERANCE, "forward_backward_seconds": (time.perf_counter() - started) / 3}
        if not finite:
            return False, detail, "non-finite values in the attention output or its gradients"
        worst = max(errors, key=errors.get)
        if not errors[worst] <= SDPA_TOLERANCE:
            return False, detail, (f"{worst} differs from fp32 attention by {errors[worst]:.2e} (relative), above "
                                   f"{SDPA_TOLERANCE:.0e}")
        return True, detail, None

    return _timed("sdpa forward+backward", device, run)


def _all_reduce_worker(rank: int, world: int, backend: str, device_type: str, init_file: str, numel: int,
                       out_dir: str) -> None:
    """One rank of the all-reduce check (a spawned process): a correctness reduction, then a timed one."""
    import torch
    import torch.distributed as dist

    device = torch.device(device_type, rank) if device_type == "cuda" else torch.device("cpu")
    if device_type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=ALL_REDUCE_TIMEOUT))
    try:
        values = torch.full((4096,), float(rank + 1), device=device)
        dist.all_reduce(values)
        big = torch.ones(numel, device=device)
        dist.all_reduce(big)  # warm-up: the communicator's buffers and channels are set up on first use
        _sync(torch, str(device))
        dist.barrier()
        repeats = 5
        started = time.perf_counter()
        for _ in range(repeats):
            dist.all_reduce(big)
        _sync(torch, str(device))
        seconds = (time.perf_counter() - started) / repeats
        result = {"rank": rank, "found": values.min().item(), "found_max": values.max().item(),
                  "seconds_each": seconds}
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def check_all_reduce(device_type: str = "cpu", world: int | None = None, numel: int | None = None,
                     timeout: float = ALL_REDUCE_TIMEOUT, backend: str | None = None) -> OpResult:
    """An all-reduce (sum) over ``world`` processes: one per visible GPU, or two gloo processes on the CPU."""
    world = world or 2
    backend = backend or ("nccl" if device_type == "cuda" else "gloo")
    numel = numel or ((64 << 20) // 4 if device_type == "cuda" else 1 << 18)

    def run():
        import torch.multiprocessing as mp

        with tempfile.TemporaryDirectory(prefix="anchorgpu-allreduce-") as scratch:
            init_file = str(Path(scratch) / "rendezvous")
            context = mp.start_processes(_all_reduce_worker, args=(world, backend, device_type, init_file, numel,
                                                                   scratch),
                                         nprocs=world, join=False, start_method="spawn")
            deadline = time.monotonic() + timeout
            try:
                while not context.join(timeout=0.5):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the all-reduce did not finish within {timeout:.0f} s")
            finally:
                for process in context.processes:
                    if process.is_alive():
                        process.kill()
                        process.join(5)
            ranks = [json.loads(Path(scratch, f"rank{r}.json").read_text()) for r in range(world)]
        expected = world * (world + 1) / 2
        wrong = [r["rank"] for r in ranks if r["found"] != expected or r["found_max"] != expected]
        seconds = max(r["seconds_each"] for r in ranks)
        size = numel * 4
        detail = {"backend": backend, "processes": world, "bytes": size, "seconds_each": seconds,
                  "algorithm_gbps": size / seconds / 1e9 if seconds else None,
                  # what each link carries in a ring all-reduce: the figure NCCL's own tests call bus bandwidth
                  "bus_gbps": size / seconds / 1e9 * 2 * (world - 1) / world if seconds else None}
        if wrong:
            return False, detail, f"rank(s) {wrong} summed to the wrong value (expected {expected:g} everywhere)"
        return True, detail, None

    return _timed("all-reduce", f"{device_type} x{world}", run)


def check_extension(name: str) -> OpResult:
    def run():
        module = importlib.import_module(name)
        return True, {"file": getattr(module, "__file__", None),
                      "version": str(getattr(module, "__version__", "")) or None}, None

    return _timed(f"import {name}", "-", run)


def check_extension_call(spec: str, device: str = "cpu") -> OpResult:
    """``module:function``: imports the module and calls the function with no arguments."""
    module_name, function_name = spec.split(":", 1)

    def run():
        function = getattr(importlib.import_module(module_name), function_name)
        returned = function()
        if device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()  # an asynchronous kernel error surfaces here
        return True, {"returned": repr(returned)[:200]}, None

    return _timed(f"call {spec}", device, run)


def run_operations(device_type: str, devices: int, extensions=(), calls=(), say=lambda _m: None) -> list[OpResult]:
    """Every check: matmul and attention on each device, the all-reduce across all of them, then extensions."""
    targets = [f"cuda:{i}" for i in range(devices)] if device_type == "cuda" else ["cpu"]
    results = []
    for target in targets:
        say(f"bf16 matmul on {target}")
        results.append(check_matmul(target))
        say(f"attention forward and backward on {target}")
        results.append(check_sdpa(target))
    say("all-reduce across " + (f"{devices} GPU(s)" if device_type == "cuda" else "2 CPU processes"))
    results.append(check_all_reduce(device_type, devices if device_type == "cuda" else 2))
    for name in extensions:
        results.append(check_extension(name))
    for spec in calls:
        results.append(check_extension_call(spec, targets[0]))
    return results
