"""The term a run needs: wall time part by part, the shortest term of 3, 7 or 30 days that holds it with the
margin, what the term's end means for a run that overruns, and the cost of a result."""

import math
from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorgpu.planner import PlannerInputError
from anchorgpu.planner.recommend import SECONDS_PER_DAY
from anchorgpu.planner.run_cost import Candidate, compare, run_cost
from anchorgpu.planner.term import (
    DEFAULT_MARGIN,
    WARNING_HOURS_BEFORE_END,
    Overheads,
    RateSource,
    RunSize,
    TokenRate,
    overrun_at,
    recommend_term,
    upload_seconds,
    wall_time,
)

DAY = SECONDS_PER_DAY
# Nothing but training: the boundaries below are then plain arithmetic.
BARE = Overheads(loading_s=0, checkpoints=0, validation_passes=0, export_s=0)
PILOT = TokenRate.pilot(1000.0, "pilot on one H100")


def _tokens_for(days: float, margin: float = DEFAULT_MARGIN, rate: float = 1000.0) -> int:
    """The most tokens (in thousands) whose training alone, with the margin, fits in ``days``."""
    return math.floor(days * DAY / (1 + margin)) * int(rate)


# --- the size of a run -------------------------------------------------------------------------------------------

def test_steps_times_global_batch_times_sequence_length_gives_the_tokens():
    size = RunSize.from_steps(10_000, 64, 2048)
    assert size.tokens == 10_000 * 64 * 2048 and size.basis == "steps" and size.global_batch == 64
    epochs = RunSize.from_epochs(300_000_000, 3)
    assert epochs.tokens == 900_000_000 and epochs.basis == "epochs" and epochs.epochs == 3
    assert epochs.times(4).tokens == 3_600_000_000 and epochs.times(4).epochs == 12


@pytest.mark.parametrize("kwargs, field", [
    ({"steps": 0, "global_batch": 8, "seq_len": 512}, "steps"),
    ({"steps": 10, "global_batch": -8, "seq_len": 512}, "global_batch"),
    ({"steps": 10, "global_batch": 8, "seq_len": 512.5}, "seq_len"),
    ({"steps": True, "global_batch": 8, "seq_len": 512}, "steps"),
    ({"steps": "100", "global_batch": 8, "seq_len": 512}, "steps"),
])
def test_a_bad_step_count_batch_or_length_is_refused_naming_the_field(kwargs, field):
    with pytest.raises(PlannerInputError) as caught:
        RunSize.from_steps(**kwargs)
    assert caught.value.field == field and "positive whole number" in caught.value.message


def test_bad_epochs_throughput_overheads_and_margin_are_refused_naming_the_field():
    with pytest.raises(PlannerInputError, match="epochs"):
        RunSize.from_epochs(1000, 0)
    with pytest.raises(PlannerInputError, match="tokens_per_epoch"):
        RunSize.from_epochs(None, 2)
    for bad in (0, -5.0, float("nan"), float("inf"), True, "fast"):
        with pytest.raises(PlannerInputError, match="tokens_per_s"):
            TokenRate.pilot(bad)
    with pytest.raises(ValueError):
        TokenRate(100.0, "guess")
    with pytest.raises(PlannerInputError, match="overheads.loading_s"):
        wall_time(RunSize.from_epochs(1000, 1), PILOT, Overheads(loading_s=-1))
    with pytest.raises(PlannerInputError, match="overheads.checkpoint_every_s"):
        wall_time(RunSize.from_epochs(1000, 1), PILOT, Overheads(checkpoint_every_s=0))
    with pytest.raises(PlannerInputError, match="overheads.checkpoints"):
        wall_time(RunSize.from_epochs(1000, 1), PILOT, Overheads(checkpoints=2.5))
    for margin in (-0.1, 1.5, True, "15%"):
        with pytest.raises(PlannerInputError, match="margin"):
            recommend_term(RunSize.from_epochs(1000, 1), PILOT, margin=margin)


