"""What the pilot's instrumentation costs: the same training loop bare and instrumented, side by side.

Both loops train the same model on the same batches in one process. The
bare loop is what a customer's script does (forward, backward, optimizer,
scheduler, zero_grad) with one clock around a whole block of steps. The
instrumented loop is the pilot's ``steps.train_step`` (device synchronised
at both ends of each step, data wait timed, tokens counted, loss read back)
plus ``MemoryProbe.sample`` after every step, as ``anchorgpu pilot run``
does. Blocks alternate (bare, instrumented, bare, ...) so that drift in the
machine's speed falls on both alike; the figure is the median per-step time
of each over all blocks. Target: overhead under 2 % of step time.

    .venv/bin/python bench/pilot_overhead.py [--blocks 6] [--steps 5] [--hidden 256] [--layers 4] [--seq-len 256]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from anchorgpu.pilot.data import Batches, load_dataset
from anchorgpu.pilot.measure import MemoryProbe
from anchorgpu.pilot.model import autocast, build_model, make_optimizer, make_scheduler
from anchorgpu.pilot.options import PilotOptions
from anchorgpu.pilot.steps import train_step


def bare_block(model, optimizer, scheduler, batches, options, device, steps: int) -> float:
    """Seconds per step of a plain loop, one clock around the block (synchronised once at the end)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    for _ in range(steps):
        for _micro in range(options.grad_accum):
            batch, _wait = batches.next(device)
            with autocast(options, device):
                loss = model(**batch).loss / options.grad_accum
            loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - started) / steps


def instrumented_block(model, optimizer, scheduler, batches, options, device, probe, steps: int) -> float:
    started = time.perf_counter()
    for number in range(steps):
        train_step(model, optimizer, scheduler, batches, options, device)
        probe.sample(number)
    return (time.perf_counter() - started) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=6, help="blocks of each kind, alternating")
    parser.add_argument("--steps", type=int, default=5, help="steps per block")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--grad-accum", type=int, default=2)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        config = {"model_type": "llama", "hidden_size": args.hidden, "intermediate_size": args.hidden * 8 // 3,
                  "num_attention_heads": max(1, args.hidden // 64), "num_key_value_heads": max(1, args.hidden // 128),
                  "num_hidden_layers": args.layers, "vocab_size": 4096, "max_position_embeddings": args.seq_len}
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        words = "the pilot measures what a term will need before it is booked".split()
        with open(Path(tmp) / "data.txt", "w") as handle:
            for i in range(64):
                handle.write(" ".join(words[(i + k) % len(words)] for k in range(args.seq_len)) + "\n")
        options = PilotOptions(model=str(Path(tmp) / "config.json"), data=(str(Path(tmp) / "data.txt"),),
                               seq_len=args.seq_len, micro_batch=args.micro_batch, grad_accum=args.grad_accum,
                               precision="fp32", device=args.device, progress=False).validate()
        built = build_model(options)
        model, device = built.model, built.device
        dataset = load_dataset(options.data, "text", options.model, config["vocab_size"], options.seq_len)
        batches = Batches(dataset.train, options.micro_batch)
        optimizer = make_optimizer(options, model)
        scheduler = make_scheduler(options, optimizer)
        probe = MemoryProbe(device)
        bare_block(model, optimizer, scheduler, batches, options, device, 2)  # warm-up, both paths
        instrumented_block(model, optimizer, scheduler, batches, options, device, probe, 2)
        bare, instrumented = [], []
        for _ in range(args.blocks):
            bare.append(bare_block(model, optimizer, scheduler, batches, options, device, args.steps))
            instrumented.append(instrumented_block(model, optimizer, scheduler, batches, options, device, probe,
                                                   args.steps))
    b, i = statistics.median(bare), statistics.median(instrumented)
    params = sum(p.numel() for p in model.parameters())
    print(f"pilot overhead on {device} ({torch.get_num_threads()} threads), llama {args.layers} layers × hidden "
          f"{args.hidden} ({params / 1e6:.1f} M parameters), seq {args.seq_len}, micro-batch {args.micro_batch} × "
          f"{args.grad_accum} accumulation, {args.blocks} alternating blocks of {args.steps} steps")
    print(f"  bare loop          median {b * 1000:9.2f} ms/step  (blocks: {', '.join(f'{x * 1000:.1f}' for x in bare)})")
    print(f"  pilot instrumented median {i * 1000:9.2f} ms/step  "
          f"(blocks: {', '.join(f'{x * 1000:.1f}' for x in instrumented)})")
    print(f"  overhead           {(i - b) / b:+.2%} of step time (target: under 2 %)")


if __name__ == "__main__":
    main()
