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
from .errors import PlannerInputError
from .model_spec import load_config, model_spec_from_config
from .presets import PRESETS, preset_spec
from .recommend import DEFAULT_HEADROOM, GB, card_counts, plan
from .setup import METHODS, OPTIMIZERS, PARALLEL, PRECISIONS, setup_from_mapping


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="anchorgpu plan", description=__doc__.splitlines()[0])
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--config", help="a Hugging Face config.json")
    model.add_argument("--preset", help=f"one of: {', '.join(PRESETS)}")
    parser.add_argument("--method", choices=METHODS, default="full")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--lora-targets", default="", help="e.g. q_proj,v_proj or attention, mlp, all-linear")
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    parser.add_argument("--precision", choices=[p.replace("_", "-") for p in PRECISIONS] + list(PRECISIONS),
                        default="bf16-mixed")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--grad-checkpointing", action="store_true")
    parser.add_argument("--parallel", choices=PARALLEL, default="single")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--headroom", type=float, default=DEFAULT_HEADROOM, help="fraction kept free (0.10)")
    parser.add_argument("--term", type=int, choices=[3, 7, 30], default=7, help="term the cheapest fit is for")
    parser.add_argument("--engine", choices=["analytic", "simulate"], default="analytic")
    parser.add_argument("--json", action="store_true")
    return parser


def _setup(args):
    fields = {"method": args.method, "lora_rank": args.lora_rank, "optimizer": args.optimizer,
              "precision": args.precision.replace("-", "_"), "seq_len": args.seq_len,
              "micro_batch": args.micro_batch, "grad_checkpointing": args.grad_checkpointing,
              "parallel": args.parallel, "gpus": args.gpus}
    if args.lora_targets:
        fields["lora_targets"] = args.lora_targets
    return setup_from_mapping(fields)


def _breakdown_json(breakdown: Breakdown) -> dict:
    return {name: int(value) for name, value in breakdown.components().items()}


def _money(value: Decimal | None) -> str | None:
    return None if value is None else f"{value:f}"


def result_json(engine: str, breakdown: Breakdown, result) -> dict:
    best = result.best
    return {
        "engine": engine,
        "model": result.spec.name,
        "peak_bytes_per_device": int(breakdown.peak),
        "peak_phase": breakdown.phase,
        "breakdown": _breakdown_json(breakdown),
        "notes": list(breakdown.notes),
        "recommendations": [{
            "product": o.offer.slug, "quantity": o.quantity, "cards": o.cards, "parallel": o.parallel,
            "fits": o.fits, "headroom_fraction": round(o.headroom_fraction, 4),
            "peak_bytes_per_device": int(o.breakdown.peak), "overflow": o.overflow, "reason": o.reason,
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
    print(f"{data['model']}: peak {gb(data['peak_bytes_per_device'])} per device "
          f"({data['engine']} engine, at {data['peak_phase']})", file=out)
    for name, value in data["breakdown"].items():
        print(f"  {name:<12} {gb(value):>12}", file=out)
    print(file=out)
    print(f"{'product':<20} {'qty':>3} {'cards':>5} {'fits':<5} {'headroom':>8}  price 3 / 7 / 30 days", file=out)
    for row in data["recommendations"]:
        prices = " / ".join(row["price"].get(d) or "—" for d in ("3", "7", "30"))
        mark = "*" if row["best"] else " "
        print(f"{mark}{row['product']:<19} {row['quantity']:>3} {row['cards']:>5} {'yes' if row['fits'] else 'no':<5} "
              f"{row['headroom_fraction']:>8.0%}  {prices}", file=out)
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
        spec = preset_spec(args.preset) if args.preset else model_spec_from_config(load_config(args.config))
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
