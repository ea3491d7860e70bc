"""Order states and the one table of transitions between them (DESIGN §5).

Pure domain code: no Django imports. Services ask ``check_transition``
before every state change and write an audit row for it; anything not in
the table is refused.
"""

from __future__ import annotations

from enum import Enum


class OrderState(str, Enum):
    AWAITING_PAYMENT = "awaiting_payment"
    PAYMENT_CLAIMED = "payment_claimed"  # the customer pressed "I've paid"
    PAID = "paid"
    PROVISIONING = "provisioning"
    ACTIVE = "active"
    COMPLETED = "completed"
    EXPIRED = "expired"  # the quote ran out with nothing (enough) received
    CANCELLED = "cancelled"
    UNDERPAID = "underpaid"  # confirmed transfers fall short of the quote
    PAID_LATE = "paid_late"  # enough arrived, but after the quote expired
    REFUNDED = "refunded"
    FAILED = "failed"  # access could not be prepared or was lost


S = OrderState

# from-state -> the states it may move to. Nothing else is allowed.
TRANSITIONS: dict[OrderState, frozenset[OrderState]] = {
    S.AWAITING_PAYMENT: frozenset({S.PAYMENT_CLAIMED, S.PAID, S.UNDERPAID, S.PAID_LATE, S.EXPIRED, S.CANCELLED}),
    # A claim the operator finds no transfer for goes back to waiting while the quote runs.
    S.PAYMENT_CLAIMED: frozenset({S.AWAITING_PAYMENT, S.PAID, S.UNDERPAID, S.PAID_LATE, S.EXPIRED}),
    # A top-up may complete an underpaid order, on time or late; else it is refunded.
    # Back to waiting when its only transfer is reassigned to the order it was meant for.
    S.UNDERPAID: frozenset({S.PAID, S.PAID_LATE, S.REFUNDED, S.EXPIRED, S.AWAITING_PAYMENT}),
    # A transfer seen after expiry makes the order late; capacity is re-checked before it is paid.
    S.EXPIRED: frozenset({S.PAID_LATE, S.UNDERPAID}),
    S.PAID_LATE: frozenset({S.PAID, S.REFUNDED, S.EXPIRED}),
    # Any settled order can be refunded whole by an operator: its access is wiped and its cards released with it.
    # An extension, once paid, is added to the order it extends at once (``orders.extensions``): completed.
    S.PAID: frozenset({S.PROVISIONING, S.REFUNDED, S.COMPLETED}),
    S.PROVISIONING: frozenset({S.ACTIVE, S.FAILED, S.REFUNDED}),
    # Back to preparing access when the term is moved to other cards (``orders.moves``).
    S.ACTIVE: frozenset({S.COMPLETED, S.FAILED, S.REFUNDED, S.PROVISIONING}),
    S.FAILED: frozenset({S.PROVISIONING, S.REFUNDED}),
    S.COMPLETED: frozenset(),
    S.CANCELLED: frozenset(),
    S.REFUNDED: frozenset(),
}

FINAL = frozenset(state for state, targets in TRANSITIONS.items() if not targets)
# States whose order still holds (or may still get) cards for its term.
HOLDS_CAPACITY = frozenset({S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED, S.UNDERPAID, S.PAID, S.PROVISIONING, S.ACTIVE})
# States in which the order must have a live, confirmed booking of its own: checked by the database itself
# (orders migration 0008) and scanned by ``anchorgpu.orders.invariants``.
NEEDS_CONFIRMED_BOOKING = frozenset({S.PAID, S.PROVISIONING, S.ACTIVE})
# States whose order counts on its booking: only an order service may release that booking, with the order's
# own change (a failed order may still be retried on its cards).
KEEPS_ITS_BOOKING = HOLDS_CAPACITY | {S.FAILED}
# States the operator's payment queue shows, oldest first.
NEEDS_OPERATOR = frozenset({S.PAYMENT_CLAIMED, S.UNDERPAID, S.PAID_LATE})


class TransitionRefused(ValueError):
    def __init__(self, current: OrderState | str, target: OrderState | str):
        current, target = OrderState(current), OrderState(target)
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[current])) or "none (final state)"
        super().__init__(f"An order in state “{current.value}” cannot move to “{target.value}”; "
                         f"allowed: {allowed}.")
        self.current, self.target = current, target


def can_transition(current: OrderState | str, target: OrderState | str) -> bool:
    return OrderState(target) in TRANSITIONS[OrderState(current)]


def check_transition(current: OrderState | str, target: OrderState | str) -> OrderState:
    if not can_transition(current, target):
        raise TransitionRefused(current, target)
    return OrderState(target)
