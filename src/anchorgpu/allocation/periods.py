"""Half-open time periods ``[start, end)`` in timezone-aware UTC.

Pure domain code: no Django imports. Every booking, hold and maintenance
window in the shop is one of these.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


class PeriodError(ValueError):
    """A period that cannot exist (naive times, empty or reversed)."""


def require_aware(moment: datetime, what: str = "time") -> datetime:
    if moment.tzinfo is UTC:  # what the database gives: nothing to check or convert
        return moment
    if moment.tzinfo is None or moment.tzinfo.utcoffset(moment) is None:
        raise PeriodError(f"{what} must carry a time zone (UTC), got a naive datetime")
    return moment.astimezone(UTC)


@dataclass(frozen=True, order=True)
class Period:
    """``[start, end)``: contains ``start``, excludes ``end``."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", require_aware(self.start, "start"))
        object.__setattr__(self, "end", require_aware(self.end, "end"))
        if not self.start < self.end:
            raise PeriodError(f"a period must end after it starts ({self.start.isoformat()} .. {self.end.isoformat()})")

    @classmethod
    def of_days(cls, start: datetime, days: int) -> Period:
        return cls(start, start + timedelta(days=days))

    @property
    def duration(self) -> timedelta:
        return self.end - self.start

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end

    def overlaps(self, other: Period) -> bool:
        # Half-open: touching ends ([a, b) and [b, c)) do not overlap.
        return self.start < other.end and other.start < self.end

    def intersection(self, other: Period) -> Period | None:
        start, end = max(self.start, other.start), min(self.end, other.end)
        return Period(start, end) if start < end else None

    def minus(self, others: Iterable[Period]) -> list[Period]:
        """The parts of this period that none of ``others`` covers, in order."""
        pieces: list[Period] = []
        cursor = self.start
        for busy in merge(others):
            if busy.end <= cursor or not busy.overlaps(self):
                continue
            if busy.start > cursor:
                pieces.append(Period(cursor, busy.start))
            cursor = max(cursor, busy.end)
            if cursor >= self.end:
                break
        if cursor < self.end:
            pieces.append(Period(cursor, self.end))
        return pieces


def merge(periods: Iterable[Period]) -> list[Period]:
    """Sorted, with overlapping or touching periods joined."""
    merged: list[Period] = []
    for period in sorted(periods):
        if merged and period.start <= merged[-1].end:
            last = merged[-1]
            if period.end > last.end:
                merged[-1] = Period(last.start, period.end)
        else:
            merged.append(period)
    return merged


def free_starts(
    busy: Iterable[Period], length: timedelta, not_before: datetime
) -> Iterator[tuple[datetime, datetime | None]]:
    """Closed ranges ``[first, last]`` of start times at which a period of
    ``length`` fits between the busy periods, from ``not_before`` on.

    ``last`` is None for the open-ended range after the final busy period.
    A start ``t`` fits when ``[t, t + length)`` overlaps no busy period, so
    before a busy period that starts at ``s`` the last fitting start is
    ``s - length`` (the term may end exactly where the next one begins).
    """
    cursor = not_before
    for period in merge(busy):
        if period.end <= cursor:
            continue
        last = period.start - length
        if last >= cursor:
            yield cursor, last
        cursor = max(cursor, period.end)
    yield cursor, None
