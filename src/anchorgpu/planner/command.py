"""``anchorgpu plan``: the peak memory of one training step, and the cards it fits on.

A table for people, ``--json`` for scripts. The analytic engine answers at
once; ``--engine simulate`` runs the real operators on fake tensors (needs
``pip install 'anchorgpu[ml]'``). Prices come from the shop's database.
Exit codes: 0 done, 2 bad input."""

from __future__ import annotations

import argparse
import json
import sys
from decimal import Decimal

from .analytic import Breakdown, Reserve, estimate
from .device_memory import CARDS
from .errors import PlannerInputError
from .model_spec import load_config
from .model_tree import spec_from_any_config
from .presets import PRESETS, preset_spec
from .recommend import DEFAULT_HEADROOM, GB, card_counts, plan
from .setup import (
    ADAPTER_DTYPES,
    ATTENTION,
    CROSS_ENTROPY,
    METHODS,
    OFFLOAD,
    OPTIMIZERS,
    PARALLEL,
    PRECISIONS,
    setup_from_mapping,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="anchorgpu plan", description=__doc__.splitlines()[0])
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--config", help="a Hugging Face config.json")
    model.add_argument("--preset", help=f"one of: {', '.join(PRESETS)}")
    parser.add_argument("--method", choices=METHODS, default="full")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--lora-targets", default="",
                        help="e.g. q_proj,v_proj or attention, mlp, all-linear; also lm_head, embed_tokens and, "
                             "on a mixture of experts, experts")
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    parser.add_argument(
        "--precision",
        choices=list(dict.fromkeys([p.replace("_", "-") for p in PRECISIONS] + list(PRECISIONS))),
        default="bf16-mixed",
    )
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--grad-checkpointing", action="store_true")
    parser.add_argument("--parallel", choices=PARALLEL, default="single", help="zero2/zero3: DeepSpeed ZeRO")
    parser.add_argument("--gpus", type=int, default=1)
    _add_memory_settings(parser.add_argument_group("what else decides the peak (each keeps its default unless given)"))
    parser.add_argument("--headroom", type=float, default=DEFAULT_HEADROOM, help="fraction kept free (0.10)")
    parser.add_argument("--term", type=int, choices=[3, 7, 30], default=7, help="term the cheapest fit is for")
    parser.add_argument("--engine", choices=["analytic", "simulate"], default="analytic")
    parser.add_argument("--json", action="store_true")
    return parser


# The settings added for today's models: each reaches the setup only when given, so the setup's own
# default holds otherwise (``None`` = not given).
GIVEN_ONLY = ("grad_accumulation", "attention", "packed", "cross_entropy", "activation_offload", "offload",
              "lora_dropout", "adapter_dtype", "quantize_lm_head", "double_quant", "prepare_kbit_training")


def _add_memory_settings(group) -> None:
    on_off = argparse.BooleanOptionalAction
    group.add_argument("--grad-accumulation", "--grad-accum", type=int, metavar="N",
                       help="micro-batches per optimizer step (1 = none); gradients live across them")
    group.add_argument("--attention", choices=ATTENTION, help="the attention kernel (auto: what transformers picks)")
    group.add_argument("--packed", action=on_off,
                       help="packed variable-length batches (no padding; position_ids / cu_seqlens)")
    group.add_argument("--cross-entropy", choices=CROSS_ENTROPY, help="fused_linear: Liger's fused linear "
                                                                      "cross-entropy")
    group.add_argument("--activation-offload", action=on_off, help="keep saved activations in host memory")
    group.add_argument("--offload", choices=OFFLOAD, help="what waits in host memory (FSDP CPU offload, "
                                                          "ZeRO-Offload)")
    group.add_argument("--lora-dropout", type=float, metavar="P", help="LoRA dropout in [0, 1) (0 = none)")
    group.add_argument("--adapter-dtype", choices=ADAPTER_DTYPES, help="dtype of the LoRA adapters (fp32)")
    group.add_argument("--quantize-lm-head", action=on_off, help="QLoRA: a 4-bit lm_head instead of bf16")
    group.add_argument("--double-quant", action=on_off, help="QLoRA: quantise the quantisation constants (on)")
    group.add_argument("--prepare-kbit-training", action=on_off,
                       help="QLoRA: peft's prepare_model_for_kbit_training (weights not in 4 bits cast to fp32)")


def _setup(args):
    fields = {"method": args.method, "lora_rank": args.lora_rank, "optimizer": args.optimizer,
              "precision": args.precision.replace("-", "_"), "seq_len": args.seq_len,
              "micro_batch": args.micro_batch, "grad_checkpointing": args.grad_checkpointing,
              "parallel": args.parallel, "gpus": args.gpus}
    if args.lora_targets:
        fields["lora_targets"] = args.lora_targets
    fields.update({name: getattr(args, name) for name in GIVEN_ONLY if getattr(args, name) is not None})
    return setup_from_mapping(fields)


def _breakdown_json(breakdown: Breakdown) -> dict:
    return {name: int(value) for name, value in breakdown.components().items()}


# What each measure is, as the table and the JSON's "measure_definitions" say it.
MEASURES = {
    "allocated_peak_bytes": "torch.cuda.max_memory_allocated: live tensors in the caching allocator's blocks",
    "reserved_peak_bytes": "torch.cuda.max_memory_reserved: the allocator's segments, cached blocks included",
    "device_used_bytes": "nvidia-smi / amd-smi: reserved plus the CUDA/ROCm context and NCCL/RCCL buffers",
}


