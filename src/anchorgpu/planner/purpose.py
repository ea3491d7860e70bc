"""Advice that follows what the rental is for: the customer's stated purpose turns the planner's options into a pick.

Pure: no Django. It reads a ``recommend.Recommendation`` (every product and
quantity, whether it fits, its price and throughput) and returns the option it
points at with ``Advice`` codes and their figures, which the web layer words:

- ``make_possible``: the run does not fit today; the smallest configuration
  that fits at all (fewest cards, then least memory, then price).
- ``shorter_step``: the fastest configuration that fits; on several cards the
  same global batch is split across them, so each step is shorter; the
  fastest single unit (the faster card) is named beside it.
- ``larger_batch``: data parallelism over more cards of the cheapest fitting
  product; gradient accumulation reaches the same global batch on fewer cards,
  with longer steps, and is named as the alternative.
- ``independent_experiments`` (a sweep of N runs): when one run fits one card,
  N single-card runs side by side rather than one distributed run: nothing is
  communicated between them, and a failure stops one experiment, not all.
  Past the largest quantity on sale, the experiments run in waves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from .errors import PlannerInputError
from .recommend import Option, Recommendation
from .term import Advice


class Purpose(str, Enum):
    LARGER_BATCH = "larger_batch"
    SHORTER_STEP = "shorter_step"
    MAKE_POSSIBLE = "make_possible"
    INDEPENDENT_EXPERIMENTS = "independent_experiments"


@dataclass(frozen=True)
class PurposeAdvice:
    purpose: Purpose
    option: Option | None  # the configuration the advice points at; None when nothing fits
    advice: tuple[Advice, ...]


def _describe(option: Option) -> dict:
    return {"product": option.offer.slug, "product_name": option.offer.name, "quantity": option.quantity,
            "cards": option.cards, "parallel": option.parallel}


def _smallest(options: list[Option], term_days: int) -> Option:
    return min(options, key=lambda o: (o.cards, o.cards * o.capacity_bytes, o.rank(term_days)))


def advise(purpose: Purpose | str, recommendation: Recommendation, *, experiments: int = 1) -> PurposeAdvice:
    """The configuration ``purpose`` calls for among ``recommendation``'s options, with the reasons as codes."""
    try:
        purpose = Purpose(purpose)
    except ValueError:
        raise PlannerInputError("purpose", f"the purpose is one of {', '.join(p.value for p in Purpose)}, "
                                           f"not {purpose!r}.") from None
    if isinstance(experiments, bool) or not isinstance(experiments, int) or experiments <= 0:
        raise PlannerInputError("experiments", f"the number of experiments must be a positive whole number, "
                                               f"not {experiments!r}.")
    term = recommendation.term_days
    fitting = [o for o in recommendation.options if o.fits]
    if not fitting:
        return PurposeAdvice(purpose, None, (Advice("nothing_fits", {}), Advice("see_suggested_changes", {})))
    best = recommendation.best or min(fitting, key=lambda o: o.rank(term))
    if purpose is Purpose.MAKE_POSSIBLE:
        smallest = _smallest(fitting, term)
        return PurposeAdvice(purpose, smallest, (Advice("smallest_fit", {
            **_describe(smallest), "headroom_fraction": smallest.headroom_fraction}),))
    if purpose is Purpose.SHORTER_STEP:
        return _shorter_step(purpose, fitting, best, term)
    if purpose is Purpose.LARGER_BATCH:
        return _larger_batch(purpose, fitting, best, term)
    return _independent(purpose, recommendation, fitting, best, experiments, term)


def _shorter_step(purpose: Purpose, fitting: list[Option], best: Option, term: int) -> PurposeAdvice:
    rated = [o for o in fitting if o.tokens_per_second]
    if not rated:
        return PurposeAdvice(purpose, best, (Advice("no_throughput_figures", {}), Advice("cheapest_fit",
                                                                                          _describe(best))))
    fastest = min(rated, key=lambda o: (-o.tokens_per_second, o.rank(term)))
    speedup = fastest.tokens_per_second / best.tokens_per_second if best.tokens_per_second else None
    advice = [Advice("fastest_fit", {**_describe(fastest), "tokens_per_s": fastest.tokens_per_second,
                                     "speedup_over_cheapest": speedup})]
    if fastest.cards > 1:
        advice.append(Advice("global_batch_split_across_cards", {"cards": fastest.cards}))
        one_unit = [o for o in rated if o.quantity == 1]
        if one_unit:  # the faster card, for a customer who would rather not split the batch
            card = min(one_unit, key=lambda o: (-o.tokens_per_second / o.cards, o.rank(term)))
            advice.append(Advice("fastest_single_unit", {**_describe(card), "tokens_per_s": card.tokens_per_second}))
    return PurposeAdvice(purpose, fastest, tuple(advice))


def _widest(options: list[Option], term: int) -> Option:
    most = max(o.cards for o in options)
    return min((o for o in options if o.cards == most), key=lambda o: o.rank(term))


def _larger_batch(purpose: Purpose, fitting: list[Option], best: Option, term: int) -> PurposeAdvice:
    widest = _widest([o for o in fitting if o.offer.slug == best.offer.slug], term)
    if widest.cards == best.cards:
        widest = _widest(fitting, term)
    if widest.cards == best.cards:
        return PurposeAdvice(purpose, best, (Advice("gradient_accumulation", _describe(best)),))
    factor = widest.cards / best.cards
    return PurposeAdvice(purpose, widest, (
        Advice("data_parallel", {**_describe(widest), "batch_factor": factor}),
        Advice("gradient_accumulation_alternative", {"cards": best.cards, "steps_longer_by": factor}),
    ))


def _independent(purpose: Purpose, recommendation: Recommendation, fitting: list[Option], best: Option,
                 experiments: int, term: int) -> PurposeAdvice:
    if experiments == 1:
        return PurposeAdvice(purpose, best, (Advice("single_experiment", _describe(best)),))
    single = [o for o in fitting if o.cards == 1]
    if not single:
        each = _smallest(fitting, term)
        return PurposeAdvice(purpose, each, (Advice("independent_multi_card_runs", {
            **_describe(each), "experiments": experiments, "cards_each": each.cards}),))
    card = min(single, key=lambda o: o.rank(term))
    offer = card.offer
    units_needed = math.ceil(experiments / offer.cards_per_unit)
    on_sale = sorted(q for q in offer.quantities)
    quantity = next((q for q in on_sale if q >= units_needed), on_sale[-1])
    runs_at_once = quantity * offer.cards_per_unit
    waves = math.ceil(experiments / runs_at_once)
    option = next((o for o in recommendation.options if o.offer.slug == offer.slug and o.quantity == quantity), card)
    return PurposeAdvice(purpose, option, (
        Advice("independent_single_card_runs", {**_describe(option), "experiments": experiments, "cards_each": 1,
                                                "runs_at_once": runs_at_once, "waves": waves}),
        Advice("no_distributed_run_needed", {"experiments": experiments}),
    ))
