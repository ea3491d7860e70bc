"""The placement policy documented in placement.py. Pure, no database."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorgpu.allocation.placement import NotEnoughUnits, place
from anchorgpu.allocation.units import Device, Unit, units_from_devices

_ids = iter(range(1, 10**9))


def host(name: str, cards: int, *, busy: set[int] = frozenset(), paired: bool = True, lot: bool = False) -> list[Unit]:
    """The free units of one host: its devices minus the busy indexes."""
    devices = [Device(next(_ids), name, i, pair=(i // 2) if paired else None) for i in range(cards) if i not in busy]
    return units_from_devices(devices, 2 if lot else 1)


def hosts_of(units) -> list:
    return sorted({u.host for u in units})


def indexes(units) -> list[tuple]:
    return sorted((u.host, u.index) for u in units)


# --- basics -----------------------------------------------------------------------------------

def test_takes_exactly_the_quantity_without_repeats():
    free = host("a", 8)
    chosen = place(free, 5)
    assert len(chosen) == 5 and len(set(chosen)) == 5
    assert set(chosen) <= set(free)


def test_not_enough_units_says_how_many_were_wanted_and_free():
    with pytest.raises(NotEnoughUnits, match="3 unit\\(s\\) wanted, 2 free") as caught:
        place(host("a", 2), 3)
    assert (caught.value.wanted, caught.value.free) == (3, 2)


@pytest.mark.parametrize("quantity", [0, -1])
def test_quantity_must_be_positive(quantity):
    with pytest.raises(ValueError, match="at least 1"):
        place(host("a", 2), quantity)


# --- 1. one host if possible ------------------------------------------------------------------

def test_a_multi_unit_order_lands_on_one_host_when_one_host_has_enough():
    free = host("a", 3, paired=False) + host("b", 4, paired=False)
    chosen = place(free, 4)
    assert hosts_of(chosen) == ["b"]


def test_one_host_is_preferred_even_over_filling_a_fuller_host_first():
    free = host("a", 2, paired=False) + host("b", 8, paired=False)
    assert hosts_of(place(free, 3)) == ["b"]


# --- 2. best fit ------------------------------------------------------------------------------

def test_best_fit_fills_a_partly_used_host_and_keeps_the_whole_host_free():
    free = host("whole", 8) + host("partly", 8, busy={0, 1, 2, 3, 4})  # 3 free
    chosen = place(free, 2)
    assert hosts_of(chosen) == ["partly"]


def test_best_fit_ties_go_to_the_host_listed_first():
    free = host("b", 4, paired=False) + host("a", 4, paired=False)
    assert hosts_of(place(free, 2)) == ["b"]


def test_spanning_uses_the_fewest_hosts_largest_whole_then_best_fit():
    free = host("small", 2, paired=False) + host("big", 6, paired=False) + host("mid", 4, paired=False)
    chosen = place(free, 9)
    counts = Counter(u.host for u in chosen)
    assert counts == {"big": 6, "mid": 3}


def test_spanning_remainder_goes_to_the_best_fitting_host():
    free = host("a", 5, paired=False) + host("b", 8, paired=False) + host("c", 2, paired=False)
    chosen = place(free, 10)  # 8 + 2: the remainder of 2 fits c exactly, a stays whole
    assert Counter(u.host for u in chosen) == {"b": 8, "c": 2}


def test_spanning_three_hosts_when_two_are_not_enough():
    free = host("a", 4, paired=False) + host("b", 4, paired=False) + host("c", 4, paired=False)
    chosen = place(free, 9)
    assert sorted(Counter(u.host for u in chosen).values()) == [1, 4, 4]


# --- 3. keep pairs whole ----------------------------------------------------------------------

def test_a_single_card_comes_from_a_broken_pair_before_a_whole_one():
    free = host("a", 8, busy={2})  # pair 1 lost its card 2; card 3 is alone
    assert indexes(place(free, 1)) == [("a", 3)]


def test_unpaired_cards_are_used_before_whole_pairs():
    free = host("a", 4) + [Unit((999,), "a", 4, None)]
    assert indexes(place(free, 1)) == [("a", 4)]


def test_two_broken_pairs_serve_a_two_card_order_and_keep_whole_pairs_whole():
    free = host("a", 8, busy={0, 3})  # cards 1 and 2 are alone; pairs 2 and 3 whole
    assert indexes(place(free, 2)) == [("a", 1), ("a", 2)]


def test_a_two_card_order_gets_a_pair_of_its_own():
    assert indexes(place(host("a", 8), 2)) == [("a", 0), ("a", 1)]


def test_a_two_card_order_gets_a_pair_even_when_one_card_is_alone():
    # Card 1 alone + half of pair 1 would split a pair just as surely as taking pair 1 whole,
    # but leave the order without an NVLink pair: take pair 1.
    free = host("a", 8, busy={0})
    chosen = place(free, 2)
    assert indexes(chosen) == [("a", 2), ("a", 3)]
    assert len({u.pair for u in chosen}) == 1


def test_an_odd_order_takes_the_lone_card_and_whole_pairs():
    free = host("a", 8, busy={0})
    assert indexes(place(free, 3)) == [("a", 1), ("a", 2), ("a", 3)]


def test_lots_are_placed_as_units_on_one_host():
    free = host("a", 8, lot=True) + host("b", 4, lot=True)
    chosen = place(free, 2)
    assert hosts_of(chosen) == ["b"]
    assert all(len(u.devices) == 2 for u in chosen)


# --- properties -------------------------------------------------------------------------------

@st.composite
def fleets(draw):
    free: list[Unit] = []
    for n in range(draw(st.integers(min_value=1, max_value=4))):
        cards = draw(st.sampled_from([2, 4, 8]))
        busy = draw(st.sets(st.integers(0, cards - 1), max_size=cards - 1))
        free += host(f"h{n}", cards, busy=busy)
    quantity = draw(st.integers(min_value=1, max_value=max(1, len(free))))
    return free, quantity


def _min_hosts(free, quantity) -> int:
    sizes = sorted(Counter(u.host for u in free).values(), reverse=True)
    total = 0
    for used, size in enumerate(sizes, 1):
        total += size
        if total >= quantity:
            return used
    raise AssertionError("not enough units")


@settings(max_examples=300, deadline=None, derandomize=True, database=None)  # same examples every run
@given(fleets())
def test_placement_returns_exactly_quantity_distinct_free_units_on_the_fewest_hosts(fleet):
    free, quantity = fleet
    chosen = place(free, quantity)
    assert len(chosen) == quantity
    assert len({u.devices for u in chosen}) == quantity
    assert set(chosen) <= set(free)
    assert len({u.host for u in chosen}) == _min_hosts(free, quantity)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)  # same examples every run
@given(fleets())
def test_placement_splits_at_most_one_whole_pair_per_host(fleet):
    free, quantity = fleet
    chosen = set(place(free, quantity))
    by_pair: dict[tuple, list[Unit]] = {}
    for unit in free:
        by_pair.setdefault((unit.host, unit.pair), []).append(unit)
    split = Counter(host for (host, _), members in by_pair.items()
                    if len(members) == 2 and sum(m in chosen for m in members) == 1)
    assert all(n <= 1 for n in split.values()), split
