"""Payment evaluation from transfers: pure, the same for manual and watched transfers."""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorgpu.orders.states import OrderState
from anchorgpu.payments.evaluation import EvaluationError, PaymentStatus, Terms, Transfer, evaluate

EXPIRES = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
BEFORE, AFTER = EXPIRES - timedelta(minutes=10), EXPIRES + timedelta(minutes=10)
TERMS = Terms(amount=1_000_000, tolerance=1_000, confirmations_required=3, expires_at=EXPIRES)
_n = iter(range(10**6))


def tx(amount, confirmations=3, seen_at=BEFORE):
    return Transfer(key=("eth", f"0x{next(_n):064x}", 0), amount=amount, confirmations=confirmations, seen_at=seen_at)


@pytest.mark.parametrize("transfers, status, order_state", [
    ([], PaymentStatus.NOTHING, None),
    ([tx(1_000_000)], PaymentStatus.PAID, OrderState.PAID),
    ([tx(999_000)], PaymentStatus.PAID, OrderState.PAID),  # within the tolerance
    ([tx(998_999)], PaymentStatus.UNDERPAID, OrderState.UNDERPAID),  # one unit past it
    ([tx(600_000), tx(400_000)], PaymentStatus.PAID, OrderState.PAID),  # topped up
    ([tx(1_200_000)], PaymentStatus.OVERPAID, OrderState.PAID),
    ([tx(1_000_000, confirmations=2)], PaymentStatus.PENDING, None),
    ([tx(600_000), tx(400_000, confirmations=0)], PaymentStatus.PENDING, None),
    ([tx(300_000, confirmations=1)], PaymentStatus.PENDING, None),  # short, but nothing final yet
    ([tx(1_000_000, seen_at=AFTER)], PaymentStatus.LATE, OrderState.PAID_LATE),
    ([tx(500_000), tx(500_000, seen_at=AFTER)], PaymentStatus.LATE, OrderState.PAID_LATE),
    ([tx(1_000_000, seen_at=EXPIRES)], PaymentStatus.LATE, OrderState.PAID_LATE),  # expiry is exclusive
    ([tx(1_000_000), tx(5, seen_at=AFTER)], PaymentStatus.OVERPAID, OrderState.PAID),
])
def test_statuses(transfers, status, order_state):
    result = evaluate(TERMS, transfers)
    assert result.status is status
    assert result.order_state is order_state


def test_totals_shortfall_and_excess():
    result = evaluate(TERMS, [tx(700_000), tx(100_000, seen_at=AFTER), tx(50_000, confirmations=0)])
    assert (result.confirmed_total, result.on_time_total, result.unconfirmed_total) == (800_000, 700_000, 50_000)
    assert (result.shortfall, result.excess) == (200_000, 0)
    over = evaluate(TERMS, [tx(1_250_000)])
    assert (over.shortfall, over.excess) == (0, 250_000)


@pytest.mark.parametrize("terms, transfers, words", [
    (Terms(0, 0, 1, EXPIRES), [], "quoted amount"),
    (Terms(10, 10, 1, EXPIRES), [], "tolerance"),
    (Terms(10, -1, 1, EXPIRES), [], "tolerance"),
    (Terms(10, 0, -1, EXPIRES), [], "confirmations"),
    (Terms(10, 0, 1, datetime(2026, 1, 1)), [], "time zone"),
    (TERMS, [Transfer("k", 0, 1, BEFORE)], "positive"),
    (TERMS, [Transfer("k", 1.5, 1, BEFORE)], "whole number"),
    (TERMS, [Transfer("k", 5, -1, BEFORE)], "confirmations"),
    (TERMS, [Transfer("k", 5, 1, BEFORE), Transfer("k", 5, 1, BEFORE)], "listed twice"),
])
def test_inconsistent_input_is_refused(terms, transfers, words):
    with pytest.raises((EvaluationError, ValueError)) as caught:
        evaluate(terms, transfers)
    assert words in str(caught.value)


amounts = st.lists(st.tuples(st.integers(1, 2_000_000), st.integers(0, 6), st.booleans()), max_size=6)


@settings(derandomize=True, database=None, max_examples=300)
@given(amounts)
def test_paid_exactly_when_confirmed_on_time_money_covers_the_quote(parts):
    transfers = [tx(a, c, BEFORE if on_time else AFTER) for a, c, on_time in parts]
    result = evaluate(TERMS, transfers)
    on_time = sum(a for a, c, t in parts if c >= 3 and t)
    confirmed = sum(a for a, c, _t in parts if c >= 3)
    assert (result.status in {PaymentStatus.PAID, PaymentStatus.OVERPAID}) == (on_time >= 999_000)
    assert result.confirmed_total == confirmed
    assert result.shortfall - result.excess == TERMS.amount - confirmed
    # Order does not matter.
    assert evaluate(TERMS, list(reversed(transfers))) == result
