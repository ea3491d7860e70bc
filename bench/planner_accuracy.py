"""Accuracy of the memory planner (issue 5): real CPU steps against the simulation, the analytic estimate and
accelerate's formula.

    .venv/bin/python bench/planner_accuracy.py [--smoke] [--no-large] [--no-distributed]

For each configuration of a small model (built from a config, random weights, nothing downloaded):

* real: ``measure_step(spec, setup, fake=False)``, one steady-state step on real CPU tensors, measured by the
  same ``StorageTracker`` as the simulation (peak live tensor bytes). It runs in a fresh spawned process;
* RSS growth: that process's peak resident set (``ru_maxrss``) after the step minus before it (after the
  imports and a tiny warm-up step that loads the lazily imported code). RSS also holds the allocator's
  free lists and rounding, Python objects and library buffers: an independent sanity check, not the target;
* sim: ``measure_step(..., fake=True)``, the same step on fake tensors (what ``simulate`` reports as live);
* analytic: ``estimate(spec, setup).live``, the closed-form live bytes, WITHOUT the reserve (CUDA context,
  workspaces, fragmentation allowance), so that like is compared with like;
* accelerate: what ``accelerate estimate-memory`` reports as "Training using Adam" (see ``accelerate_bytes``).

DDP (2 processes, gloo): the real run wraps the model in DistributedDataParallel (default options, so
``gradient_as_bucket_view=False``) and tracks each rank's live bytes, DDP's gradient buckets included. The
simulation does not run DDP: it adds the buckets analytically (a copy of the gradients), as the analytic
estimate does in its reserve; both are compared here with the buckets added. FSDP (2 processes, FSDP2
``fully_shard``, gloo): not simulated yet, so only the analytic estimate is compared with the real run.

Large shapes (Llama-3.1-8B, Llama-3.1-70B): simulation against analytic only (nothing real could run here).

Targets: simulation within 1 % of the real tracked peak; analytic within 5 % median and 10 % worst against
the simulation. Exit code 0 when all are met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue as queue_module
import resource
import socket
import statistics
import sys
import time
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import torch

from anchorgpu.planner import TrainingSetup, model_spec_from_config, preset_spec
from anchorgpu.planner.analytic import GiB, MiB, estimate
from anchorgpu.planner.hf_build import build_meta_model, to_hf_config
from anchorgpu.planner.simulate import _OPTIMIZERS, _tag_checkpoint_inputs, measure_step
from anchorgpu.planner.tracker import StorageTracker

# transformers 5 warns that is_gradient_checkpointing is deprecated, once per checkpointed model built.
warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")

SIM_TARGET = 0.01
ANALYTIC_MEDIAN_TARGET = 0.05
ANALYTIC_WORST_TARGET = 0.10

# "Small" shapes: real models of each supported family, large enough for the RSS growth to be measurable
# (tens of MiB of weights) and small enough for a real step in about a second on one core.
SMALL_CONFIGS = {
    "small-llama": {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 4,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 8192,
                    "max_position_embeddings": 2048, "tie_word_embeddings": False},
    "small-qwen2": {"model_type": "qwen2", "hidden_size": 384, "intermediate_size": 1024, "num_hidden_layers": 4,
                    "num_attention_heads": 6, "num_key_value_heads": 2, "vocab_size": 8192,
                    "max_position_embeddings": 2048, "tie_word_embeddings": True},
    "small-gemma2": {"model_type": "gemma2", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                     "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "sliding_window": 128,
                     "vocab_size": 8192, "max_position_embeddings": 2048},
}
WARM_UP = {"llama": "tiny-llama", "qwen2": "tiny-qwen2", "gemma2": "tiny-gemma2"}


def shape(name: str):
    if name in SMALL_CONFIGS:
        return model_spec_from_config(dict(SMALL_CONFIGS[name]), name=name)
    return preset_spec(name)


@dataclass(frozen=True)
class Config:
    model: str
    method: str
    optimizer: str
    precision: str
    seq_len: int
    micro_batch: int
    checkpointing: bool
    parallel: str = "single"

    def setup(self) -> TrainingSetup:
        return TrainingSetup(method=self.method, optimizer=self.optimizer, precision=self.precision,
                             seq_len=self.seq_len, micro_batch=self.micro_batch,
                             grad_checkpointing=self.checkpointing, parallel=self.parallel,
                             gpus=1 if self.parallel == "single" else 2)

    @property
    def label(self) -> str:
        parallel = "" if self.parallel == "single" else f" {self.parallel.upper()}×2"
        return (f"{self.model} {self.method} {self.optimizer} {self.precision} s{self.seq_len} b{self.micro_batch}"
                + (" ckpt" if self.checkpointing else "") + parallel)


C = Config
# 28 single-device configurations: every method, optimizer and precision, both sequence lengths and
# micro-batches, checkpointing on and off, on the three families (Gemma 2: eager attention with soft-capping).
CONFIGS = [
    C("small-llama", "full", "adamw", "fp32", 128, 1, False),
    C("small-llama", "full", "adamw", "bf16_mixed", 256, 2, False),
    C("small-llama", "full", "adamw", "bf16", 256, 1, True),
    C("small-llama", "full", "sgd", "fp32", 256, 2, True),
    C("small-llama", "full", "sgd_momentum", "bf16_mixed", 128, 2, True),
    C("small-llama", "full", "adafactor", "bf16", 128, 2, False),
    C("small-llama", "lora", "adamw", "fp32", 256, 2, False),
    C("small-llama", "lora", "adamw", "bf16_mixed", 128, 1, True),
    C("small-llama", "lora", "adamw", "bf16", 256, 2, True),
    C("small-llama", "lora", "sgd", "bf16", 128, 1, False),
    C("small-llama", "lora", "adafactor", "fp32", 256, 1, False),
    C("small-qwen2", "full", "adamw", "fp32", 256, 1, True),
    C("small-qwen2", "full", "adamw", "bf16_mixed", 128, 2, True),
    C("small-qwen2", "full", "sgd_momentum", "fp32", 128, 2, False),
    C("small-qwen2", "full", "adafactor", "bf16_mixed", 256, 1, False),
    C("small-qwen2", "lora", "adamw", "bf16", 128, 2, False),
    C("small-qwen2", "lora", "sgd_momentum", "fp32", 256, 1, True),
    C("small-qwen2", "lora", "adafactor", "bf16_mixed", 256, 2, False),
    C("small-gemma2", "full", "adamw", "fp32", 128, 2, False),
    C("small-gemma2", "full", "adamw", "bf16_mixed", 256, 1, True),
    C("small-gemma2", "full", "sgd", "bf16", 256, 2, False),
    C("small-gemma2", "full", "adafactor", "fp32", 256, 1, True),
    C("small-gemma2", "lora", "adamw", "bf16_mixed", 128, 1, False),
    C("small-gemma2", "lora", "adamw", "bf16", 256, 2, True),
    C("small-gemma2", "lora", "sgd_momentum", "bf16_mixed", 256, 2, False),
    C("tiny-llama", "full", "adamw", "bf16_mixed", 64, 2, False),
    C("tiny-qwen2", "lora", "adamw", "fp32", 64, 2, True),
    C("tiny-gemma2", "full", "adamw", "bf16", 64, 2, True),
]
SMOKE = [c for c in CONFIGS if c.model in {"tiny-llama", "tiny-qwen2"}]
DDP_CONFIGS = [
    C("small-llama", "full", "adamw", "fp32", 128, 2, False, "ddp"),
    C("small-llama", "lora", "adamw", "bf16_mixed", 256, 2, True, "ddp"),
]
FSDP_CONFIGS = [C("small-llama", "full", "adamw", "fp32", 128, 2, False, "fsdp")]
LARGE = [
    ("llama-3.1-8b", TrainingSetup(method="lora", precision="bf16", seq_len=2048, grad_checkpointing=True)),
    ("llama-3.1-70b", TrainingSetup(method="lora", precision="bf16", seq_len=2048, grad_checkpointing=True)),
    ("llama-3.1-8b", TrainingSetup(method="full", optimizer="adamw", precision="bf16_mixed", seq_len=1024)),
]


# -- accelerate's formula ------------------------------------------------------------------------------------

def accelerate_bytes(spec, setup: TrainingSetup) -> int:
    """What ``accelerate estimate-memory <model>`` prints as "Training using Adam" for ``spec``.

    From accelerate's ``commands/estimate.py`` (checked against accelerate 1.15.0; the docs page "Model memory
    estimator" and the hub's model-memory-usage Space print the same): ``create_empty_model`` builds
    ``AutoModel.from_config(config, torch_dtype=float32)`` on the meta device (the base model: no LM head
    unless the config's ``auto_map`` names an ``AutoModelFor...`` class), ``calculate_maximum_sizes`` sums its
    parameters and buffers (fp32 bytes), and ``estimate_training_usage`` turns that size S into stages whose
    maximum is the reported figure:

    * "float32": model S, gradients S, optimizer 2S, step 4S -> 4S (1x model, 1x gradients, 2x Adam);
    * "float16"/"bfloat16": model S, gradients 1.5S, optimizer 2S, step 2S -> 2S (= 4x the bf16 size).

    No activations, no LoRA, no other optimizer, no batch or sequence length: the same figure for every setup
    of a model in a given dtype. We map fp32 -> "float32" and bf16 / bf16_mixed -> "bfloat16".
    """
    size = _accelerate_model_size(spec)
    dtype = "float32" if setup.precision == "fp32" else "bfloat16"
    ours = 4 * size if dtype == "float32" else max(size, size + size // 2, 2 * size, 2 * size)
    try:  # the installed accelerate, when there is one, must agree with the formula above
        from accelerate.commands.estimate import estimate_training_usage
    except ImportError:
        return ours
    theirs = max(estimate_training_usage(size, dtype).values())
    assert theirs == ours, (theirs, ours)
    return theirs


_ACCELERATE_SIZES: dict = {}


def _accelerate_model_size(spec) -> int:
    if spec in _ACCELERATE_SIZES:
        return _ACCELERATE_SIZES[spec]
    from transformers import AutoConfig, AutoModel

    hf = to_hf_config(spec)
    config = AutoConfig.for_model(hf.pop("model_type"), **hf)
    with torch.device("meta"):
        model = AutoModel.from_config(config, dtype=torch.float32)
    size = sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))
    try:
        from accelerate.utils import calculate_maximum_sizes
        assert calculate_maximum_sizes(model)[0] == size
    except ImportError:
        pass
    _ACCELERATE_SIZES[spec] = size
    return size


# -- real runs in fresh processes ----------------------------------------------------------------------------

def _max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux


def _warm_up(model: str, setup: TrainingSetup) -> None:
    """A tiny real step of the same family and setup: loads the lazily imported modules and kernels."""
    family = shape(model).family
    measure_step(preset_spec(WARM_UP[family]), setup.replace(seq_len=16, micro_batch=1, parallel="single", gpus=1),
                 fake=False)


def real_in_child(config: Config) -> dict:
    """Runs in a fresh spawned process: the real step's tracked peak and the process's RSS growth."""
    torch.set_num_threads(1)
    setup = config.setup()
    _warm_up(config.model, setup)
    before = _max_rss()
    measured = measure_step(shape(config.model), setup, fake=False)
    return {"peak": measured.peak, "rss": _max_rss() - before, "seconds": measured.seconds}


def _distributed_step(kind: str, spec, setup: TrainingSetup, rank: int, world: int) -> tuple[int, str]:
    """``measure_step``'s real step with the model wrapped in DDP or sharded with FSDP2: the tracked peak and
    the part of the step it fell in."""
    model = build_meta_model(spec, setup)
    torch.manual_seed(rank)
    tracker = StorageTracker()
    if setup.grad_checkpointing:
        _tag_checkpoint_inputs(model, tracker)
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if setup.precision == "bf16_mixed"
                else _Null())

    def pack(tensor):
        tracker.tag([tensor], "activations", only_from="temporaries")
        return tensor

    with tracker:
        model.to_empty(device="cpu")
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        base.tie_weights()
        with torch.no_grad():
            for param in model.parameters():
                param.normal_(0.0, 0.02)
        if kind == "ddp":
            from torch.nn.parallel import DistributedDataParallel
            runner = DistributedDataParallel(model)  # defaults: 25 MB buckets, gradient_as_bucket_view=False
        else:
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard
            mesh = init_device_mesh("cpu", (world,))
            for layer in base.model.layers:
                fully_shard(layer, mesh=mesh)
            fully_shard(base, mesh=mesh)
            runner = model
        tracker.tag(list(model.parameters()) + list(model.buffers()), "weights")
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = _OPTIMIZERS[setup.optimizer](trainable)
        ids = torch.randint(0, spec.vocab_size, (setup.micro_batch, setup.seq_len))
        tracker.tag([ids], "activations")

        def step():
            tracker.label = "forward"
            with autocast, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = runner(input_ids=ids, labels=ids).loss
            tracker.label = "backward"
            loss.backward()
            del loss
            tracker.label = "optimizer step"
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        step()
        tracker.label = ""
        tracker.reset_peak()
        step()
        tracker.check()
    return tracker.peak, tracker.peak_label


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def distributed_rank(rank: int, world: int, port: int, config: Config, queue) -> None:
    try:
        import torch.distributed as dist

        torch.set_num_threads(1)
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
        setup = config.setup()
        _warm_up(config.model, setup)
        before = _max_rss()
        peak, phase = _distributed_step(config.parallel, shape(config.model), setup, rank, world)
        queue.put((rank, (peak, phase), _max_rss() - before, None))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as error:  # reported by the parent as "not run"
        last = traceback.format_exception_only(type(error), error)[-1].strip()
        queue.put((rank, None, None, last[:300]))


def run_distributed(config: Config, timeout: float = 240) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=distributed_rank, args=(rank, 2, port, config, queue)) for rank in range(2)]
    for p in procs:
        p.start()
    results, deadline = {}, time.monotonic() + timeout
    while len(results) < 2 and time.monotonic() < deadline:
        try:
            rank, peak, rss, error = queue.get(timeout=1)
            results[rank] = (peak, rss, error)
        except queue_module.Empty:
            if all(p.exitcode is not None for p in procs):  # both gone without a word
                break
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
            p.join()
    errors = [e for _p, _r, e in results.values() if e]
    if len(results) < 2 or errors:
        return {"error": errors[0] if errors else "a rank died or timed out"}
    return {"peaks": [results[r][0][0] for r in range(2)], "phases": [results[r][0][1] for r in range(2)],
            "rss": [results[r][1] for r in range(2)]}


# -- the table -----------------------------------------------------------------------------------------------

@dataclass
class Row:
    label: str
    real: int | None = None
    rss: int | None = None
    sim: int | None = None
    analytic: int = 0
    accelerate: int = 0
    note: str = ""
    seconds: dict = field(default_factory=dict)

    @property
    def sim_error(self):
        return None if self.real is None or self.sim is None else (self.sim - self.real) / self.real

    @property
    def reference(self):
        """What the analytic estimate is held to: the simulation, or the real run where there is none (FSDP)."""
        return self.sim if self.sim is not None else self.real

    @property
    def analytic_error(self):
        return (self.analytic - self.reference) / self.reference

    @property
    def accelerate_error(self):
        ref = self.real if self.real is not None else self.sim
        return (self.accelerate - ref) / ref


def fmt(n: int | None) -> str:
    if n is None:
        return "—"
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / MiB:.2f} MiB"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.2f} %"


def print_table(rows: list[Row]) -> None:
    print("| config | real (tracked) | RSS growth (÷ real) | sim (err vs real) | analytic (err vs sim) "
          "| accelerate (err vs real, or sim) |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        rss = "—" if r.rss is None else f"{fmt(r.rss)} (×{r.rss / r.real:.2f})"
        sim = "not simulated" if r.sim is None else f"{fmt(r.sim)} ({pct(r.sim_error)})"
        ref = "vs real" if r.sim is None else ""
        analytic = f"{fmt(r.analytic)} ({pct(r.analytic_error)}{' ' + ref if ref else ''})"
        print(f"| {r.label}{r.note} | {fmt(r.real) if r.real is not None else 'no real run'} | {rss} | {sim} "
              f"| {analytic} | {fmt(r.accelerate)} ({pct(r.accelerate_error)}) |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="two tiny configurations only (for the test suite)")
    parser.add_argument("--no-large", action="store_true", help="skip the 8B and 70B shapes")
    parser.add_argument("--no-distributed", action="store_true", help="skip DDP and FSDP")
    args = parser.parse_args(argv)
    configs = SMOKE if args.smoke else CONFIGS
    large = [] if args.smoke or args.no_large else LARGE
    distributed = [] if args.smoke or args.no_distributed else DDP_CONFIGS + FSDP_CONFIGS
    started = time.perf_counter()
    torch.set_num_threads(1)

    # The real steps run one after another, each in a fresh process, while this process simulates.
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx, max_tasks_per_child=1) as pool:
        futures = [pool.submit(real_in_child, c) for c in configs]
        rows = []
        for c in configs:
            spec, setup = shape(c.model), c.setup()
            sim = measure_step(spec, setup, fake=True)
            rows.append(Row(c.label, sim=sim.peak, analytic=estimate(spec, setup).live,
                            accelerate=accelerate_bytes(spec, setup)))
        for row, future in zip(rows, futures, strict=True):
            real = future.result()
            row.real, row.rss = real["peak"], real["rss"]

    dist_rows, fsdp_lines = [], []
    for c in distributed:
        spec, setup = shape(c.model), c.setup()
        analytic = estimate(spec, setup)
        buckets = sum(b for _c, w, b in analytic.parts if w == "DDP gradient buckets")
        live = analytic.live + buckets
        result = run_distributed(c)
        if "error" in result:
            fsdp_lines.append(f"{c.label}: not run ({result['error']})")
            continue
        sim = None
        if c.parallel == "ddp":
            measured = measure_step(spec, setup, fake=True)
            sim = measured.peak + measured.ddp_buckets
        for rank in range(2):
            note = "" if sim is not None else (f" (real peak in {result['phases'][rank]}, analytic in "
                                               f"{analytic.phase})")
            dist_rows.append(Row(f"{c.label} rank {rank}", real=result["peaks"][rank], rss=result["rss"][rank],
                                 sim=sim, analytic=live, accelerate=accelerate_bytes(spec, setup), note=note))

    large_rows = []
    for name, setup in large:
        spec = preset_spec(name)
        t = time.perf_counter()
        sim = measure_step(spec, setup, fake=True)
        sim_s = time.perf_counter() - t
        t = time.perf_counter()
        analytic = estimate(spec, setup).live
        analytic_s = time.perf_counter() - t
        label = Config(name, setup.method, setup.optimizer, setup.precision, setup.seq_len, setup.micro_batch,
                       setup.grad_checkpointing).label
        large_rows.append(Row(label, sim=sim.peak, analytic=analytic, accelerate=accelerate_bytes(spec, setup),
                              note=f" (sim {sim_s:.1f} s, analytic {analytic_s * 1000:.1f} ms)"))

    print(f"## Planner accuracy: {len(rows)} single-device configurations, {len(dist_rows)} DDP rank rows, "
          f"{len(large_rows)} large shapes (torch {torch.__version__}, {os.cpu_count()} CPUs)\n")
    print("- Bytes are live tensor bytes, no reserve. real: measure_step(fake=False), the StorageTracker on real CPU\n"
          "  tensors, in a fresh spawned process. sim: measure_step(fake=True), the same step on fake tensors.\n"
          "- RSS growth: that process's ru_maxrss after the real step minus before it (after the imports and a\n"
          "  tiny warm-up step). It includes the allocator's free lists and rounding, Python objects and library\n"
          "  buffers: an independent sanity check, not the target; below ~16 MiB it is within noise.\n"
          "- analytic: estimate(spec, setup).live, the closed form WITHOUT the reserve (like with like).\n"
          "- DDP rows: real = DistributedDataParallel over 2 gloo processes (default options, so\n"
          "  gradient_as_bucket_view=False), buckets tracked as allocated; sim = the single-device fake step plus\n"
          "  the buckets computed analytically (a copy of the gradients; DDP is not simulated); analytic = live\n"
          "  plus the same buckets from its reserve. FSDP rows: FSDP2 fully_shard (each decoder layer, then the\n"
          "  root), 2 gloo processes; not simulated, so the analytic error is against the real run.\n"
          "- accelerate: what `accelerate estimate-memory` prints as \"Training using Adam\" (AutoModel, i.e. no LM\n"
          "  head, in fp32: 4x its size for float32, 2x for bfloat16; no activations, no LoRA, Adam whatever the\n"
          "  optimizer); its error is against the real run, or the simulation for 8B/70B.\n")
    print_table(rows + dist_rows + large_rows)
    for line in fsdp_lines:
        print(f"\nFSDP/DDP {line}")

    compared = rows + dist_rows
    sim_errors = [abs(r.sim_error) for r in compared if r.sim_error is not None]
    analytic_errors = [abs(r.analytic_error) for r in rows + [r for r in dist_rows if r.sim is not None]
                       + large_rows]
    fsdp_errors = [abs(r.analytic_error) for r in dist_rows if r.sim is None]
    acc_errors = [abs(r.accelerate_error) for r in rows + dist_rows + large_rows]
    measurable = [r for r in compared if r.rss is not None and r.real >= 16 * MiB]
    rss_ratios = [r.rss / r.real for r in measurable]
    sim_ok = bool(sim_errors) and max(sim_errors) <= SIM_TARGET
    median, worst = statistics.median(analytic_errors), max(analytic_errors)
    analytic_ok = median <= ANALYTIC_MEDIAN_TARGET and worst <= ANALYTIC_WORST_TARGET

    def verdict(ok):
        return "MET" if ok else "MISSED"

    print()
    print(f"- simulation vs real tracked peak: max |error| {max(sim_errors) * 100:.3f} % over {len(sim_errors)} "
          f"runs (target ≤ {SIM_TARGET:.0%}): {verdict(sim_ok)}")
    print(f"- analytic vs simulation: median |error| {median * 100:.2f} % (target ≤ {ANALYTIC_MEDIAN_TARGET:.0%}), "
          f"worst {worst * 100:.2f} % (target ≤ {ANALYTIC_WORST_TARGET:.0%}) over {len(analytic_errors)} "
          f"configurations{' incl. 8B/70B' if large_rows else ''}: {verdict(analytic_ok)}")
    if fsdp_errors:
        print(f"- analytic vs real FSDP run (not simulated; outside the target): worst |error| "
              f"{max(fsdp_errors) * 100:.2f} %")
    print(f"- accelerate's formula vs real (or sim for 8B/70B): median |error| "
          f"{statistics.median(acc_errors) * 100:.1f} %, worst {max(acc_errors) * 100:.1f} %")
    if rss_ratios:
        print(f"- RSS growth ÷ real tracked peak over the {len(rss_ratios)} runs of 16 MiB or more: min "
              f"×{min(rss_ratios):.2f}, median ×{statistics.median(rss_ratios):.2f}, max ×{max(rss_ratios):.2f} "
              "(RSS includes the allocator and Python objects: a sanity check only)")
    ok = sim_ok and analytic_ok
    print(f"\nTargets {'met' if ok else 'NOT met'}: simulation {verdict(sim_ok)}, analytic {verdict(analytic_ok)}. "
          f"Total wall time {time.perf_counter() - started:.0f} s.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
