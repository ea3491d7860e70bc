"""Availability arithmetic: free units for a period and the earliest start. Pure, no database."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorgpu.allocation.periods import Period
from anchorgpu.allocation.search import earliest_start, free_units, unit_busy
from anchorgpu.allocation.units import Device, Unit, units_from_devices

T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
DAY = timedelta(days=1)


def d(days: float) -> datetime:
    return T0 + timedelta(days=days)


def p(a: float, b: float) -> Period:
    return Period(d(a), d(b))


def cards(n: int, host: str = "h") -> list[Unit]:
    return units_from_devices([Device(i + 1, host, i, pair=i // 2) for i in range(n)], 1)


def lots(n_pairs: int, host: str = "h") -> list[Unit]:
    return units_from_devices([Device(i + 1, host, i, pair=i // 2) for i in range(2 * n_pairs)], 2)


# --- free_units -------------------------------------------------------------------------------

def test_free_units_excludes_units_busy_at_any_moment_of_the_period():
    units = cards(4)
    busy = {1: [p(0, 3)], 2: [p(6, 9)], 3: [p(2.5, 2.6)]}
    free = free_units(units, busy, p(2, 5))
    assert [u.devices for u in free] == [(2,), (4,)]


def test_free_units_touching_bookings_do_not_block():
    busy = {1: [p(0, 2)], 2: [p(5, 9)]}
    assert [u.devices for u in free_units(cards(2), busy, p(2, 5))] == [(1,), (2,)]


def test_a_lot_is_busy_when_either_of_its_cards_is():
    units = lots(2)  # (1, 2) and (3, 4)
    busy = {2: [p(1, 2)]}
    assert unit_busy(units[0], busy) == [p(1, 2)]
    assert [u.devices for u in free_units(units, busy, p(0, 3))] == [(3, 4)]


# --- earliest_start ---------------------------------------------------------------------------

def test_nothing_busy_starts_now():
    assert earliest_start(cards(2), {}, quantity=2, length=3 * DAY, not_before=d(0)) == d(0)


def test_starts_now_when_enough_units_are_free_despite_other_bookings():
    busy = {1: [p(0, 10)], 2: [p(1, 4)]}
    assert earliest_start(cards(3), busy, quantity=1, length=3 * DAY, not_before=d(0)) == d(0)


def test_a_gap_exactly_the_term_length_is_used():
    busy = {1: [p(0, 2), p(5, 20)]}
    assert earliest_start(cards(1), busy, quantity=1, length=3 * DAY, not_before=d(0)) == d(2)


def test_a_gap_one_microsecond_short_is_not_used():
    busy = {1: [Period(d(0), d(2) + timedelta(microseconds=1)), p(5, 20)]}
    assert earliest_start(cards(1), busy, quantity=1, length=3 * DAY, not_before=d(0)) == d(20)


def test_between_bookings_waits_until_enough_units_are_free_together():
    # unit 1 free [0,4) then from 10; unit 2 busy [0,3) then free: two units together from 10,
    # or in [3,4) -- too short for a 3-day term.
    busy = {1: [p(4, 10)], 2: [p(0, 3)]}
    assert earliest_start(cards(2), busy, quantity=2, length=3 * DAY, not_before=d(0)) == d(10)
    assert earliest_start(cards(2), busy, quantity=2, length=1 * DAY, not_before=d(0)) == d(3)


def test_a_range_closing_at_the_instant_another_opens_counts_both():
    # unit 1 may start up to day 2 (busy from 5); unit 2 from day 2 on.
    busy = {1: [p(5, 10)], 2: [p(0, 2)]}
    assert earliest_start(cards(2), busy, quantity=2, length=3 * DAY, not_before=d(0)) == d(2)


def test_respects_not_before():
    assert earliest_start(cards(1), {1: [p(0, 1)]}, quantity=1, length=DAY, not_before=d(3)) == d(3)


def test_quantity_larger_than_the_fleet_is_none():
    assert earliest_start(cards(3), {}, quantity=4, length=DAY, not_before=d(0)) is None
    assert earliest_start([], {}, quantity=1, length=DAY, not_before=d(0)) is None


def test_quantity_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        earliest_start(cards(1), {}, quantity=0, length=DAY, not_before=d(0))


def test_pairs_wait_for_both_cards_of_a_pair():
    units = lots(2)  # (1, 2), (3, 4)
    busy = {1: [p(0, 2)], 4: [p(0, 6)]}
    assert earliest_start(units, busy, quantity=1, length=DAY, not_before=d(0)) == d(2)
    assert earliest_start(units, busy, quantity=2, length=DAY, not_before=d(0)) == d(6)
    assert earliest_start(units, busy, quantity=3, length=DAY, not_before=d(0)) is None


# --- property: the answer is right and nothing earlier is ---------------------------------------

@st.composite
def fleets(draw):
    lot_size = draw(st.sampled_from([1, 2]))
    n_units = draw(st.integers(min_value=1, max_value=5))
    devices = [Device(i + 1, "h" if i < 4 else "g", i, pair=i // 2) for i in range(n_units * lot_size)]
    units = units_from_devices(devices, lot_size)
    busy: dict[int, list[Period]] = {}
    for device in devices:
        spans = draw(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 8)), max_size=4))
        if spans:
            busy[device.id] = [Period(d(a / 2), d((a + n) / 2)) for a, n in spans]  # half-day grid
    quantity = draw(st.integers(min_value=1, max_value=n_units + 1))
    length = timedelta(hours=12) * draw(st.integers(min_value=1, max_value=8))
    not_before = d(draw(st.integers(0, 30)) / 2)
    return units, busy, quantity, length, not_before


def _free_count(units, busy, start, length) -> int:
    return len(free_units(units, busy, Period(start, start + length)))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)  # same examples every run
@given(fleets())
def test_earliest_start_really_fits_and_nothing_earlier_does(fleet):
    units, busy, quantity, length, not_before = fleet
    result = earliest_start(units, busy, quantity=quantity, length=length, not_before=not_before)
    if quantity > len(units):
        assert result is None
        return
    assert result is not None and result >= not_before
    assert _free_count(units, busy, result, length) >= quantity
    # The feasible starts are closed ranges opening at not_before or at a busy end, so checking those
    # candidates (and, for good measure, every hour) before the result proves none is earlier.
    candidates = {not_before} | {b.end for periods in busy.values() for b in periods}
    t = not_before
    while t < result:
        candidates.add(t)
        t += timedelta(hours=1)
    for candidate in sorted(c for c in candidates if not_before <= c < result):
        assert _free_count(units, busy, candidate, length) < quantity, candidate