# --- wall time ---------------------------------------------------------------------------------------------------

def test_the_wall_time_adds_loading_validation_checkpoints_and_export_to_the_training():
    size = RunSize.from_epochs(360_000_000, 1)  # 100 hours at 1,000 tokens/s
    wall = wall_time(size, PILOT)  # the documented defaults
    assert wall.training_s == 100 * 3600
    assert wall.checkpoints == 34 and wall.validation_passes == 34  # one every 3 hours of training, the last at the end
    assert wall.checkpoint_s == 34 * (120 + 600) and wall.validation_s == 34 * 300
    assert wall.total_s == 20 * 60 + 100 * 3600 + 34 * 300 + 34 * 720 + 15 * 60
    pilot_figures = Overheads(checkpoints=5, checkpoint_write_s=30, checkpoint_upload_s=upload_seconds(15 * 10**9),
                              validation_passes=2, validation_pass_s=60, loading_s=600, export_s=300)
    wall = wall_time(size, PILOT, pilot_figures)
    assert wall.checkpoint_s == 5 * (30 + 150) and wall.validation_s == 120
    assert wall.total_s == 600 + 100 * 3600 + 120 + 900 + 300


# --- the term, at its boundaries ---------------------------------------------------------------------------------

def test_a_run_that_just_fits_seven_days_with_the_margin_gets_seven_days():
    advice = recommend_term(RunSize.from_epochs(_tokens_for(7), 1), PILOT, overheads=BARE)
    assert advice.term_days == 7 and advice.fits
    assert advice.wall.total_s * 1.15 <= 7 * DAY and 0 <= advice.slack_s < 2
    assert advice.shortfall_s is None
    assert [(t.term_days, t.covers) for t in advice.terms] == [(3, False), (7, True), (30, True)]


def test_a_run_a_little_longer_needs_thirty_days():
    advice = recommend_term(RunSize.from_epochs(_tokens_for(7) + 2000, 1), PILOT, overheads=BARE)
    assert advice.term_days == 30
    assert advice.needed_s > 7 * DAY and advice.slack_s == pytest.approx(30 * DAY - advice.needed_s)


def test_the_margin_decides_at_the_boundary():
    size = RunSize.from_epochs(_tokens_for(7, margin=0.0), 1)  # exactly 7 days of training, nothing else
    assert recommend_term(size, PILOT, overheads=BARE, margin=0.0).term_days == 7
    assert recommend_term(size, PILOT, overheads=BARE, margin=0.01).term_days == 30


def test_a_short_run_fits_three_days_and_the_next_token_of_work_does_not():
    assert recommend_term(RunSize.from_epochs(_tokens_for(3), 1), PILOT, overheads=BARE).term_days == 3
    assert recommend_term(RunSize.from_epochs(_tokens_for(3) + 2000, 1), PILOT, overheads=BARE).term_days == 7


def test_a_run_longer_than_every_term_states_the_shortfall():
    tokens = 40 * DAY * 1000  # 40 days of training
    advice = recommend_term(RunSize.from_epochs(tokens, 1), PILOT, overheads=BARE)
    assert advice.term_days is None and not advice.fits and advice.slack_s is None
    assert advice.shortfall_s == pytest.approx(40 * DAY * 1.15 - 30 * DAY)
    codes = {note.code: note.params for note in advice.notes}
    assert codes["no_term_covers_run"]["longest_term_days"] == 30
    assert advice.overrun.term_days == 30 and not advice.overrun.completes


def test_steps_and_global_batch_input_with_a_pilot_rate_and_default_overheads():
    size = RunSize.from_steps(10_000, 64, 2048)  # 1.31e9 tokens
    advice = recommend_term(size, TokenRate.pilot(5000.0))
    assert advice.wall.training_s == pytest.approx(262_144.0)  # 3.03 days: more than a 3-day term by itself
    assert advice.term_days == 7 and advice.rate.source is RateSource.PILOT
    assert "throughput_estimated" not in {n.code for n in advice.notes}
    estimated = recommend_term(size, TokenRate.estimate(5000.0, "from FLOPs"))
    assert {n.code: n.params for n in estimated.notes}["throughput_estimated"] == {"note": "from FLOPs"}


