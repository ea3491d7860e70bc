"""Sellable units: one card, or an NVLink pair of two cards on one host.

Pure domain code. The database layer turns devices into ``Unit`` values;
search and placement work on units only, so a B200 lot is always both
cards of one pair or nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    id: int
    host: Hashable
    index: int
    pair: int | None = None  # NVLink pair number on its host; None when unpaired


@dataclass(frozen=True)
class Unit:
    devices: tuple[int, ...]
    host: Hashable
    index: int  # position on the host, for a stable order
    pair: int | None = None

    @property
    def key(self) -> tuple[int, ...]:
        return self.devices


class TopologyError(ValueError):
    """The fleet data cannot form the units a product sells."""


def units_from_devices(devices: Iterable[Device], cards_per_unit: int) -> list[Unit]:
    """Group devices into the product's units.

    One card per unit: every device is a unit. Two cards per unit: every
    complete NVLink pair on a host is a unit; unpaired devices and pairs
    missing a partner are not sellable as a lot and are left out.
    """
    if cards_per_unit == 1:
        return [Unit((d.id,), d.host, d.index, d.pair) for d in sorted(devices, key=lambda d: (str(d.host), d.index))]
    if cards_per_unit != 2:
        raise TopologyError(f"units of {cards_per_unit} cards are not supported (1 or 2)")
    pairs: dict[tuple, list[Device]] = defaultdict(list)
    for d in devices:
        if d.pair is not None:
            pairs[(d.host, d.pair)].append(d)
    units = []
    for (host, pair), members in pairs.items():
        if len(members) == 2:
            members.sort(key=lambda d: d.index)
            units.append(Unit((members[0].id, members[1].id), host, members[0].index, pair))
    units.sort(key=lambda u: (str(u.host), u.index))
    return units


def units_from_rows(rows: Iterable[tuple[int, Hashable, int, int | None]], cards_per_unit: int) -> list[Unit]:
    """``units_from_devices`` of ``(id, host, index, pair)`` tuples, as the database reads devices: the same
    units, without a ``Device`` value for each card first (at fleet scale a read turns thousands of rows)."""
    if cards_per_unit == 1:
        return [Unit((i,), host, index, pair) for i, host, index, pair in sorted(rows, key=lambda r: (str(r[1]), r[2]))]
    return units_from_devices([Device(*row) for row in rows], cards_per_unit)


def host_counts(units: Sequence[Unit]) -> dict[Hashable, int]:
    counts: dict[Hashable, int] = defaultdict(int)
    for unit in units:
        counts[unit.host] += 1
    return dict(counts)
