"""The order state table: the happy path, the side exits, and refusals."""

import pytest

from anchorgpu.orders.states import (
    FINAL,
    NEEDS_OPERATOR,
    TRANSITIONS,
    OrderState,
    TransitionRefused,
    can_transition,
    check_transition,
)

S = OrderState
HAPPY_PATH = [S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED, S.PAID, S.PROVISIONING, S.ACTIVE, S.COMPLETED]


def test_every_state_has_a_row_and_targets_are_states():
    assert set(TRANSITIONS) == set(OrderState)
    for targets in TRANSITIONS.values():
        assert targets <= set(OrderState)


def test_the_happy_path_is_allowed_step_by_step():
    for current, target in zip(HAPPY_PATH, HAPPY_PATH[1:], strict=False):
        assert check_transition(current, target) is target


@pytest.mark.parametrize("current, target", [
    (S.AWAITING_PAYMENT, S.EXPIRED), (S.AWAITING_PAYMENT, S.CANCELLED), (S.PAYMENT_CLAIMED, S.UNDERPAID),
    (S.UNDERPAID, S.PAID), (S.EXPIRED, S.PAID_LATE), (S.PAID_LATE, S.PAID), (S.PAID_LATE, S.REFUNDED),
    (S.PROVISIONING, S.FAILED), (S.FAILED, S.PROVISIONING), (S.PAYMENT_CLAIMED, S.AWAITING_PAYMENT),
])
def test_side_exits(current, target):
    assert can_transition(current, target)


@pytest.mark.parametrize("current, target", [
    (S.AWAITING_PAYMENT, S.ACTIVE),  # no access without payment
    (S.EXPIRED, S.PAID),  # a late payment re-checks capacity first (via paid_late)
    (S.PAID, S.CANCELLED),  # a paid order is refunded, not silently cancelled
    (S.COMPLETED, S.REFUNDED), (S.CANCELLED, S.AWAITING_PAYMENT), (S.ACTIVE, S.PAID), (S.PAID, S.PAID),
])
def test_anything_else_is_refused_with_the_allowed_moves(current, target):
    assert not can_transition(current, target)
    with pytest.raises(TransitionRefused) as caught:
        check_transition(current, target)
    message = str(caught.value)
    assert current.value in message and target.value in message and "allowed" in message


def test_final_states_and_operator_queue():
    assert FINAL == {S.COMPLETED, S.CANCELLED, S.REFUNDED}
    assert NEEDS_OPERATOR == {S.PAYMENT_CLAIMED, S.UNDERPAID, S.PAID_LATE}
    with pytest.raises(ValueError):
        check_transition("awaiting_payment", "teleported")


def test_every_state_is_reachable_from_awaiting_payment():
    seen, frontier = {S.AWAITING_PAYMENT}, [S.AWAITING_PAYMENT]
    while frontier:
        for target in TRANSITIONS[frontier.pop()]:
            if target not in seen:
                seen.add(target)
                frontier.append(target)
    assert seen == set(OrderState)
