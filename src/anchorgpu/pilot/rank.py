"""One process of a scaling run: ``python -m anchorgpu.pilot.rank --options-json F --parallel P --out DIR``.

``anchorgpu pilot scale`` starts it under torchrun (``ddp``, ``fsdp``) or
alone (``single``, the 1-process baseline). Each process trains the same
model on its own shard of every global batch and writes ``rank-N.json`` to
``--out``: its step times, tokens, losses and peak memory, or the one-line
error that stopped it. Nothing is printed on success; the launcher reads the
files.

What each mode runs, and why:

* ``single``: the model as ``pilot run`` trains it, no wrapper, no process
  group. It is what one card does today, so the efficiency of the other
  settings includes the wrapper's own cost, which is what a customer pays.
* ``ddp``: ``DistributedDataParallel`` with its defaults; every micro-batch
  but the last of a step runs under ``no_sync``, so gradients are
  all-reduced once per optimizer step, as a real run with accumulation does.
* ``fsdp``: FSDP2 ``fully_shard`` on each decoder layer, then on the root.
  Gradients are reduce-scattered after every micro-batch (FSDP2's default),
  which keeps them sharded: the memory a sharded run is chosen for.
  bf16-mixed runs as ``MixedPrecisionPolicy(param_dtype=bf16,
  reduce_dtype=fp32)`` instead of autocast: fp32 sharded master weights,
  bf16 compute, fp32 gradient reduction.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

import torch

from .data import Batches, load_dataset
from .errors import PilotInputError
from .measure import MemoryProbe
from .model import build_model, make_optimizer, make_scheduler
from .options import PilotOptions
from .steps import train_step


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The stack of transformer blocks (``model.layers`` for Llama, ``transformer.h`` for GPT-2, ...): the
    ``ModuleList`` holding the most parameters, so any Hugging Face causal LM (or its PEFT wrapper) is found."""
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) > 0]
    if not lists:
        raise RuntimeError("the model has no list of decoder layers to shard")
    return max(lists, key=lambda m: sum(p.numel() for p in m.parameters()))


def shard_fsdp(model: torch.nn.Module, precision: str, device: torch.device) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device.type, (int(os.environ["WORLD_SIZE"]),))
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if precision == "bf16-mixed" else MixedPrecisionPolicy())
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)


def _device(options: PilotOptions, local_rank: int) -> torch.device:
    # The launcher has already resolved "auto", so every rank agrees on the device type.
    if options.device == "cuda":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def train(options: PilotOptions, parallel: str) -> dict:
    """Warm-up, then the timed steps on this rank; returns what ``rank-N.json`` holds."""
    import torch.distributed as dist

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    device = _device(options, int(os.environ.get("LOCAL_RANK", 0)))
    if parallel != "single":
        backend = os.environ["ANCHORGPU_PILOT_BACKEND"]
        # Binding the device up front lets NCCL set up its communicator for the right GPU at once.
        dist.init_process_group(backend=backend, device_id=device if backend == "nccl" else None)
    accum = options.grad_accum // world  # the launcher checked that it divides
    built = build_model(options, device)  # the same seed builds the same weights on every rank
    model, no_sync = built.model, None
    step_options = options.replace(grad_accum=accum)
    if parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        no_sync = model.no_sync
    elif parallel == "fsdp":
        shard_fsdp(model, options.precision, device)
        if options.precision == "bf16-mixed":
            # The policy casts instead; autocast on top would cast a second time.
            step_options = step_options.replace(precision="fp32")
    dataset = load_dataset(options.data, options.text_field, options.model, int(built.config["vocab_size"]),
                           options.seq_len)
    # Rank r takes micro-batches r, r + world, ...: a step's micro-batches over all ranks are exactly the
    # ones the single process takes in its step, so every setting trains on the same global batches.
    batches = Batches(dataset.train, options.micro_batch, shard=rank, shards=world)
    optimizer = make_optimizer(options, model)  # after wrapping: FSDP2 replaces the parameters with shards
    scheduler = make_scheduler(options, optimizer)
    probe = MemoryProbe(device)

    for _ in range(options.warmup):
        train_step(model, optimizer, scheduler, batches, step_options, device, no_sync=no_sync)
    batches.position = 0  # the timed steps start again from the longest batches, as in ``pilot run``
    probe.reset_peak()
    steps = []
    for number in range(options.steps):
        steps.append(train_step(model, optimizer, scheduler, batches, step_options, device, no_sync=no_sync))
        probe.sample(number)
    memory = probe.summary()
    memory.pop("over_steps", None)
    if parallel != "single":
        dist.barrier()
        dist.destroy_process_group()
    return {"rank": rank, "world": world, "parallel": parallel, "device": str(device),
            "grad_accum": accum, "micro_batch": options.micro_batch,
            "step_s": [s.seconds for s in steps], "data_wait_s": [s.data_wait for s in steps],
            "tokens": [s.tokens for s in steps], "losses": [s.loss for s in steps], "memory": memory,
            "threads": torch.get_num_threads()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m anchorgpu.pilot.rank")
    parser.add_argument("--options-json", required=True)
    parser.add_argument("--parallel", choices=("single", "ddp", "fsdp"), required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", 0))
    target = Path(args.out) / f"rank-{rank}.json"
    try:
        options = PilotOptions.from_json(json.loads(Path(args.options_json).read_text(encoding="utf-8")))
        record = train(options.replace(parallel=args.parallel), args.parallel)
    except BaseException as error:  # the launcher reports the one line; the traceback stays in the log
        traceback.print_exc()
        line = traceback.format_exception_only(type(error), error)[-1].strip()
        if isinstance(error, PilotInputError):
            line = str(error)
        elif "out of memory" in line.lower():
            line = f"out of memory: this setting does not fit ({line[:300]})"
        target.write_text(json.dumps({"rank": rank, "error": line[:500]}), encoding="utf-8")
        return 1
    target.write_text(json.dumps(record), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
