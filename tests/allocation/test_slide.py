"""Where an as-soon-as-possible term goes inside the cards held for it: the pure rule."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from anchorgpu.allocation.periods import Period
from anchorgpu.allocation.slide import reach, slide, wanted_end

T0 = datetime(2026, 12, 2, 18, 51, tzinfo=timezone.utc)
DAY, MINUTE = timedelta(days=1), timedelta(minutes=1)


def test_the_reach_is_the_payment_window_the_grace_and_the_preparation():
    assert reach(quote_minutes=60, claim_grace_minutes=60, access_minutes=30) == timedelta(minutes=150)
    with pytest.raises(ValueError):
        reach(quote_minutes=60, claim_grace_minutes=-1, access_minutes=30)


def test_a_term_slides_to_the_moment_access_is_ready():
    held = Period(T0, T0 + 7 * DAY + 150 * MINUTE)
    placed = slide(held=held, length=7 * DAY, at=T0 + 19 * MINUTE)  # ordered at 18:51, ready at 19:10
    assert placed.term == Period(T0 + 19 * MINUTE, T0 + 7 * DAY + 19 * MINUTE)
    assert placed.complete and placed.short_by == timedelta(0)


def test_a_term_never_starts_before_the_cards_are_held():
    held = Period(T0, T0 + 3 * DAY + 30 * MINUTE)
    placed = slide(held=held, length=3 * DAY, at=T0 - 5 * MINUTE)
    assert placed.term.start == T0 and placed.complete


def test_a_term_that_cannot_slide_far_enough_keeps_its_length_and_says_by_how_much():
    held = Period(T0, T0 + 3 * DAY + 10 * MINUTE)  # someone else's booking starts 10 minutes after the term
    placed = slide(held=held, length=3 * DAY, at=T0 + 40 * MINUTE)
    assert placed.term == Period(T0 + 10 * MINUTE, held.end)
    assert placed.term.duration == 3 * DAY
    assert placed.short_by == 30 * MINUTE and not placed.complete


def test_the_end_a_term_needs_keeps_room_for_what_is_still_to_come():
    held = Period(T0, T0 + 3 * DAY)
    assert wanted_end(held=held, length=3 * DAY, at=T0 + 2 * MINUTE, allowance=30 * MINUTE) == \
        T0 + 3 * DAY + 32 * MINUTE
    assert wanted_end(held=held, length=3 * DAY, at=T0 - DAY, allowance=timedelta(0)) == T0 + 3 * DAY


def test_a_held_period_shorter_than_the_term_is_refused():
    with pytest.raises(ValueError):
        slide(held=Period(T0, T0 + DAY), length=3 * DAY, at=T0)
    with pytest.raises(ValueError):
        slide(held=Period(T0, T0 + DAY), length=timedelta(0), at=T0)