# --- what the end of a term means --------------------------------------------------------------------------------

def test_the_warning_matches_the_shops_term_end_sweep():
    from anchorgpu.orders.lifecycle import WARN_BEFORE

    assert timedelta(hours=WARNING_HOURS_BEFORE_END) == WARN_BEFORE


def test_a_run_that_fits_loses_at_most_one_checkpoint_interval_if_it_overruns():
    size = RunSize.from_epochs(360_000_000, 1)  # 100 h of training, 34 checkpoints
    advice = recommend_term(size, PILOT)
    facts = advice.overrun
    assert advice.term_days == 7 and facts.completes and facts.progress == 1.0 and facts.resume_s == 0
    assert facts.saved_tokens == size.tokens and facts.lost_training_s == 0
    assert facts.max_lost_training_s == pytest.approx(100 * 3600 / 34)
    assert facts.tolerated_slowdown == pytest.approx(7 * DAY / advice.wall.total_s - 1)
    codes = [c.code for c in facts.consequences]
    assert codes == ["term_end_warning", "term_end_release_and_wipe", "local_nvme_not_a_backup",
                     "upload_checkpoints_off_machine"]
    assert facts.consequences[0].params == {"hours_before": 24}


def test_a_run_cut_by_the_end_of_its_term_keeps_only_its_last_uploaded_checkpoint():
    size = RunSize.from_epochs(360_000_000, 1)
    wall = wall_time(size, PILOT, Overheads(checkpoints=10))
    facts = overrun_at(size, wall, 3)  # 100 h of training in a 72 h term
    progress = (3 * DAY - wall.loading_s) / wall.middle_s
    assert not facts.completes and facts.progress == pytest.approx(progress)
    assert facts.saved_tokens == size.tokens * math.floor(progress * 10) // 10  # 6 of 10 checkpoints uploaded
    assert facts.saved_tokens == 216_000_000
    assert facts.lost_training_s == pytest.approx((progress - 0.6) * wall.training_s)
    assert facts.resume_s == pytest.approx(wall.loading_s + 0.4 * wall.middle_s + wall.export_s)
    assert facts.tolerated_slowdown < 0
    unfinished = facts.consequences[-1]
    assert unfinished.code == "run_unfinished_at_term_end" and unfinished.params["saved_tokens"] == 216_000_000


def test_a_run_without_checkpoints_loses_everything_at_the_end_of_the_term():
    size = RunSize.from_epochs(360_000_000, 1)
    facts = overrun_at(size, wall_time(size, PILOT, BARE), 3)
    assert facts.saved_tokens == 0 and facts.lost_training_s == pytest.approx(3 * DAY)
    assert facts.max_lost_training_s == 100 * 3600


@settings(max_examples=300, deadline=None)
@given(tokens=st.integers(1, 10**13), rate=st.floats(1.0, 1e6), margin=st.floats(0.0, 1.0),
       loading=st.floats(0, 5 * 3600), checkpoints=st.none() | st.integers(0, 500), export=st.floats(0, 7200))
def test_the_recommended_term_covers_the_run_and_no_shorter_term_does(tokens, rate, margin, loading, checkpoints,
                                                                        export):
    overheads = Overheads(loading_s=loading, checkpoints=checkpoints, export_s=export)
    advice = recommend_term(RunSize.from_epochs(tokens, 1), TokenRate.pilot(rate), overheads=overheads,
                            margin=margin)
    needed = advice.wall.total_s * (1 + margin)
    shorter = [t for t in (3, 7, 30) if advice.term_days is None or t < advice.term_days]
    assert all(needed > t * DAY for t in shorter)
    if advice.term_days is not None:
        assert needed <= advice.term_days * DAY and advice.slack_s >= 0
        assert advice.overrun.completes
    else:
        assert advice.shortfall_s > 0
    facts = advice.overrun
    assert 0 <= facts.progress <= 1 and 0 <= facts.saved_tokens <= tokens
    assert facts.completes == (advice.wall.total_s <= facts.term_days * DAY)


