"""Recommendation: what fits with the headroom, the cheapest that does, why the others fail, what would help."""

from decimal import Decimal

import pytest

from anchorgpu.catalog.pricing import PriceList
from anchorgpu.planner import Offer, PlannerInputError, Throughput, TrainingSetup, plan, preset_spec, recommend
from anchorgpu.planner.analytic import Breakdown
from anchorgpu.planner.recommend import GB, flops_per_token, prices_from_price_list, setup_for_cards


def _breakdown(weights=0, gradients=0, optimizer=0, activations=0, temporaries=0, reserve=0) -> Breakdown:
    return Breakdown(int(weights * GB), int(gradients * GB), int(optimizer * GB), int(activations * GB),
                     int(temporaries * GB), int(reserve * GB), phase="test")


def _prices(rate: str, cards_per_unit: int, quantities) -> dict:
    return {q: {t: Decimal(rate) * q * cards_per_unit * 24 * t for t in (3, 7, 30)} for q in quantities}


SMALL = Offer.from_gb("small", "Small 40 GB", 40, 1, (1, 2, 4), prices=_prices("1", 1, (1, 2, 4)))
BIG = Offer.from_gb("big", "Big 100 GB", 100, 1, (1, 2), prices=_prices("3", 1, (1, 2)))


def test_gb_are_powers_of_ten():
    assert SMALL.memory_bytes_per_card == 40 * 10**9


def test_fits_with_the_headroom_and_names_the_overflowing_component():
    per_card = _breakdown(weights=30, activations=50, reserve=2)  # 82 GB whatever the number of cards
    result = recommend(lambda cards: per_card, [SMALL, BIG])
    by = {(o.offer.slug, o.quantity): o for o in result.options}
    assert not by["small", 1].fits and by["small", 1].overflow == "activations"
    assert "the activations" in by["small", 1].reason
    assert by["big", 1].fits and by["big", 1].headroom_fraction == pytest.approx(0.18)
    assert result.best is by["big", 1]
    strict = recommend(lambda cards: per_card, [BIG], headroom=0.2)  # 80 GB usable: the reserve tips it over
    assert strict.best is None and strict.options[0].overflow == "reserve"
    heavy = recommend(lambda cards: _breakdown(weights=45), [SMALL])
    assert heavy.options[0].overflow == "weights" and "weights alone" in heavy.options[0].reason


def test_the_cheapest_fitting_configuration_wins():
    sharded = recommend(lambda cards: _breakdown(weights=120 / cards, reserve=2), [SMALL, BIG], term_days=7)
    fits = sorted((o.offer.slug, o.quantity) for o in sharded.options if o.fits)
    assert fits == [("big", 2), ("small", 4)]
    assert (sharded.best.offer.slug, sharded.best.quantity) == ("small", 4)  # 4 × 1 is cheaper than 2 × 3
    assert sharded.best.prices[7] == Decimal(4 * 24 * 7)
    assert {o.overflow for o in sharded.failing} == {"weights"}


def test_a_tie_goes_to_fewer_cards():
    pair = Offer.from_gb("pair", "Two cards", 100, 2, (1,), prices={1: {30: Decimal(1000)}})
    single = Offer.from_gb("single", "One card", 100, 1, (1,), prices={1: {30: Decimal(1000)}})
    result = recommend(lambda cards: _breakdown(weights=10), [pair, single])
    assert result.best.offer.slug == "single" and result.best.cards == 1


def test_cost_per_million_tokens():
    offer = Offer.from_gb("x", "X", 100, 1, (1, 2), prices={1: {30: Decimal(720)}, 2: {30: Decimal(1440)}})
    result = recommend(lambda cards: _breakdown(weights=10), [offer], tokens_per_second_for=lambda o, c: 1000.0 * c)
    assert result.options[0].cost_per_million_tokens[30] == Decimal("0.2778")  # 720 / (1000 × 30 × 86400) × 1e6
    assert result.options[1].cost_per_million_tokens[30] == Decimal("0.2778")


def test_bad_headroom_and_offers_are_input_errors():
    with pytest.raises(PlannerInputError):
        recommend(lambda cards: _breakdown(), [SMALL], headroom=1.5)
    with pytest.raises(PlannerInputError) as caught:
        recommend(lambda cards: _breakdown(), [Offer("broken", "Broken", 0, 1, (1,))])
    assert "memory per card" in str(caught.value)
    with pytest.raises(PlannerInputError):
        recommend(lambda cards: _breakdown(), [SMALL], term_days=0)
    spec = preset_spec("tiny-llama")
    for throughput in (Throughput(measured={"x": 0}), Throughput(utilisation=1.5), Throughput(multi_card_efficiency=0)):
        with pytest.raises(PlannerInputError) as caught:
            plan(spec, TrainingSetup(seq_len=64), [SMALL], throughput=throughput)
        assert caught.value.field == "throughput"
    with pytest.raises(PlannerInputError) as caught:
        plan(spec, TrainingSetup(method="lora", lora_targets="c_attn", seq_len=64), [SMALL])
    assert caught.value.field == "lora_targets"


