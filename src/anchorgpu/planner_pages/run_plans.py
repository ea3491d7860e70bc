"""The planner's run plan in the shop: the term a run needs and what a result costs on each card that fits.

The planner page computes it (``run_context``) from the run's size, the
pilot report the customer chose (its throughput and checkpoint figures) or
the planner's FLOPs estimate, and the stated purpose. Each "Order" link
carries the plan to the checkout as a signed token (``plan_token``), so the
checkout shows the cost per million training tokens of the order's own total
beside the other products that fit, and the order keeps the plan and the
purpose. The token is signed with the shop's key: a customer cannot change
the figures in it, and one older than ``PLAN_MAX_AGE`` is ignored.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from urllib.parse import urlencode

from django.core import signing
from django.urls import reverse
from django.utils.translation import gettext as _

from anchorgpu.planner.purpose import advise
from anchorgpu.planner.recommend import Throughput, plan
from anchorgpu.planner.run_cost import Candidate, compare, per_million_tokens
from anchorgpu.planner.shop_offers import shop_offers
from anchorgpu.planner.term import Advice, Overheads, RunSize, upload_seconds
from anchorgpu.planner.throughput_estimate import peak_flops

from .advice_text import advice_text, duration

SALT = "anchorgpu.run-plan"
PLAN_MAX_AGE = 7 * 24 * 3600


def plan_token(data: dict) -> str:
    return signing.dumps(data, salt=SALT, compress=True)


def plan_from_token(token: str) -> dict | None:
    """The plan a token carries, or None for a token that is malformed, altered or too old."""
    if not token or len(token) > 8000:
        return None
    try:
        data = signing.loads(token, salt=SALT, max_age=PLAN_MAX_AGE)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("rows"), list) else None


def run_size(data: dict, seq_len: int) -> RunSize | None:
    """The run's size from the planner form, or None when the customer gave none."""
    if data.get("tokens_per_epoch"):
        return RunSize.from_epochs(data["tokens_per_epoch"], data.get("epochs") or 1)
    if data.get("steps"):
        return RunSize.from_steps(data["steps"], data["global_batch"], seq_len)
    return None


def _overheads(summary) -> Overheads:
    if summary is None:
        return Overheads()
    return Overheads(checkpoint_write_s=max(summary.checkpoint_write_s, 1.0),
                     checkpoint_upload_s=upload_seconds(summary.checkpoint_bytes))


def _measured_here(option, report) -> bool:
    """True when the pilot ran this very configuration: the same product on as many cards."""
    return report is not None and option.offer.slug == report.product_slug and option.cards == report.device_count


def _fits(option, report) -> bool:
    """Whether a configuration fits: the pilot's measured peak where it ran this configuration, else the
    planner's estimate (both against the memory left after the headroom)."""
    return report.peak_memory_bytes <= option.usable_bytes if _measured_here(option, report) else option.fits


def _peak_check(options, report) -> dict | None:
    here = next((o for o in options if _measured_here(o, report)), None)
    if here is None:
        return None
    return {"name": here.offer.name, "quantity": here.quantity, "peak_gib": report.peak_memory_bytes / 2**30,
            "usable_gib": here.usable_bytes / 2**30, "estimate_gib": here.device_used_bytes / 2**30,
            "fits": _fits(here, report)}


def _checkout(slug: str, quantity: int, term: int | None, token: str, purpose: str) -> str:
    query = {"quantity": quantity, "plan": token}
    if term:
        query["term"] = term
    if purpose:
        query["purpose"] = purpose
    return reverse("checkout", kwargs={"slug": slug}) + "?" + urlencode(query)


