"""The rental's purpose steers the pick among the options that fit, and the planner's FLOPs throughput estimate."""

from decimal import Decimal

import pytest

from anchorgpu.planner import Offer, PlannerInputError, Throughput, TrainingSetup, preset_spec, recommend
from anchorgpu.planner.analytic import Breakdown
from anchorgpu.planner.purpose import Purpose, advise
from anchorgpu.planner.recommend import GB, flops_per_token
from anchorgpu.planner.run_cost import Candidate
from anchorgpu.planner.term import RateSource
from anchorgpu.planner.throughput_estimate import PEAK_BF16_DENSE_FLOPS, estimate_rate, peak_flops


def _prices(rate: str, quantities) -> dict:
    return {q: {t: Decimal(rate) * q * 24 * t for t in (3, 7, 30)} for q in quantities}


# A cheap, slow 40 GB card sold by 1 to 8, and a dear, fast 100 GB card sold by 1 or 2.
SMALL = Offer.from_gb("small", "Small 40 GB", 40, 1, (1, 2, 4, 8), prices=_prices("1", (1, 2, 4, 8)))
BIG = Offer.from_gb("big", "Big 100 GB", 100, 1, (1, 2), prices=_prices("3", (1, 2)))
SPEED = {"small": 1000.0, "big": 3000.0}


def _options(gb_on_one_card: float, *, sharded: bool = False):
    """A step that needs ``gb_on_one_card`` per card, or that much divided by the cards when ``sharded``."""
    def breakdown(cards: int) -> Breakdown:
        return Breakdown(int(gb_on_one_card / (cards if sharded else 1) * GB), 0, 0, 0, 0, 0, phase="test")

    return recommend(breakdown, [SMALL, BIG], term_days=7,
                     tokens_per_second_for=lambda offer, cards: SPEED[offer.slug] * cards * (0.9 if cards > 1 else 1))


def _codes(result):
    return {a.code: a.params for a in result.advice}


def test_make_possible_takes_the_smallest_configuration_that_fits_at_all():
    result = advise(Purpose.MAKE_POSSIBLE, _options(60, sharded=True))  # one big card, or two small ones
    assert (result.option.offer.slug, result.option.cards) == ("big", 1)
    assert _codes(result)["smallest_fit"]["product"] == "big"


def test_shorter_step_takes_the_fastest_fit_and_names_the_faster_card():
    recommendation = _options(20)
    assert recommendation.best.offer.slug == "small" and recommendation.best.cards == 1
    result = advise("shorter_step", recommendation)
    assert (result.option.offer.slug, result.option.cards) == ("small", 8)  # 8 × 1000 × 0.9 beats 2 × 3000 × 0.9
    codes = _codes(result)
    assert codes["fastest_fit"]["tokens_per_s"] == pytest.approx(7200)
    assert codes["fastest_fit"]["speedup_over_cheapest"] == pytest.approx(7.2)
    assert codes["global_batch_split_across_cards"] == {"cards": 8}
    assert codes["fastest_single_unit"]["product"] == "big" and codes["fastest_single_unit"]["tokens_per_s"] == 3000
    only_one_card = advise(Purpose.SHORTER_STEP, recommend(
        lambda cards: Breakdown(20 * GB, 0, 0, 0, 0, 0, phase="test"), [SMALL, BIG], term_days=7,
        tokens_per_second_for=lambda offer, cards: SPEED[offer.slug] if cards == 1 else None))
    assert (only_one_card.option.offer.slug, only_one_card.option.cards) == ("big", 1)
    assert "global_batch_split_across_cards" not in _codes(only_one_card)


def test_larger_batch_spreads_the_cheapest_product_over_more_cards():
    result = advise(Purpose.LARGER_BATCH, _options(20))
    assert (result.option.offer.slug, result.option.cards) == ("small", 8)
    codes = _codes(result)
    assert codes["data_parallel"]["batch_factor"] == 8.0
    assert codes["gradient_accumulation_alternative"] == {"cards": 1, "steps_longer_by": 8.0}


