"""Availability arithmetic over units: which are free for a period, and
the earliest start at which enough of them are free for a whole term.

Pure domain code, fed with busy periods per device by the selectors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from .periods import Period, free_starts
from .units import Unit


def unit_busy(unit: Unit, busy_by_device: Mapping[int, Sequence[Period]]) -> list[Period]:
    periods: list[Period] = []
    for device in unit.devices:
        periods.extend(busy_by_device.get(device, ()))
    return periods


def free_units(units: Iterable[Unit], busy_by_device: Mapping[int, Sequence[Period]], period: Period) -> list[Unit]:
    """Units none of whose devices is busy at any moment of ``period``."""
    return [
        unit for unit in units
        if not any(busy.overlaps(period) for busy in unit_busy(unit, busy_by_device))
    ]


def earliest_start(
    units: Sequence[Unit],
    busy_by_device: Mapping[int, Sequence[Period]],
    *,
    quantity: int,
    length: timedelta,
    not_before: datetime,
) -> datetime | None:
    """The first ``t >= not_before`` at which ``quantity`` units are each free
    for all of ``[t, t + length)``; None when the fleet has fewer units.

    A sweep over the ranges of fitting start times of every unit: +1 where a
    range opens, -1 just after it closes. Ranges are closed, so openings at
    an instant count before closings at the same instant. The answer is
    always the opening of some range, so it is checked only there.
    O(B log B) for B busy periods.
    """
    if quantity < 1:
        raise ValueError("quantity must be at least 1")
    if len(units) < quantity:
        return None
    events: list[tuple[datetime, int]] = []
    for unit in units:
        for first, last in free_starts(unit_busy(unit, busy_by_device), length, not_before):
            events.append((first, 0))  # 0 sorts before 1: open before close
            if last is not None:
                events.append((last, 1))
    events.sort()
    open_ranges = 0
    for moment, kind in events:
        if kind == 0:
            open_ranges += 1
            if open_ranges >= quantity:
                return moment
        else:
            open_ranges -= 1
    return None  # unreachable: every unit has an open-ended last range