# --- cost of a result --------------------------------------------------------------------------------------------

def test_the_cost_per_million_tokens_is_the_terms_price_over_the_runs_tokens():
    advice = recommend_term(RunSize.from_epochs(_tokens_for(7), 1), PILOT, overheads=BARE)
    prices = {3: Decimal("150.00"), 7: Decimal("330.00"), 30: Decimal("1200.00")}
    cost = run_cost(advice, prices, currency="EUR")
    assert cost.term_days == 7 and cost.price == Decimal("330.00") and cost.per_run == Decimal("330.00")
    assert cost.per_million_tokens == (Decimal("330.00") * 10**6 / advice.size.tokens).quantize(Decimal("0.0001"))
    assert cost.per_million_tokens == Decimal("0.6275") and cost.runs_per_term == 1
    assert cost.source is RateSource.PILOT
    yen = run_cost(advice, {7: Decimal("52000")}, currency="JPY")
    assert yen.per_million_tokens == Decimal("98.88")  # a hundredth of the yen, the currency's unit being 1


def test_the_cost_takes_the_next_covering_term_with_a_price_and_none_when_nothing_fits():
    advice = recommend_term(RunSize.from_epochs(_tokens_for(3), 1), PILOT, overheads=BARE)
    assert run_cost(advice, {7: Decimal("330.00"), 30: Decimal("1200.00")}, currency="EUR").term_days == 7
    assert run_cost(advice, {}, currency="EUR") is None
    too_long = recommend_term(RunSize.from_epochs(40 * DAY * 1000, 1), PILOT, overheads=BARE)
    assert run_cost(too_long, {30: Decimal("1200.00")}, currency="EUR") is None
    with pytest.raises(PlannerInputError, match="price"):
        run_cost(advice, {3: 150.0}, currency="EUR")
    short = recommend_term(RunSize.from_epochs(3_600_000, 1), PILOT, overheads=BARE)  # one hour
    assert run_cost(short, {3: Decimal("150.00")}, currency="EUR").runs_per_term == int(3 * DAY // (3600 * 1.15))


def test_a_faster_dearer_card_that_finishes_sooner_is_cheaper_per_result():
    size = RunSize.from_epochs(600_000_000, 1)  # 6.9 days on the slow card, 2.3 on the fast one
    slow = Candidate("slow×1", "Slow card", TokenRate.pilot(1000.0),
                     {3: Decimal("100.00"), 7: Decimal("210.00"), 30: Decimal("800.00")}, "EUR")
    fast = Candidate("fast×1", "Fast card", TokenRate.pilot(3000.0),
                     {3: Decimal("250.00"), 7: Decimal("560.00"), 30: Decimal("2000.00")}, "EUR")
    assert all(fast.prices[t] > slow.prices[t] for t in (3, 7, 30))  # dearer for every term
    result = compare(size, [slow, fast], overheads=BARE)
    by_key = {r.candidate.key: r for r in result.results}
    assert by_key["slow×1"].advice.term_days == 30 and by_key["fast×1"].advice.term_days == 3
    assert result.cheapest.candidate.key == "fast×1" and result.fastest.candidate.key == "fast×1"
    assert by_key["fast×1"].cost.per_run == Decimal("250.00") < by_key["slow×1"].cost.per_run == Decimal("800.00")
    assert by_key["fast×1"].cost.per_million_tokens < by_key["slow×1"].cost.per_million_tokens
    unpriced = Candidate("odd×1", "Unpriced", TokenRate.pilot(5000.0), {}, "EUR")
    assert compare(size, [unpriced, slow], overheads=BARE).results[-1].candidate.key == "odd×1"
