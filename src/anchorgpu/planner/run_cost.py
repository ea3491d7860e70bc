"""What one complete run costs, per run and per million training tokens, and how products compare on it.

Pure: no Django. The shop shows the cost of a result (DESIGN §6): the price of
the term a run needs, divided by what the run trains, not a price per hour
divided by a peak throughput. A faster, dearer card that finishes within a
shorter term can therefore cost less per run than a cheaper, slower one.

Money is ``Decimal`` in the price list's currency: the price of a term comes
from the shop's pricing (already rounded to the currency's minor unit); the
cost per million tokens is rounded half up to a hundredth of that unit
(0.0001 for a currency of cents), since it is a rate, not an amount charged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from anchorgpu.catalog.pricing import minor_unit

from .errors import PlannerInputError
from .recommend import SECONDS_PER_DAY, Option
from .term import DEFAULT_MARGIN, Overheads, RateSource, RunSize, TermAdvice, TokenRate, recommend_term


@dataclass(frozen=True)
class RunCost:
    term_days: int  # the term priced: the recommended one, or the next longer one that covers the run and has a price
    price: Decimal  # the term's total
    currency: str
    per_run: Decimal  # one complete run: the whole term is paid for it
    per_million_tokens: Decimal
    runs_per_term: int  # how many such runs, one after another with the margin, the term would hold
    source: RateSource  # the throughput behind it: a pilot's or an estimate


def _price(value, term_days: int) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, Decimal) or not value.is_finite() or value < 0:
        raise PlannerInputError("price", f"the price of the {term_days}-day term must be a Decimal amount from 0, "
                                         f"not {value!r}.")
    return value


def per_million_tokens(total: Decimal, tokens: int, currency: str) -> Decimal:
    """``total`` spread over ``tokens`` training tokens, per million, to a hundredth of the currency's minor unit."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
        raise PlannerInputError("tokens", f"the run's tokens must be a positive whole number, not {tokens!r}.")
    step = minor_unit(currency) if currency else Decimal("0.01")
    return (total * 10**6 / tokens).quantize(step.scaleb(-2), rounding=ROUND_HALF_UP)


def run_cost(advice: TermAdvice, prices: Mapping[int, Decimal], *, currency: str) -> RunCost | None:
    """The cost of one run from ``prices`` (term days -> the configuration's total for that term).

    None when no term covers the run or none of the covering terms has a price.
    """
    for fit in advice.terms:
        if fit.covers and prices.get(fit.term_days) is not None:
            price = _price(prices[fit.term_days], fit.term_days)
            break
    else:
        return None
    step = minor_unit(currency) if currency else Decimal("0.01")
    per_million = per_million_tokens(price, advice.size.tokens, currency)
    runs = int(fit.term_days * SECONDS_PER_DAY // advice.needed_s) if advice.needed_s else 1
    return RunCost(fit.term_days, price, currency, price.quantize(step, rounding=ROUND_HALF_UP), per_million,
                   max(1, runs), advice.rate.source)


@dataclass(frozen=True)
class Candidate:
    """A configuration to compare: its throughput and its price per term."""

    key: str  # e.g. "h100-sxm-80gb×1"
    name: str
    rate: TokenRate
    prices: Mapping[int, Decimal]  # term days -> total for this configuration
    currency: str = ""
    cards: int = 1

    @classmethod
    def from_option(cls, option: Option, *, currency: str | None = None, measured: bool = False,
                    note: str = "") -> Candidate:
        """A ``recommend.Option`` with its throughput (``measured``: from a pilot, else the planner's estimate)."""
        if option.tokens_per_second is None:
            raise PlannerInputError(f"offer.{option.offer.slug}", f"{option.offer.name} has no throughput figure: "
                                                                  "give a pilot's or its peak FLOP/s.")
        rate = TokenRate(option.tokens_per_second, RateSource.PILOT if measured else RateSource.ESTIMATE, note)
        return cls(f"{option.offer.slug}×{option.quantity}", option.offer.name, rate, dict(option.prices),
                   option.offer.currency if currency is None else currency, option.cards)


@dataclass(frozen=True)
class CandidateResult:
    candidate: Candidate
    advice: TermAdvice
    cost: RunCost | None


@dataclass(frozen=True)
class Comparison:
    """Candidates cheapest per run first (then the shorter wall time); those without a cost last."""

    results: tuple[CandidateResult, ...]

    @property
    def cheapest(self) -> CandidateResult | None:
        return self.results[0] if self.results and self.results[0].cost is not None else None

    @property
    def fastest(self) -> CandidateResult | None:
        fitting = [r for r in self.results if r.advice.fits]
        return min(fitting, key=lambda r: r.advice.wall.total_s) if fitting else None


def compare(size: RunSize, candidates: Sequence[Candidate], *, overheads: Overheads | None = None,
            margin: float = DEFAULT_MARGIN) -> Comparison:
    """Each candidate's term, wall time and cost for the same run."""
    results = []
    for candidate in candidates:
        advice = recommend_term(size, candidate.rate, overheads=overheads, margin=margin)
        results.append(CandidateResult(candidate, advice, run_cost(advice, candidate.prices,
                                                                   currency=candidate.currency)))
    results.sort(key=lambda r: (r.cost is None, r.cost.per_run if r.cost else Decimal(0), r.advice.wall.total_s,
                                r.candidate.key))
    return Comparison(tuple(results))
