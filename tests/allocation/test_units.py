"""Devices grouped into sellable units: cards, or NVLink-pair lots. Pure, no database."""

from __future__ import annotations

import pytest

from anchorgpu.allocation.units import Device, TopologyError, Unit, host_counts, units_from_devices, units_from_rows


def host_devices(host: str, count: int, *, first_id: int, paired: bool) -> list[Device]:
    return [Device(id=first_id + i, host=host, index=i, pair=(i // 2) if paired else None) for i in range(count)]


def test_single_cards_every_device_is_a_unit_in_host_then_index_order():
    devices = host_devices("b", 2, first_id=10, paired=False) + host_devices("a", 3, first_id=1, paired=True)
    units = units_from_devices(reversed(devices), 1)
    assert [u.devices for u in units] == [(1,), (2,), (3,), (10,), (11,)]
    assert [(u.host, u.index, u.pair) for u in units[:3]] == [("a", 0, 0), ("a", 1, 0), ("a", 2, 1)]


def test_lots_are_complete_nvlink_pairs_on_one_host():
    devices = host_devices("a", 4, first_id=1, paired=True) + host_devices("b", 4, first_id=11, paired=True)
    units = units_from_devices(devices, 2)
    assert [u.devices for u in units] == [(1, 2), (3, 4), (11, 12), (13, 14)]
    assert [(u.host, u.pair, u.index) for u in units] == [("a", 0, 0), ("a", 1, 2), ("b", 0, 0), ("b", 1, 2)]


def test_lot_devices_are_ordered_by_index_whatever_the_input_order():
    devices = [Device(7, "a", 1, pair=0), Device(3, "a", 0, pair=0)]
    assert units_from_devices(devices, 2) == [Unit((3, 7), "a", 0, 0)]


def test_incomplete_pairs_and_unpaired_devices_are_not_lots():
    devices = [
        Device(1, "a", 0, pair=0), Device(2, "a", 1, pair=0),  # complete
        Device(3, "a", 2, pair=1),  # partner missing (busy, or not bookable)
        Device(4, "a", 3, pair=None), Device(5, "a", 4, pair=None),  # unpaired
    ]
    assert [u.devices for u in units_from_devices(devices, 2)] == [(1, 2)]


def test_a_pair_number_with_three_devices_is_not_a_lot():
    devices = [Device(1, "a", 0, pair=0), Device(2, "a", 1, pair=0), Device(3, "a", 2, pair=0)]
    assert units_from_devices(devices, 2) == []


def test_the_same_pair_number_on_two_hosts_is_two_different_pairs():
    devices = [Device(1, "a", 0, pair=0), Device(2, "b", 0, pair=0)]
    assert units_from_devices(devices, 2) == []
    devices += [Device(3, "a", 1, pair=0), Device(4, "b", 1, pair=0)]
    assert [(u.host, u.devices) for u in units_from_devices(devices, 2)] == [("a", (1, 3)), ("b", (2, 4))]


@pytest.mark.parametrize("cards", [0, 3, 4])
def test_unsupported_unit_sizes_are_refused(cards):
    with pytest.raises(TopologyError, match="not supported"):
        units_from_devices([Device(1, "a", 0)], cards)


def test_no_devices_no_units():
    assert units_from_devices([], 1) == []
    assert units_from_devices([], 2) == []


def test_host_counts_and_unit_key():
    units = units_from_devices(host_devices("a", 4, first_id=1, paired=True) + host_devices("b", 2, first_id=9, paired=True), 1)
    assert host_counts(units) == {"a": 4, "b": 2}
    assert units[0].key == (1,)


@pytest.mark.parametrize("seed", range(20))
def test_units_from_rows_are_those_from_devices(seed):
    """The database's rows turned straight into units give the units of their ``Device`` values, in order."""
    import random

    rng = random.Random(seed)
    rows = []
    for host in rng.sample(range(1, 40), 6):  # int hosts: ordered as text, as units_from_devices does
        for index in rng.sample(range(8), rng.randint(0, 8)):
            rows.append((rng.randrange(10_000), host, index, rng.choice([None, index // 2, index // 2, 3])))
    rng.shuffle(rows)
    for cards in (1, 2):
        assert units_from_rows(rows, cards) == units_from_devices([Device(*r) for r in rows], cards)
    with pytest.raises(TopologyError):
        units_from_rows(rows, 3)