def _measures_json(measures) -> dict:
    return {name: int(getattr(measures, name)) for name in MEASURES}


def _money(value: Decimal | None) -> str | None:
    return None if value is None else f"{value:f}"


def result_json(engine: str, breakdown: Breakdown, result) -> dict:
    best = result.best
    return {
        "engine": engine,
        "model": result.spec.label,
        "peak_bytes_per_device": int(breakdown.peak),
        "peak_measure": "device_used_bytes on the most demanding card generation",
        "peak_phase": breakdown.phase,
        **_measures_json(breakdown.measures()),
        "measure_definitions": dict(MEASURES),
        "measures_per_card": {card: _measures_json(breakdown.measures(card)) for card in CARDS},
        "breakdown": _breakdown_json(breakdown),
        "other_peaks": [p.to_json(breakdown.live) for p in breakdown.other_peaks],
        "notes": list(breakdown.notes),
        "recommendations": [{
            "product": o.offer.slug, "quantity": o.quantity, "cards": o.cards, "parallel": o.parallel,
            "fits": o.fits, "headroom_fraction": round(o.headroom_fraction, 4),
            "peak_bytes_per_device": int(o.device_used_bytes), "card": o.measures.card,
            **_measures_json(o.measures), "overflow": o.overflow, "reason": o.reason,
            "price": {str(days): _money(price) for days, price in sorted(o.prices.items())},
            "cost_per_million_tokens": {str(d): _money(c) for d, c in sorted(o.cost_per_million_tokens.items())},
            "best": o is best,
        } for o in result.options],
        "suggestions": [{"change": s.change, "description": s.description, "product": s.option.offer.slug,
                         "quantity": s.option.quantity,
                         "price": {str(d): _money(p) for d, p in sorted(s.option.prices.items())}}
                        for s in result.suggestions],
        "throughput_note": result.throughput_note,
    }


def _print_table(data: dict, out) -> None:
    gb = lambda n: f"{n / GB:,.1f} GB"  # noqa: E731
    print(f"{data['model']}: peak {gb(data['peak_bytes_per_device'])} per device used, as nvidia-smi would show "
          f"it on the most demanding card ({data['engine']} engine, at {data['peak_phase']})", file=out)
    for name, value in data["breakdown"].items():
        print(f"  {name:<12} {gb(value):>12}", file=out)
    print("measures per device (which number each tool reports):", file=out)
    for name, what in MEASURES.items():
        print(f"  {name:<22} {gb(data[name]):>12}  {what}", file=out)
    for other in data["other_peaks"]:
        if other["higher_than_step"]:
            print(f"  ! {other['moment']}: {gb(other['bytes'])} of live tensors ({other['how']}), more than the "
                  f"step; avoid: {other['avoid']}", file=out)
    print(file=out)
    print(f"{'product':<20} {'qty':>3} {'cards':>5} {'fits':<5} {'device used':>12} {'headroom':>8}  "
          "price 3 / 7 / 30 days", file=out)
    for row in data["recommendations"]:
        prices = " / ".join(row["price"].get(d) or "—" for d in ("3", "7", "30"))
        mark = "*" if row["best"] else " "
        print(f"{mark}{row['product']:<19} {row['quantity']:>3} {row['cards']:>5} {'yes' if row['fits'] else 'no':<5} "
              f"{gb(row['device_used_bytes']):>12} {row['headroom_fraction']:>8.0%}  {prices}", file=out)
    for suggestion in data["suggestions"]:
        print(f"  would fit cheaper: {suggestion['description']} → {suggestion['quantity']} × "
              f"{suggestion['product']}", file=out)


def _shop_offers(err) -> list:
    from django.db import DatabaseError

    from .shop_offers import shop_offers

    try:
        return shop_offers()
    except DatabaseError:
        print("anchorgpu plan: no shop database to price the options (run `anchorgpu demo` first); "
              "showing the memory only.", file=err)
        return []


def run(argv: list[str], out=None, err=None, *, offers=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = build_parser().parse_args(argv)
    try:
        spec = preset_spec(args.preset) if args.preset else spec_from_any_config(load_config(args.config))
        setup = _setup(args).validate(spec)
        if offers is None:
            offers = _shop_offers(err)
        estimate_with = estimate
        if args.engine == "simulate":
            try:
                from .simulate import simulate_steps
            except ImportError:
                print("anchorgpu plan: the simulation needs the ml extra: pip install torch==2.13.0 "
                      "'anchorgpu[ml]'", file=err)
                return 2
            counts = sorted(set(card_counts(offers)) | {setup.gpus})
            print("simulating on fake tensors…", file=err, flush=True)
            estimate_with = simulate_steps(spec, setup, counts,
                                           progress=lambda what: print(f"  {what.english()}", file=err, flush=True))
        result = plan(spec, setup, offers, headroom=args.headroom, term_days=args.term, estimate_with=estimate_with)
        breakdown = estimate_with(spec, setup, Reserve())
    except PlannerInputError as exc:
        print(f"anchorgpu plan: {exc}", file=err)
        return 2
    data = result_json(args.engine, breakdown, result)
    if args.json:
        json.dump(data, out, indent=2)
        print(file=out)
    else:
        _print_table(data, out)
    return 0
