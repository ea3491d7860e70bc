"""The order rules as plain functions: no database."""

from datetime import datetime, timedelta, timezone

import pytest

from anchorgpu.orders import rules
from anchorgpu.orders.states import TRANSITIONS, OrderState

S = OrderState
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc)


def test_amount_due_asks_the_whole_quote_until_underpaid():
    assert rules.amount_due(S.AWAITING_PAYMENT, quoted=1000, confirmed=0) == 1000
    # A claimed order with a pending part still asks the quote: nothing is confirmed as short yet.
    assert rules.amount_due(S.PAYMENT_CLAIMED, quoted=1000, confirmed=400) == 1000


def test_amount_due_of_an_underpaid_order_is_what_is_missing():
    assert rules.amount_due("underpaid", quoted=1000, confirmed=400) == 600
    assert rules.amount_due(S.UNDERPAID, quoted=1000, confirmed=999) == 1
    # Covered (e.g. a top-up not yet applied): the request falls back to the quote, as the page always did.
    assert rules.amount_due(S.UNDERPAID, quoted=1000, confirmed=1000) == 1000


@pytest.mark.parametrize("state", sorted(set(S) - rules.PAYABLE, key=lambda s: s.value))
def test_nothing_is_due_outside_the_payable_states(state):
    assert rules.amount_due(state, quoted=1000, confirmed=0) == 0
    assert not rules.may_pay(state)


@pytest.mark.parametrize("quoted,confirmed", [(0, 0), (-5, 0), (10, -1), (10.0, 0), (10, 1.5)])
def test_amount_due_refuses_nonsense(quoted, confirmed):
    with pytest.raises(ValueError):
        rules.amount_due(S.AWAITING_PAYMENT, quoted=quoted, confirmed=confirmed)


def test_only_an_order_awaiting_payment_may_be_cancelled():
    assert [s for s in S if rules.may_cancel(s, transfer_recorded=False)] == [S.AWAITING_PAYMENT]
    assert rules.cancel_refusal(S.AWAITING_PAYMENT, transfer_recorded=True) == rules.CANCEL_TRANSFER_RECORDED
    assert rules.cancel_refusal(S.PAYMENT_CLAIMED, transfer_recorded=False) == rules.CANCEL_WRONG_STATE
    for state in rules.CANCELLABLE:  # the transition table agrees
        assert S.CANCELLED in TRANSITIONS[state]


def test_claim_needs_a_running_quote_and_an_order_awaiting_payment():
    running, over = NOW + timedelta(minutes=5), NOW
    assert rules.may_claim(S.AWAITING_PAYMENT, expires_at=running, now=NOW)
    assert rules.claim_refusal(S.AWAITING_PAYMENT, expires_at=over, now=NOW) == rules.CLAIM_QUOTE_EXPIRED
    assert rules.claim_refusal(S.PAID, expires_at=running, now=NOW) == rules.CLAIM_WRONG_STATE
    # A second press without a hash is refused; adding the hash to the standing claim is not, even late.
    assert rules.claim_refusal(S.PAYMENT_CLAIMED, expires_at=running, now=NOW) == rules.CLAIM_WRONG_STATE
    assert rules.claim_refusal(S.PAYMENT_CLAIMED, expires_at=over, now=NOW, adds_txid=True) is None
    assert rules.claim_refusal(S.UNDERPAID, expires_at=running, now=NOW, adds_txid=True) == rules.CLAIM_WRONG_STATE


def test_mark_paid_needs_a_waiting_state_money_and_no_refund():
    assert rules.may_mark_paid(S.UNDERPAID, received=10, refunded=False)
    assert rules.mark_paid_refusal(S.PAID, received=10, refunded=False) == rules.MARK_PAID_WRONG_STATE
    assert rules.mark_paid_refusal(S.EXPIRED, received=0, refunded=False) == rules.MARK_PAID_NOTHING_RECEIVED
    assert rules.mark_paid_refusal(S.PAID_LATE, received=10, refunded=True) == rules.MARK_PAID_REFUNDED
    for state in rules.MARK_PAID_STATES:  # each may reach PAID, directly or through PAID_LATE
        assert S.PAID in TRANSITIONS[state] or S.PAID_LATE in TRANSITIONS[state]


def test_refund_scope_follows_the_state():
    for state in S:
        assert rules.may_refund(state) == (S.REFUNDED in TRANSITIONS[state])
    assert rules.may_refund(S.COMPLETED, whole_order=False)  # part of its price: it keeps the payment
    assert not rules.may_refund(S.COMPLETED)
    assert not rules.may_refund(S.UNDERPAID, whole_order=False)


def test_refund_address_is_asked_wherever_money_could_go_back():
    assert rules.wants_refund_address(S.ACTIVE, refund_due=False, received=0)
    assert rules.wants_refund_address(S.COMPLETED, refund_due=True, received=0)
    assert not rules.wants_refund_address(S.EXPIRED, refund_due=False, received=0)
    assert rules.wants_refund_address(S.EXPIRED, refund_due=False, received=1)
    assert not rules.wants_refund_address(S.AWAITING_PAYMENT, refund_due=False, received=5)
    assert not rules.wants_refund_address(S.COMPLETED, refund_due=False, received=5)


def test_the_rules_import_without_django():
    import subprocess
    import sys

    code = ("import sys\nimport anchorgpu.orders.rules\n"
            "print(','.join(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
