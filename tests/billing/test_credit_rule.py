"""The service credit rule on its own (no database): awkward fault times, exact to the cent.

Each expectation is computed here independently: seconds as Fractions, the multiplier and cap applied by hand,
rounded once, half up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from anchorgpu.billing import credit_rule as rule
from anchorgpu.billing.credit_rule import FAULT, LATE_ACCESS, MOVE, Lost, Segment

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
WEEK = timedelta(days=7)
PRICE = Decimal("1234.57")


def cents(value: Fraction) -> Decimal:
    """Half up to the cent, by hand: floor(x·100 + ½) / 100."""
    return Decimal(int((value * 100 + Fraction(1, 2)) // 1)) / 100


def expected(amount: Decimal, lost_seconds: Fraction, length_seconds: Fraction) -> Decimal:
    share = Fraction(amount) * 2 * lost_seconds / length_seconds
    return cents(min(share, Fraction(amount)))


def week() -> Segment:
    return Segment(T0, T0 + WEEK, PRICE, key="inv")


def one(lost, segments=None) -> Decimal:
    return rule.credit(segments or [week()], lost, currency="EUR").total


def seconds(delta: timedelta) -> Fraction:
    return Fraction(delta.days * 86400 + delta.seconds) + Fraction(delta.microseconds, 10**6)


def test_fault_starting_half_a_second_before_midnight():
    start = datetime(2026, 3, 3, 23, 59, 59, 500000, tzinfo=UTC)
    end = datetime(2026, 3, 4, 0, 0, 0, tzinfo=UTC)
    got = one([Lost(start, end)])
    assert got == expected(PRICE, Fraction(1, 2), seconds(WEEK))
    assert got == Decimal("0.00")  # 1234.57 × 2 × 0.5 / 604800 = 0.002…: rounds to nothing


def test_fault_spanning_utc_midnight():
    start = datetime(2026, 3, 3, 23, 17, 41, 250000, tzinfo=UTC)
    end = datetime(2026, 3, 4, 2, 3, 9, 750000, tzinfo=UTC)
    got = one([Lost(start, end)])
    assert got == expected(PRICE, seconds(end - start), seconds(WEEK)) == Decimal("40.53")
    # 2 h 45 min 28.5 s = 9928.5 s; 1234.57 × 2 × 9928.5 / 604800 = 40.5327…
    assert rule.credit([week()], [Lost(start, end)], currency="EUR").lost == end - start


def test_half_up_at_exactly_half_a_cent():
    seg = Segment(T0, T0 + timedelta(seconds=400), Decimal("1.00"))
    lost = [Lost(T0, T0 + timedelta(seconds=1))]  # 1.00 × 2 × 1 / 400 = 0.005 exactly: half up to 0.01
    assert rule.credit([seg], lost, currency="EUR").total == Decimal("0.01")


def test_fault_overlapping_late_access_counts_each_second_once():
    delivered = T0 + timedelta(hours=3)
    late = rule.late_access(T0, delivered, now=delivered)
    assert late == Lost(T0 + rule.LATE_ACCESS_GRACE, delivered, LATE_ACCESS)
    fault = Lost(T0 + timedelta(hours=2), T0 + timedelta(hours=5, seconds=1))
    got = one([late, fault])
    union = seconds(T0 + timedelta(hours=5, seconds=1) - (T0 + timedelta(minutes=15)))
    assert got == expected(PRICE, union, seconds(WEEK))


def test_two_overlapping_faults_and_a_move():
    a = Lost(T0 + timedelta(days=1), T0 + timedelta(days=1, hours=6))
    b = Lost(T0 + timedelta(days=1, hours=4), T0 + timedelta(days=1, hours=9, minutes=30))
    move = Lost(T0 + timedelta(days=1, hours=9, minutes=30), T0 + timedelta(days=1, hours=10), MOVE)
    credit = rule.credit([week()], [a, b, move], currency="EUR")
    assert credit.intervals == ((a.start, move.end),)  # touching intervals join
    assert credit.total == expected(PRICE, Fraction(10 * 3600), seconds(WEEK))


def test_fault_after_the_term_end_gives_nothing():
    fault = Lost(T0 + WEEK, T0 + WEEK + timedelta(hours=4))
    assert one([fault]) == Decimal("0.00")
    before = Lost(T0 - timedelta(hours=4), T0)
    assert one([before]) == Decimal("0.00")


def test_fault_covering_the_whole_term_credits_its_price_and_no_more():
    fault = Lost(T0 - timedelta(days=1), T0 + WEEK + timedelta(days=1))
    assert one([fault]) == PRICE


def test_the_multiplier_reaches_the_cap_at_half_the_term():
    half = Lost(T0, T0 + WEEK / 2)
    assert one([half]) == PRICE
    just_under = Lost(T0, T0 + WEEK / 2 - timedelta(microseconds=1))
    assert one([just_under]) == expected(PRICE, seconds(WEEK / 2 - timedelta(microseconds=1)), seconds(WEEK))
    assert one([just_under]) == PRICE  # 1234.5699999… rounds up to the price


def test_two_segments_each_credited_on_its_own_and_rounded_once():
    ext = Segment(T0 + WEEK, T0 + WEEK + timedelta(days=3), Decimal("529.10"), key="ext")
    fault = Lost(T0 + WEEK - timedelta(hours=1, minutes=7, seconds=13), T0 + WEEK + timedelta(minutes=41))
    credit = rule.credit([week(), ext], [fault], currency="EUR")
    first, second = credit.parts
    assert first.amount == expected(PRICE, Fraction(3600 + 7 * 60 + 13), seconds(WEEK))
    assert second.amount == expected(Decimal("529.10"), Fraction(41 * 60), Fraction(3 * 86400))
    assert credit.total == first.amount + second.amount
    assert (first.segment.key, second.segment.key) == ("inv", "ext")


def test_still_open_late_access_runs_until_now():
    now = T0 + timedelta(minutes=16)
    assert rule.late_access(T0, None, now=now) == Lost(T0 + timedelta(minutes=15), now, LATE_ACCESS)
    assert rule.late_access(T0, T0 + timedelta(minutes=15), now=now) is None


def test_due_takes_off_what_was_credited_and_never_goes_below_the_invoice():
    assert rule.due(Decimal("40.00"), credited=Decimal("0"), open_amount=Decimal("100")) == Decimal("40.00")
    assert rule.due(Decimal("40.00"), credited=Decimal("25.50"), open_amount=Decimal("100")) == Decimal("14.50")
    assert rule.due(Decimal("40.00"), credited=Decimal("40.00"), open_amount=Decimal("100")) == 0
    assert rule.due(Decimal("40.00"), credited=Decimal("0"), open_amount=Decimal("12.34")) == Decimal("12.34")
    assert rule.due(Decimal("40.00"), credited=Decimal("0"), open_amount=Decimal("0")) == 0


def test_a_currency_without_cents_rounds_to_whole_units():
    seg = Segment(T0, T0 + WEEK, Decimal("100000"))
    got = rule.credit([seg], [Lost(T0, T0 + timedelta(hours=1))], currency="JPY").total
    assert got == Decimal(int((Fraction(100000) * 2 * 3600 / 604800 + Fraction(1, 2)) // 1))


def test_causes_are_named():
    assert set(rule.CAUSES) == {FAULT, MOVE, LATE_ACCESS}
    assert rule.published() == {"grace_minutes": 15, "multiplier": 2}


def _covered(intervals, lo, hi) -> int:
    """Microseconds of [lo, hi) covered by any interval: an event sweep, written apart from the rule's join."""
    events = []
    for start, end in intervals:
        start, end = max(start, lo), min(end, hi)
        if end > start:
            events += [(start, 1), (end, -1)]
    events.sort(key=lambda e: (e[0], -e[1]))
    total, depth, since = 0, 0, None
    for moment, step in events:
        if depth == 0 and step == 1:
            since = moment
        depth += step
        if depth == 0:
            total += (moment - since) // timedelta(microseconds=1)
    return total


