"""Half-open periods: the arithmetic every booking rests on. Pure, no database."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorgpu.allocation.periods import Period, PeriodError, free_starts, merge, require_aware

T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def p(a: float, b: float) -> Period:
    return Period(h(a), h(b))


# --- construction -----------------------------------------------------------------------------

def test_naive_start_is_refused_with_a_clear_message():
    with pytest.raises(PeriodError, match="start must carry a time zone"):
        Period(datetime(2030, 1, 1), h(1))


def test_naive_end_is_refused():
    with pytest.raises(PeriodError, match="end must carry a time zone"):
        Period(h(0), datetime(2030, 1, 2))


def test_require_aware_names_what_was_naive_and_converts_to_utc():
    with pytest.raises(PeriodError, match="not_before must carry"):
        require_aware(datetime(2030, 1, 1), "not_before")
    plus_two = timezone(timedelta(hours=2))
    converted = require_aware(datetime(2030, 1, 1, 12, tzinfo=plus_two))
    assert converted == datetime(2030, 1, 1, 10, tzinfo=timezone.utc)
    assert converted.utcoffset() == timedelta(0)


@pytest.mark.parametrize("a, b", [(1, 1), (2, 1)])
def test_empty_or_reversed_periods_cannot_exist(a, b):
    with pytest.raises(PeriodError, match="must end after it starts"):
        p(a, b)


def test_period_errors_are_value_errors():
    assert issubclass(PeriodError, ValueError)


def test_other_time_zones_are_normalised_to_utc_and_compare_equal():
    plus_two = timezone(timedelta(hours=2))
    local = Period(datetime(2030, 1, 1, 2, tzinfo=plus_two), datetime(2030, 1, 1, 3, tzinfo=plus_two))
    assert local == p(0, 1)
    assert local.start.tzinfo == timezone.utc


def test_of_days_and_duration():
    period = Period.of_days(T0, 7)
    assert period.end == T0 + timedelta(days=7)
    assert period.duration == timedelta(days=7)


# --- half-open semantics ----------------------------------------------------------------------

def test_contains_start_but_not_end():
    period = p(0, 2)
    assert period.contains(h(0))
    assert period.contains(h(1.999))
    assert not period.contains(h(2))
    assert not period.contains(h(-0.001))


def test_touching_periods_do_not_overlap_either_way():
    assert not p(0, 1).overlaps(p(1, 2))
    assert not p(1, 2).overlaps(p(0, 1))
    assert p(0, 1).intersection(p(1, 2)) is None


def test_one_microsecond_of_shared_time_is_an_overlap():
    a = p(0, 1)
    b = Period(h(1) - timedelta(microseconds=1), h(2))
    assert a.overlaps(b) and b.overlaps(a)
    assert a.intersection(b) == Period(h(1) - timedelta(microseconds=1), h(1))


@pytest.mark.parametrize("a, b", [((0, 4), (1, 2)), ((1, 2), (0, 4)), ((0, 2), (1, 3)), ((0, 2), (0, 2))])
def test_overlapping_periods(a, b):
    assert p(*a).overlaps(p(*b))
    assert p(*b).overlaps(p(*a))


def test_intersection():
    assert p(0, 3).intersection(p(2, 5)) == p(2, 3)
    assert p(0, 5).intersection(p(1, 2)) == p(1, 2)
    assert p(0, 1).intersection(p(3, 4)) is None


# --- merge and minus --------------------------------------------------------------------------

def test_merge_sorts_and_joins_overlapping_and_touching_periods():
    merged = merge([p(5, 6), p(0, 1), p(1, 2), p(1.5, 3), p(4, 4.5)])
    assert merged == [p(0, 3), p(4, 4.5), p(5, 6)]


def test_merge_keeps_a_contained_period_inside_the_larger_one():
    assert merge([p(0, 10), p(2, 3)]) == [p(0, 10)]


def test_merge_of_nothing_is_nothing():
    assert merge([]) == []


def test_minus_cuts_holes_and_keeps_the_rest_in_order():
    window = p(0, 10)
    assert window.minus([p(2, 3), p(5, 7)]) == [p(0, 2), p(3, 5), p(7, 10)]


def test_minus_ignores_periods_outside_and_clips_those_on_the_edges():
    window = p(2, 8)
    assert window.minus([p(0, 1), p(1, 3), p(7, 9), p(20, 30)]) == [p(3, 7)]


def test_minus_with_touching_periods_leaves_the_window_whole():
    assert p(2, 8).minus([p(0, 2), p(8, 9)]) == [p(2, 8)]


def test_minus_everything_leaves_nothing():
    assert p(2, 8).minus([p(0, 5), p(4, 9)]) == []
    assert p(2, 8).minus([p(2, 8)]) == []


def test_minus_nothing_is_the_whole_period():
    assert p(2, 8).minus([]) == [p(2, 8)]


# --- free_starts ------------------------------------------------------------------------------

def test_free_starts_with_nothing_busy_is_open_from_not_before():
    assert list(free_starts([], timedelta(hours=3), h(0))) == [(h(0), None)]


def test_free_starts_before_a_busy_period_ends_where_the_term_would_touch_it():
    ranges = list(free_starts([p(10, 12)], timedelta(hours=3), h(0)))
    # a 3-hour term may start up to 7:00 and end exactly at 10:00; next one from 12:00
    assert ranges == [(h(0), h(7)), (h(12), None)]


def test_free_starts_a_gap_of_exactly_the_term_length_fits_once():
    ranges = list(free_starts([p(0, 2), p(5, 6)], timedelta(hours=3), h(0)))
    assert ranges == [(h(2), h(2)), (h(6), None)]


def test_free_starts_a_gap_shorter_than_the_term_is_skipped():
    ranges = list(free_starts([p(0, 2), p(4, 6)], timedelta(hours=3), h(0)))
    assert ranges == [(h(6), None)]


def test_free_starts_from_inside_a_busy_period_begins_at_its_end():
    ranges = list(free_starts([p(0, 5)], timedelta(hours=1), h(2)))
    assert ranges == [(h(5), None)]


def test_free_starts_ignores_periods_that_end_before_not_before():
    ranges = list(free_starts([p(0, 1), p(1, 3)], timedelta(hours=1), h(3)))
    assert ranges == [(h(3), None)]


def test_free_starts_merges_overlapping_busy_periods_first():
    ranges = list(free_starts([p(4, 8), p(2, 5)], timedelta(hours=1), h(0)))
    assert ranges == [(h(0), h(1)), (h(8), None)]


# --- properties -------------------------------------------------------------------------------

hours = st.integers(min_value=0, max_value=48)
period_st = st.tuples(hours, st.integers(min_value=1, max_value=12)).map(lambda t: p(t[0], t[0] + t[1]))


def _covered(periods, moment) -> bool:
    return any(x.contains(moment) for x in periods)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)  # same examples every run
@given(st.lists(period_st, max_size=8))
def test_merge_is_disjoint_sorted_and_covers_the_same_moments(periods):
    merged = merge(periods)
    for a, b in zip(merged, merged[1:]):
        assert a.end < b.start  # not even touching
    for half_hour in range(0, 2 * 62):
        moment = h(half_hour / 2)
        assert _covered(merged, moment) == _covered(periods, moment)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)  # same examples every run
@given(period_st, st.lists(period_st, max_size=8))
def test_minus_leaves_exactly_the_uncovered_part(window, others):
    pieces = window.minus(others)
    for a, b in zip(pieces, pieces[1:]):
        assert a.end < b.start
    for piece in pieces:
        assert window.start <= piece.start and piece.end <= window.end
        assert not any(piece.overlaps(o) for o in others)
    for half_hour in range(0, 2 * 62):
        moment = h(half_hour / 2)
        expected = window.contains(moment) and not _covered(others, moment)
        assert _covered(pieces, moment) == expected


@settings(max_examples=200, deadline=None, derandomize=True, database=None)  # same examples every run
@given(st.lists(period_st, max_size=6), st.integers(min_value=1, max_value=10), hours)
def test_free_starts_are_exactly_the_fitting_starts(busy, length_h, not_before_h):
    length = timedelta(hours=length_h)
    ranges = list(free_starts(busy, length, h(not_before_h)))
    assert ranges[-1][1] is None
    for first, last in ranges:
        assert last is None or first <= last

    def listed(t):
        return any(first <= t and (last is None or t <= last) for first, last in ranges)

    for step in range(2 * not_before_h, 2 * 80):  # every half hour from not_before on
        t = h(step / 2)
        fits = not any(Period(t, t + length).overlaps(b) for b in busy)
        assert listed(t) == fits, t
    assert not listed(h(not_before_h) - timedelta(microseconds=1))
