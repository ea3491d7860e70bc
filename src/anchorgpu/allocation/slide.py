"""Where an as-soon-as-possible term lies inside the cards held for it.

Pure domain code: no Django imports.

A customer who orders "as soon as possible" pays for the whole term from the moment access is ready, not
from the moment the order was placed: the minutes spent waiting for confirmations (or for an operator to
check a Bitcoin transfer) are not theirs to lose. So the cards are held for more than the term: from the
earliest start found for it to as far after the term as they are free, up to the longest the payment and
the preparation of access may take (its *reach*). The term then slides inside that held period:

* when the payment is confirmed, it is placed provisionally from that moment;
* when access is ready, it is fixed from that moment, and the cards after its end are let go.

A term never starts before the held period does, and it is never shorter than bought: when the cards are
not free long enough after the moment it should start, it starts as late as the held period allows and the
difference is reported (``Slid.short_by``) for the customer and the operator to see.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .periods import Period


@dataclass(frozen=True)
class Slid:
    """A term placed inside the period held for it."""

    term: Period
    # How much later than the term's start access was ready (zero when the term slid all the way).
    short_by: timedelta

    @property
    def complete(self) -> bool:
        return self.short_by == timedelta(0)


def reach(*, quote_minutes: int, claim_grace_minutes: int, access_minutes: int) -> timedelta:
    """How far past the term an as-soon-as-possible order holds its cards when it is placed: the quote's
    lifetime, the grace after "I've paid", and the time access preparation is allowed."""
    minutes = [quote_minutes, claim_grace_minutes, access_minutes]
    if any(m < 0 for m in minutes):
        raise ValueError("the windows of a reach cannot be negative")
    return timedelta(minutes=sum(minutes))


def wanted_end(*, held: Period, length: timedelta, at: datetime, allowance: timedelta) -> datetime:
    """The end the held period needs for a term that starts at ``at`` (or at the held start, if later),
    with ``allowance`` left after it for access preparation still to come."""
    return max(at, held.start) + length + allowance


def slide(*, held: Period, length: timedelta, at: datetime) -> Slid:
    """The term of ``length`` that starts at ``at``, as far as ``held`` allows: never before the held start,
    never past the held end."""
    if length <= timedelta(0):
        raise ValueError("a term has a length")
    if held.duration < length:
        raise ValueError(f"the held period ({held.duration}) is shorter than the term ({length})")
    start = min(max(at, held.start), held.end - length)
    return Slid(term=Period(start, start + length), short_by=max(timedelta(0), at - start))
