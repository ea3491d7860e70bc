"""``anchorgpu pilot scale``: the pilot's run on 1, 2, ... processes under DDP and FSDP, at the same global batch.

    anchorgpu pilot scale --nproc 1,2,4 --parallel ddp,fsdp --model ... --data ... [run options]

The 1-process baseline runs once, as ``pilot run`` trains (no wrapper, no
process group); each (parallel, n) setting runs under torchrun in its own
processes (``anchorgpu.pilot.rank``), so every setting starts from a clean
process and its memory peaks are its own. The global batch stays fixed: with
n processes each rank runs ``grad_accum / n`` micro-batches per step, and the
ranks together take exactly the micro-batches the single process takes.

Figures per setting: throughput (useful tokens of all ranks over the timed
steps, divided by the wall time of those steps, each step counted at its
slowest rank), the median step time, scaling efficiency
``tokens/s(n) / (n * tokens/s(1))``, and each rank's peak memory (the
allocator's peak on a GPU, the process's peak RSS on the CPU), flagged
unbalanced when the largest exceeds the smallest by more than 10 %. The
efficiency formula assumes each process brings its own device; on the CPU,
every process of every setting (the baseline too) gets the same number of
threads, the cores divided by the largest process count, so that holds as
far as the cores allow (a warning says when they do not).

Exit codes: 0 every setting ran, 1 at least one failed (reported with the
last lines of its log), 2 bad input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .errors import PilotInputError
from .options import PilotOptions
from .run_arguments import add_run_arguments, options_from_args

SCHEMA_VERSION = 1
REPORT_KIND = "anchorgpu-pilot-scale-report"
UNBALANCED = 0.10  # a rank's peak above the smallest by more than this share flags the setting
MODES = ("ddp", "fsdp")
LOG_TAIL = 15  # lines of a failed setting's log kept in the report


def _numbers(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise PilotInputError("nproc", f"“{text}” is not a list of process counts; give whole numbers from 1, "
                                       "e.g. --nproc 1,2,4.")
    return sorted(set(values) | {1})  # 1 is the baseline the efficiencies are measured against


def _modes(text: str) -> list[str]:
    values = [part.strip() for part in text.split(",") if part.strip()]
    if not values or any(v not in MODES for v in values):
        raise PilotInputError("parallel", f"“{text}” is not a list of ddp and fsdp, e.g. --parallel ddp,fsdp.")
    return list(dict.fromkeys(values))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="anchorgpu pilot scale", description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    parser.add_argument("--nproc", default="1,2", help="process counts, comma-separated (1,2); 1 is always run")
    parser.add_argument("--parallel", default="ddp,fsdp", help="ddp, fsdp or both, comma-separated (ddp,fsdp)")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                        help="process-group backend (auto: nccl on CUDA, gloo on the CPU)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds each setting may run (900)")
    parser.add_argument("--report", default="pilot-scale.json")
    return parser


def plan(args: argparse.Namespace) -> tuple[PilotOptions, list[tuple[str, int]], str]:
    """The checked options (device resolved), the settings to run (baseline first) and the backend."""
    import torch

    from .model import check_against_config
    from .options import read_config

    options = options_from_args(args, report=args.report, restore_check=False).validate()
    check_against_config(options, read_config(options.model))
    counts, modes = _numbers(args.nproc), _modes(args.parallel)
    if not (isinstance(args.timeout, (int, float)) and args.timeout > 0):
        raise PilotInputError("timeout", f"must be a number of seconds above 0, not {args.timeout}.")
    for n in counts:
        if options.grad_accum % n:
            raise PilotInputError("grad_accum", f"--grad-accum {options.grad_accum} cannot be split over {n} "
                                                "processes at the same global batch; use a multiple of every "
                                                "process count.")
    cuda = options.device == "cuda" or (options.device == "auto" and torch.cuda.is_available())
    if cuda and not torch.cuda.is_available():
        raise PilotInputError("device", "no CUDA or ROCm device is visible to PyTorch.")
    if cuda and max(counts) > torch.cuda.device_count():
        raise PilotInputError("nproc", f"{max(counts)} processes need {max(counts)} GPUs, and "
                                       f"{torch.cuda.device_count()} are visible.")
    backend = args.backend if args.backend != "auto" else ("nccl" if cuda else "gloo")
    if backend == "nccl" and not cuda:
        raise PilotInputError("backend", "nccl needs CUDA devices; on the CPU use gloo.")
    settings = [("single", 1)] + [(mode, n) for mode in modes for n in counts if n > 1]
    return options.replace(device="cuda" if cuda else "cpu"), settings, backend


def cpu_threads(settings: list[tuple[str, int]]) -> tuple[int, int]:
    """Threads per process on the CPU, and the cores there are to share."""
    cores = len(os.sched_getaffinity(0))
    return max(1, cores // max(n for _mode, n in settings)), cores


def _launch(options: PilotOptions, parallel: str, n: int, backend: str, work: Path, timeout: float,
            threads: int) -> dict:
    """Runs one setting in fresh processes; returns the rank records, or the reason it failed."""
    out = work / f"{parallel}-{n}"
    out.mkdir()
    options_file = work / "options.json"
    rank = ["-m", "anchorgpu.pilot.rank", "--options-json", str(options_file), "--parallel", parallel,
            "--out", str(out)]
    if parallel == "single":
        command = [sys.executable, *rank]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                   "--nproc-per-node", str(n), *rank]
    env = dict(os.environ, ANCHORGPU_PILOT_BACKEND=backend, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    if parallel != "single":  # torchrun sets them per rank
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            env.pop(name)
    package_root = str(Path(__file__).resolve().parents[2])  # the children import this very copy of anchorgpu
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    if options.device == "cpu":
        env["OMP_NUM_THREADS"] = str(threads)
    log = out / "log.txt"
    with log.open("wb") as handle:
        # A session of its own, so a timeout can stop torchrun and every rank it started, and nothing else.
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
        except BaseException:  # Ctrl-C no longer reaches the ranks in their own session: stop them here
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL:]
    if code is None:  # a rank killed mid-write may have left half a file: read none of them
        return {"error": f"timed out after {timeout:g} s", "log_tail": tail}
    records = sorted((_read_rank(p) for p in out.glob("rank-*.json")), key=lambda r: r["rank"])
    errors = [f"rank {r['rank']}: {r['error']}" for r in records if "error" in r]
    if code != 0 or errors or len(records) != n:
        reason = errors[0] if errors else f"exited with status {code} ({len(records)} of {n} ranks reported)"
        return {"error": reason, "log_tail": tail}
    return {"ranks": records}


def _read_rank(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"rank": int(path.stem.split("-")[1]), "error": f"its record cannot be read ({exc})"}


def summarise(parallel: str, n: int, ranks: list[dict], baseline: dict | None) -> dict:
    steps = len(ranks[0]["step_s"])
    step_s = [max(r["step_s"][i] for r in ranks) for i in range(steps)]  # a step ends when its slowest rank does
    total = sum(step_s)
    tokens = sum(sum(r["tokens"]) for r in ranks)
    samples_per_step = sum(r["micro_batch"] * r["grad_accum"] for r in ranks)
    key = "peak_allocated" if "peak_allocated" in ranks[0]["memory"] else "peak_rss"
    memory = [{"rank": r["rank"], "bytes": r["memory"][key]["bytes"], "source": r["memory"][key]["source"],
               "all": r["memory"]} for r in ranks]
    peaks = [m["bytes"] for m in memory]
    losses = [statistics.fmean(r["losses"][i] for r in ranks) for i in range(steps)]
    setting = {
        "parallel": parallel, "processes": n, "status": "ok", "grad_accum_per_rank": ranks[0]["grad_accum"],
        "samples_per_step": samples_per_step, "tokens_per_step": tokens / steps,
        "tokens_per_s": tokens / total if total else 0.0,
        "samples_per_s": steps * samples_per_step / total if total else 0.0,
        "step_time_s": {"median": statistics.median(step_s), "min": min(step_s), "max": max(step_s),
                        "per_step": step_s},
        "efficiency": None, "peak_memory": memory,
        "unbalanced": max(peaks) > min(peaks) * (1 + UNBALANCED),
        "losses": losses, "threads_per_rank": ranks[0].get("threads"),
    }
    if baseline and baseline.get("status") == "ok" and baseline["tokens_per_s"]:
        setting["efficiency"] = setting["tokens_per_s"] / (n * baseline["tokens_per_s"])
        setting["loss_vs_baseline"] = max(abs(a - b) / abs(b) if b else abs(a - b)
                                          for a, b in zip(losses, baseline["losses"], strict=False))
    elif parallel == "single":
        setting["efficiency"] = 1.0
    return setting


def _mib(value) -> str:
    return "—" if value is None else f"{value / 2**20:.0f} MiB"


def table(report: dict) -> str:
    head = ("setting", "procs", "tokens/s", "efficiency", "step median", "peak memory per rank", "flag")
    rows = [head]
    for s in report["settings"]:
        name = "baseline" if s["parallel"] == "single" else s["parallel"]
        if s["status"] != "ok":
            rows.append((name, str(s["processes"]), "—", "—", "—", "—", f"FAILED: {s['error']}"))
            continue
        efficiency = "—" if s["efficiency"] is None else f"{s['efficiency']:.0%}"
        rows.append((name, str(s["processes"]), f"{s['tokens_per_s']:,.0f}", efficiency,
                     f"{s['step_time_s']['median']:.3f} s", ", ".join(_mib(m["bytes"]) for m in s["peak_memory"]),
                     "unbalanced" if s["unbalanced"] else ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1]
             for row in rows]
    global_batch = report["global_batch"]
    lines.append(f"Global batch {global_batch['samples_per_step']} sequences per step "
                 f"({global_batch['micro_batch']} x {global_batch['grad_accum']} on one process), "
                 f"{report['options']['precision']}; unbalanced: a rank's peak more than "
                 f"{UNBALANCED:.0%} above the smallest.")
    return "\n".join(line.rstrip() for line in lines)


def main(argv: list[str], out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = build_parser().parse_args(argv)
    try:
        import torch
    except ImportError:
        print("anchorgpu pilot: the pilot needs the ml extra: pip install torch 'anchorgpu[ml]'", file=err)
        return 2
    try:
        options, settings, backend = plan(args)
    except PilotInputError as exc:
        print(f"anchorgpu pilot scale: {exc}", file=err)
        return 2
    started_at = dt.datetime.now(dt.UTC)
    results: list[dict] = []
    threads, cores = cpu_threads(settings)
    warnings = []
    if options.device == "cpu" and cores < max(n for _mode, n in settings):
        warnings.append(f"{cores} CPU cores for up to {max(n for _m, n in settings)} processes: they share cores, "
                        "so the efficiencies understate what separate devices would give")
    with tempfile.TemporaryDirectory(prefix="anchorgpu-scale-") as work:
        (Path(work) / "options.json").write_text(json.dumps(options.to_json()), encoding="utf-8")
        for parallel, n in settings:
            label = "baseline (1 process)" if parallel == "single" else f"{parallel} on {n} processes"
            print(f"pilot scale: {label}: starting", file=err, flush=True)
            began = time.monotonic()
            ran = _launch(options, parallel, n, backend, Path(work), args.timeout, threads)
            if "error" in ran:
                setting = {"parallel": parallel, "processes": n, "status": "failed", **ran}
                print(f"pilot scale: {label}: FAILED ({ran['error']})", file=err, flush=True)
            else:
                setting = summarise(parallel, n, ran["ranks"], results[0] if results else None)
                print(f"pilot scale: {label}: done in {time.monotonic() - began:.1f} s, "
                      f"{setting['tokens_per_s']:,.0f} tokens/s", file=err, flush=True)
            setting["wall_s"] = time.monotonic() - began
            results.append(setting)
    from .measure import versions
    from .run import write_report

    device = torch.device("cuda", 0) if options.device == "cuda" else torch.device("cpu")
    report = {
        "schema_version": SCHEMA_VERSION, "kind": REPORT_KIND, "created_at": started_at.isoformat(),
        "command": sys.argv, "options": options.to_json(), "backend": backend,
        "device": {"type": options.device, "count": torch.cuda.device_count() if options.device == "cuda" else 1},
        "global_batch": {"micro_batch": options.micro_batch, "grad_accum": options.grad_accum,
                         "samples_per_step": options.global_batch},
        "definitions": {
            "tokens_per_s": "useful tokens (padding excluded) of all ranks over the timed steps, divided by the "
                            "wall time of those steps, each step timed at its slowest rank",
            "efficiency": "tokens_per_s(n) / (n * tokens_per_s of the 1-process baseline)",
            "unbalanced": f"the largest per-rank peak exceeds the smallest by more than {UNBALANCED:.0%}",
            "unbalanced_threshold": UNBALANCED,
            "baseline": "1 process, no wrapper and no process group, as pilot run trains",
            "fsdp": "FSDP2 fully_shard on each decoder layer then the root; bf16-mixed as MixedPrecisionPolicy"
                    "(param_dtype=bf16, reduce_dtype=fp32), no autocast",
            "ddp": "DistributedDataParallel defaults; no_sync on all but the last micro-batch of a step",
        },
        "settings": results,
        "warnings": warnings,
        "versions": versions(device),  # after the runs: creating a CUDA context here would sit on GPU 0 meanwhile
    }
    write_report(report, args.report)
    print(table(report), file=out)
    for warning in warnings:
        print(f"Warning: {warning}.", file=out)
    print(f"Report: {args.report}", file=out)
    return 0 if all(s["status"] == "ok" for s in results) else 1
