"""The service credit rule: time the customer lost through the shop's fault, turned into money. Pure (no Django).

The rule, as the terms page and the guides publish it (their numbers come from the constants below):

* **What counts as lost.** (a) A host fault: from the moment the fault started (as the operator recorded it)
  until it is cleared, the term is moved to other cards, or the term ends. (b) A move to other cards: from the
  move until access works again on the new cards. (c) Late access: access not delivered within
  ``LATE_ACCESS_GRACE`` of the term's start; the time from the end of that grace until access was delivered.
  Overlapping causes are counted once: the intervals are joined, and no second is credited twice.
* **What it is worth.** Each paid part of the term (the term itself, and each extension) is credited
  ``MULTIPLIER`` times its price × lost time / its length, to the microsecond, and never more than its own price.
* **Rounding.** Exact fractions throughout; each paid part's credit is rounded once, half up, to the
  currency's minor unit (cents), because each goes on its own credit note against that part's invoice.
* **Never twice.** What the rule credited before is taken off, and no credit note takes an invoice below zero
  (what was refunded or credited already is not credited again).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

from anchorgpu.catalog.pricing import minor_unit

LATE_ACCESS_GRACE = timedelta(minutes=15)
MULTIPLIER = 2  # each lost hour is credited at twice its price, up to the price of the paid part

FAULT = "fault"
MOVE = "move"
LATE_ACCESS = "late_access"
CAUSES = (FAULT, MOVE, LATE_ACCESS)

_US = timedelta(microseconds=1)


@dataclass(frozen=True)
class Segment:
    """A paid part of the term: half-open [start, end), paid by ``amount`` (fiat, VAT inside); ``key`` names its
    invoice for the caller."""
    start: datetime
    end: datetime
    amount: Decimal
    key: Any = None


@dataclass(frozen=True)
class Lost:
    """Time lost through the shop's fault, half-open [start, end)."""
    start: datetime
    end: datetime
    cause: str = FAULT


@dataclass(frozen=True)
class SegmentCredit:
    segment: Segment
    lost: timedelta  # lost time inside this segment (the union, clipped)
    exact: Fraction  # the unrounded credit, capped at the segment's amount
    amount: Decimal  # rounded once, half up


@dataclass(frozen=True)
class Credit:
    intervals: tuple[tuple[datetime, datetime], ...]  # the joined lost intervals
    parts: tuple[SegmentCredit, ...]

    @property
    def total(self) -> Decimal:
        return sum((p.amount for p in self.parts), Decimal(0))

    @property
    def lost(self) -> timedelta:
        return sum((p.lost for p in self.parts), timedelta(0))


def late_access(term_start: datetime, delivered_at: datetime | None, *, now: datetime) -> Lost | None:
    """The late-access interval: from the end of the grace until access was delivered (or ``now`` while it is
    still not delivered); None when access came within the grace."""
    begin = term_start + LATE_ACCESS_GRACE
    end = delivered_at if delivered_at is not None else now
    return Lost(begin, end, LATE_ACCESS) if end > begin else None


def join(intervals: Iterable[Lost | tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """The union of half-open intervals, sorted; touching intervals are joined, empty ones dropped."""
    pairs = sorted((i.start, i.end) if isinstance(i, Lost) else (i[0], i[1]) for i in intervals)
    joined: list[list[datetime]] = []
    for start, end in pairs:
        if end <= start:
            continue
        if joined and start <= joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], end)
        else:
            joined.append([start, end])
    return [(s, e) for s, e in joined]


def round_half_up(value: Fraction, currency: str) -> Decimal:
    """``value`` (not negative) rounded half up to the currency's minor unit, as a Decimal."""
    unit = minor_unit(currency)
    steps = Fraction(unit)
    count = (value / steps + Fraction(1, 2)).__floor__()
    return (Decimal(count) * unit).quantize(unit)


def _micro(delta: timedelta) -> int:
    return delta // _US


def credit(segments: Iterable[Segment], lost: Iterable[Lost], *, currency: str) -> Credit:
    """What the rule gives for ``lost`` over the paid ``segments`` (all of it, before what was credited already)."""
    intervals = join(lost)
    parts = []
    for seg in segments:
        length = _micro(seg.end - seg.start)
        inside = sum((_micro(min(e, seg.end) - max(s, seg.start)) for s, e in intervals
                      if s < seg.end and e > seg.start), 0)
        if length <= 0:
            exact = Fraction(0)
        else:
            exact = min(Fraction(seg.amount) * MULTIPLIER * inside / length, Fraction(seg.amount))
        parts.append(SegmentCredit(seg, timedelta(microseconds=inside), exact, round_half_up(exact, currency)))
    return Credit(tuple(intervals), tuple(parts))


def due(owed: Decimal, *, credited: Decimal, open_amount: Decimal) -> Decimal:
    """What to credit now: what the rule owes less what it credited before, never more than the invoice still
    holds (its total less every credit note on it), never below zero."""
    return max(Decimal(0), min(owed - credited, open_amount))


def published() -> Mapping[str, Any]:
    """The rule's numbers for the terms page and the guides."""
    return {"grace_minutes": int(LATE_ACCESS_GRACE.total_seconds() // 60), "multiplier": MULTIPLIER}
