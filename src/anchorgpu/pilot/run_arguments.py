"""The command-line options of one pilot run, shared by ``anchorgpu pilot run`` (``command``) and ``anchorgpu
pilot scale`` (``scale``), which runs the same configuration under several process counts.

Kept apart from both so that neither imports the other: ``command`` hands ``scale`` its arguments, and
``scale`` reads a run's options the way ``command`` does.
"""

from __future__ import annotations

import argparse

from .options import DEFAULT_LORA_TARGETS, DEVICES, METHODS, OPTIMIZERS, PRECISIONS, PilotOptions


def _targets(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of one run, shared by ``run`` and ``scale``."""
    parser.add_argument("--model", required=True, help="a Hugging Face-format directory, or a config.json alone "
                                                       "(random weights)")
    parser.add_argument("--data", required=True, action="append", help="JSONL or text file (repeat for more)")
    parser.add_argument("--text-field", default="text", help="the JSONL field holding the text (text)")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (2)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps (10)")
    parser.add_argument("--method", choices=METHODS, default="full")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--lora-targets", type=_targets, default=DEFAULT_LORA_TARGETS,
                        help="comma-separated module names (q_proj,k_proj,v_proj,o_proj)")
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--precision", choices=PRECISIONS, default="bf16-mixed")
    parser.add_argument("--grad-checkpointing", action="store_true")
    parser.add_argument("--val-batches", type=int, default=2, help="micro-batches of the validation pass (2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=DEVICES, default="auto")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def options_from_args(args: argparse.Namespace, **more) -> PilotOptions:
    return PilotOptions(model=args.model, data=tuple(args.data), text_field=args.text_field, seq_len=args.seq_len,
                        micro_batch=args.micro_batch, grad_accum=args.grad_accum, warmup=args.warmup,
                        steps=args.steps, method=args.method, lora_rank=args.lora_rank,
                        lora_targets=args.lora_targets, optimizer=args.optimizer, lr=args.lr,
                        precision=args.precision, grad_checkpointing=args.grad_checkpointing,
                        val_batches=args.val_batches, seed=args.seed, device=args.device,
                        progress=not args.no_progress, **more)