def test_random_terms_and_faults_agree_with_an_independent_sweep():
    import random

    rng = random.Random(25)
    seen = {"zero": 0, "some": 0, "capped": 0}
    for _ in range(300):
        start = T0 + timedelta(microseconds=rng.randrange(10**12))
        parts, at = [], start
        for _p in range(rng.randint(1, 3)):
            days = rng.choice((3, 7, 30))
            parts.append(Segment(at, at + timedelta(days=days), Decimal(rng.randrange(1, 10**7)) / 100))
            at += timedelta(days=days)
        lost = []
        for _f in range(rng.randint(0, 5)):
            a = start + timedelta(microseconds=rng.randrange(-10**11, (at - start) // timedelta(microseconds=1)))
            lost.append(Lost(a, a + timedelta(microseconds=rng.randrange(1, 3 * 10**11)),
                             rng.choice(rule.CAUSES)))
        got = rule.credit(parts, lost, currency="EUR")
        for seg, part in zip(parts, got.parts, strict=True):
            covered = _covered([(x.start, x.end) for x in lost], seg.start, seg.end)
            length = (seg.end - seg.start) // timedelta(microseconds=1)
            assert part.amount == cents(min(Fraction(seg.amount) * 2 * covered / length, Fraction(seg.amount)))
            seen["zero" if not part.amount else "capped" if part.amount == seg.amount else "some"] += 1
    assert min(seen.values()) >= 10, seen  # every kind of answer was checked