def run_context(*, spec, setup, size: RunSize, headroom: float, term: int, report=None, summary=None,
                purpose: str = "", experiments: int = 1) -> dict:
    """The planner page's run section: every fitting configuration's term and cost per result."""
    measured = {}
    if report is not None and report.product_slug:
        measured[report.product_slug] = report.tokens_per_s / max(1, report.device_count)
    offers = [replace(o, peak_flops_per_card=peak_flops(o.slug)) for o in shop_offers()]
    result = plan(spec, setup, offers, headroom=headroom, term_days=term, throughput=Throughput(measured=measured))
    fitting = [o for o in result.options if _fits(o, report) and o.tokens_per_second and o.prices]
    overheads = _overheads(summary)
    comparison = compare(size, [Candidate.from_option(o, measured=o.offer.slug in measured) for o in fitting],
                         overheads=overheads)
    aim = advise(purpose, result.recommendation, experiments=experiments) if purpose else None
    focus = comparison.cheapest
    if aim is not None and aim.option is not None:
        key = f"{aim.option.offer.slug}×{aim.option.quantity}"
        focus = next((r for r in comparison.results if r.candidate.key == key), focus)
    rows = [_row(r) for r in comparison.results]
    token = plan_token({"tokens": size.tokens, "purpose": purpose, "experiments": experiments,
                        "report": str(report.pk) if report is not None else "", "rows": rows})
    table = [{**row, "checkout": _checkout(row["product"], row["quantity"], row["term"], token, purpose),
              "focus": focus is not None and row["key"] == focus.candidate.key,
              "cheapest": comparison.cheapest is not None and row["key"] == comparison.cheapest.candidate.key,
              "wall": duration(row["wall_s"])} for row in rows]
    context = {"size": size, "rows": table, "token": token, "measured_product": report.product_slug if report else "",
               "peak_check": _peak_check(result.options, report) if report is not None else None,
               "purpose_advice": [advice_text(a) for a in aim.advice] if aim else []}
    if focus is not None:
        advice = focus.advice
        wall = advice.wall
        context["focus"] = {
            "name": focus.candidate.name, "quantity": focus.candidate.key.split("×")[1], "term": advice.term_days,
            "source": advice.rate.source.value, "tokens_per_s": advice.rate.tokens_per_s,
            "parts": [(_("Loading the model and data"), duration(wall.loading_s)),
                      (_("Training"), duration(wall.training_s)),
                      (_("Validation passes (%(n)d)") % {"n": wall.validation_passes}, duration(wall.validation_s)),
                      (_("Checkpoints written and uploaded (%(n)d)") % {"n": wall.checkpoints},
                       duration(wall.checkpoint_s)),
                      (_("Final export"), duration(wall.export_s))],
            "total": duration(wall.total_s), "needed": duration(advice.needed_s), "margin": advice.margin,
            "notes": [advice_text(a) for a in advice.notes],
            "overrun": [advice_text(a) for a in advice.overrun.consequences],
            "slack": duration(advice.slack_s) if advice.slack_s is not None else None,
        }
    return context


def _row(result) -> dict:
    candidate, advice, cost = result.candidate, result.advice, result.cost
    slug, quantity = candidate.key.split("×")
    return {"key": candidate.key, "product": slug, "name": candidate.name, "quantity": int(quantity),
            "tokens_per_s": round(candidate.rate.tokens_per_s, 3), "source": candidate.rate.source.value,
            "term": advice.term_days, "wall_s": round(advice.wall.total_s, 1),
            "per_run": str(cost.per_run) if cost else None,
            "per_million_tokens": str(cost.per_million_tokens) if cost else None,
            "currency": candidate.currency}


def plan_at_checkout(token: str, *, slug: str, quantity: int, total: Decimal | None, currency: str) -> dict | None:
    """What the checkout shows of a carried plan: this configuration's cost per million tokens at the total
    shown, and the other products that fit; None without a valid plan."""
    data = plan_from_token(token)
    if data is None:
        return None
    tokens = data.get("tokens")
    if not isinstance(tokens, int) or tokens <= 0:
        return None
    row = next((r for r in data["rows"] if r.get("product") == slug and r.get("quantity") == quantity), None)
    # One row per other product: its cheapest configuration per run (the rows come cheapest first).
    others, seen = [], {slug}
    for r in data["rows"]:
        if r.get("product") not in seen:
            seen.add(r.get("product"))
            others.append({**r, "wall": duration(r["wall_s"])})
    shown = {"tokens": tokens, "row": row, "others": others, "purpose": data.get("purpose") or "",
             "wall": duration(row["wall_s"]) if row else None}
    if row is not None and total is not None:
        shown["per_million_tokens"] = per_million_tokens(total, tokens, currency)
        shown["currency"] = currency
    return shown


def run_plan_for_order(token: str, *, slug: str, quantity: int) -> dict:
    """What the order keeps of the plan: the run, the figures of the configuration ordered, where they came from."""
    data = plan_from_token(token)
    if data is None:
        return {}
    row = next((r for r in data["rows"] if r.get("product") == slug and r.get("quantity") == quantity), None)
    if row is None:
        return {}
    return {"tokens": data["tokens"], "tokens_per_s": row["tokens_per_s"], "source": row["source"],
            "wall_s": row["wall_s"], "recommended_term": row["term"], "report": data.get("report") or "",
            "experiments": data.get("experiments") or 1}


__all__ = ["plan_token", "plan_from_token", "run_size", "run_context", "plan_at_checkout", "run_plan_for_order",
           "Advice"]