OFFERS = [
    Offer.from_gb("l4", "L4 24 GB", 24, 1, (1, 2, 4, 8), prices=_prices("0.5", 1, (1, 2, 4, 8)),
                  peak_flops_per_card=121e12),
    Offer.from_gb("l40s", "L40S 48 GB", 48, 1, (1, 2, 4, 8), prices=_prices("1.0", 1, (1, 2, 4, 8)),
                  peak_flops_per_card=362e12),
    Offer.from_gb("h200", "H200 141 GB", 141, 1, (1, 2, 4, 8), prices=_prices("3.5", 1, (1, 2, 4, 8)),
                  peak_flops_per_card=989e12),
]


def test_plan_picks_the_cheapest_fit_for_a_lora_run():
    spec = preset_spec("llama-3.1-8b")
    result = plan(spec, TrainingSetup(method="lora", seq_len=2048), OFFERS)
    assert (result.best.offer.slug, result.best.quantity) == ("l40s", 1)
    assert set(result.best.prices) == {3, 7, 30}
    l4 = next(o for o in result.options if o.offer.slug == "l4" and o.quantity == 1)
    assert not l4.fits and l4.overflow == "activations"
    assert result.best.tokens_per_second == pytest.approx(362e12 * 0.35 / flops_per_token(spec, result.setup))
    assert result.best.cost_per_million_tokens[30] > 0
    assert "35% utilisation" in result.throughput_note
    # A 4-bit base alone does not bring it within the L4's headroom; checkpointing does (the loss's logits,
    # their fp32 copy and their gradients are separate allocations, so the allocator reuses the forward's
    # blocks in the backward), and so do much shorter sequences.
    change = {s.change: s for s in result.suggestions}
    assert "qlora" not in change
    ckpt = change["grad_checkpointing"]
    assert ckpt.option.offer.slug == "l4" and ckpt.setup.method == "lora" and ckpt.setup.grad_checkpointing
    assert change["seq_len"].option.offer.slug == "l4" and change["seq_len"].setup.seq_len < 2048


def test_plan_suggests_what_makes_a_smaller_configuration_fit():
    spec = preset_spec("llama-3.1-8b")
    setup = TrainingSetup(seq_len=4096)  # full fine-tune: about 175 GB on one card, and DDP replicates it
    result = plan(spec, setup, OFFERS, throughput=Throughput(measured={"h200": 3000.0}))
    assert result.best is None
    assert {o.overflow for o in result.options} == {"weights", "gradients", "optimizer"}  # by card size
    changes = {s.change: s for s in result.suggestions}
    assert {"lora", "qlora", "fsdp", "adamw8bit"} <= set(changes)
    assert changes["fsdp"].option.parallel == "fsdp" and changes["fsdp"].option.cards > 1
    for suggestion in result.suggestions:
        assert suggestion.option.fits
        suggestion.setup.validate(spec)
    ranks = [s.option.rank(30) for s in result.suggestions]
    assert ranks == sorted(ranks)
    h200 = [o for o in result.options if o.offer.slug == "h200"]
    assert h200[0].tokens_per_second == 3000.0 and h200[1].tokens_per_second == pytest.approx(2 * 3000.0 * 0.9)


def test_shorter_sequences_are_suggested_for_eager_attention():
    result = plan(preset_spec("gemma-2-9b"), TrainingSetup(method="qlora", seq_len=8192), OFFERS)
    shorter = [s for s in result.suggestions if s.change == "seq_len"]
    assert len(shorter) == 1 and shorter[0].setup.seq_len < 8192


def test_cards_choose_the_parallelism():
    setup = TrainingSetup(parallel="fsdp", gpus=2)
    assert setup_for_cards(setup, 1).parallel == "single"
    assert setup_for_cards(setup, 8).gpus == 8 and setup_for_cards(setup, 8).parallel == "fsdp"
    assert setup_for_cards(TrainingSetup(), 4).parallel == "ddp"


def test_prices_from_the_shops_price_list():
    prices = PriceList(currency="EUR", rate_per_card_hour={"h200": Decimal("3.00")},
                       term_discount_percent={30: Decimal(10)})
    table = prices_from_price_list(prices, product="h200", product_name="H200", cards_per_unit=2, quantities=(1, 2))
    assert table[1][3] == Decimal("432.00")  # 2 cards × 72 h × 3.00
    assert table[2][30] == Decimal("7776.00")  # 4 cards × 720 h × 3.00, less 10 %
    assert prices_from_price_list(prices, product="a100", product_name="A100", cards_per_unit=1,
                                  quantities=(1,)) == {}