def test_a_sweep_runs_as_independent_single_card_runs_rather_than_one_distributed_run():
    result = advise(Purpose.INDEPENDENT_EXPERIMENTS, _options(20), experiments=3)
    params = _codes(result)["independent_single_card_runs"]
    assert params["product"] == "small" and params["quantity"] == 4 and params["cards_each"] == 1
    assert params["runs_at_once"] == 4 and params["waves"] == 1
    assert result.option.quantity == 4 and "no_distributed_run_needed" in _codes(result)
    many = _codes(advise(Purpose.INDEPENDENT_EXPERIMENTS, _options(20), experiments=10))
    assert many["independent_single_card_runs"]["quantity"] == 8 and many["independent_single_card_runs"]["waves"] == 2
    one = advise(Purpose.INDEPENDENT_EXPERIMENTS, _options(20), experiments=1)
    assert "single_experiment" in _codes(one) and one.option.cards == 1


def test_experiments_that_need_several_cards_each_get_the_smallest_fit_each():
    result = advise(Purpose.INDEPENDENT_EXPERIMENTS, _options(150, sharded=True), experiments=4)
    params = _codes(result)["independent_multi_card_runs"]
    assert params["cards_each"] == 2 and params["product"] == "big" and params["experiments"] == 4


def test_nothing_fits_and_bad_input():
    result = advise(Purpose.SHORTER_STEP, _options(500))
    assert result.option is None and set(_codes(result)) == {"nothing_fits", "see_suggested_changes"}
    with pytest.raises(PlannerInputError, match="purpose"):
        advise("cheaper", _options(20))
    with pytest.raises(PlannerInputError, match="experiments"):
        advise(Purpose.INDEPENDENT_EXPERIMENTS, _options(20), experiments=0)


def test_a_recommend_option_becomes_a_candidate_for_the_cost_comparison():
    option = next(o for o in _options(20).options if o.offer.slug == "big" and o.quantity == 2)
    candidate = Candidate.from_option(option, currency="EUR")
    assert candidate.key == "big×2" and candidate.cards == 2 and candidate.prices[7] == Decimal(3 * 2 * 24 * 7)
    assert candidate.rate.tokens_per_s == pytest.approx(5400) and candidate.rate.source is RateSource.ESTIMATE
    assert Candidate.from_option(option, measured=True).rate.source is RateSource.PILOT


# --- the FLOPs estimate --------------------------------------------------------------------------------------------

def test_the_estimate_divides_a_share_of_the_peak_by_the_flops_per_token():
    spec = preset_spec("llama-3.1-8b")
    full, lora = TrainingSetup(seq_len=2048), TrainingSetup(method="lora", seq_len=2048)
    rate = estimate_rate(spec, full, peak_flops_per_card=peak_flops("h100-sxm-80gb"), product="H100")
    assert rate.source is RateSource.ESTIMATE and "estimated for H100" in rate.note
    assert rate.tokens_per_s == pytest.approx(989e12 * 0.35 / flops_per_token(spec, full))
    # LoRA skips the base weights' gradients: two forward-equivalents instead of three.
    assert estimate_rate(spec, lora, peak_flops_per_card=989e12).tokens_per_s == pytest.approx(1.5 * rate.tokens_per_s)
    two = estimate_rate(spec, full, peak_flops_per_card=989e12, cards=2, throughput=Throughput(utilisation=0.4))
    assert two.tokens_per_s == pytest.approx(2 * 0.9 * 989e12 * 0.4 / flops_per_token(spec, full))
    with pytest.raises(PlannerInputError, match="cards"):
        estimate_rate(spec, full, peak_flops_per_card=989e12, cards=0)
    with pytest.raises(PlannerInputError, match="peak"):
        estimate_rate(spec, full, peak_flops_per_card=0)


def test_every_product_of_the_demo_catalog_has_a_peak_figure():
    from anchorgpu.demo import PRODUCTS

    assert {slug for slug, *_rest in PRODUCTS} == set(PEAK_BF16_DENSE_FLOPS)
    assert peak_flops("a100-sxm-80gb") < peak_flops("h100-sxm-80gb") == peak_flops("h200-141gb") \
        < peak_flops("mi300x-192gb") < peak_flops("b200-lot-2x180gb")
    assert peak_flops("unknown") is None
