"""What may be done with an order as it stands, and what it still asks to be paid (DESIGN §5).

Pure domain code: no Django imports. The transition table (``states``) says which state may follow which;
these predicates add what the table cannot see (a quote still running, money received, a refund already
made). Services refuse with them, and the order page, the API and the operator's panels ask them before
offering a button, so a button is shown exactly when the service would accept it.

Amounts are integers in the asset's base units; times are aware datetimes.
"""

from __future__ import annotations

from datetime import datetime

from .states import OrderState

S = OrderState

# States in which the customer is asked to send money (the payment part of the order page, the payment URI).
PAYABLE = frozenset({S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED, S.UNDERPAID})
# The customer may cancel only before anything was claimed or received.
CANCELLABLE = frozenset({S.AWAITING_PAYMENT})
# States in which an operator may accept the payment as it stands.
MARK_PAID_STATES = frozenset({S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED, S.UNDERPAID, S.PAID_LATE, S.EXPIRED})
# States a whole order may be refunded from (the transition table agrees: each has REFUNDED among its targets).
REFUNDABLE = frozenset({S.UNDERPAID, S.PAID_LATE, S.PAID, S.PROVISIONING, S.ACTIVE, S.FAILED})
# States in which the order keeps (up to) the quoted amount; in the waiting states money received is a
# partial payment, not yet owed back.
KEEPS_PAYMENT = frozenset({S.PAID, S.PROVISIONING, S.ACTIVE, S.COMPLETED, S.FAILED})
# States still waiting for (enough) money: a transfer arriving may still settle the order.
WAITING_FOR_MONEY = frozenset({S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED, S.UNDERPAID, S.EXPIRED})
# States in which money already received may have to go back, so the customer is asked for a refund address.
_REFUND_IF_RECEIVED = frozenset({S.UNDERPAID, S.PAID_LATE, S.EXPIRED})
_SETTLED_REFUNDABLE = frozenset({S.PAID, S.PROVISIONING, S.ACTIVE, S.FAILED})
# States whose page shows the access section (prepared, ready, or over).
SHOWS_ACCESS = frozenset({S.PROVISIONING, S.ACTIVE, S.COMPLETED})


def _state(state: OrderState | str) -> OrderState:
    return OrderState(state)


def may_pay(state: OrderState | str) -> bool:
    """Whether the customer is asked to send money now."""
    return _state(state) in PAYABLE


# Why a cancellation is refused: the state, or money already on its way to the order.
CANCEL_WRONG_STATE = "state"
CANCEL_TRANSFER_RECORDED = "transfer"


def cancel_refusal(state: OrderState | str, *, transfer_recorded: bool) -> str | None:
    """Why the order may not be cancelled (a CANCEL_ code), or None when it may: only before payment, and
    only while no transfer (confirmed or not) is recorded for it (that one is refunded instead)."""
    if _state(state) not in CANCELLABLE:
        return CANCEL_WRONG_STATE
    if transfer_recorded:
        return CANCEL_TRANSFER_RECORDED
    return None


def may_cancel(state: OrderState | str, *, transfer_recorded: bool) -> bool:
    """Whether the customer may cancel the order (and release its cards)."""
    return cancel_refusal(state, transfer_recorded=transfer_recorded) is None


# Why "I've paid" is refused: the state does not take a claim, or the quote's time is over.
CLAIM_WRONG_STATE = "state"
CLAIM_QUOTE_EXPIRED = "expired"


def claim_refusal(state: OrderState | str, *, expires_at: datetime, now: datetime,
                  adds_txid: bool = False) -> str | None:
    """Why a press of "I've paid" is refused (one of the CLAIM_ codes), or None when it is taken. A claim
    that stands may still be given its transaction id (``adds_txid``), even after the quote ran out."""
    state = _state(state)
    if state is S.PAYMENT_CLAIMED and adds_txid:
        return None
    if state is not S.AWAITING_PAYMENT:
        return CLAIM_WRONG_STATE
    if expires_at <= now:
        return CLAIM_QUOTE_EXPIRED
    return None


def may_claim(state: OrderState | str, *, expires_at: datetime, now: datetime) -> bool:
    """Whether the customer may press "I've paid" (a new claim, not a hash added to one)."""
    return claim_refusal(state, expires_at=expires_at, now=now) is None


def may_correct_claim(state: OrderState | str) -> bool:
    """Whether a standing claim may still be given (another) transaction id."""
    return _state(state) is S.PAYMENT_CLAIMED


# Why an operator's "mark paid" is refused.
MARK_PAID_WRONG_STATE = "state"
MARK_PAID_NOTHING_RECEIVED = "nothing_received"
MARK_PAID_REFUNDED = "refunded"


def mark_paid_refusal(state: OrderState | str, *, received: int, refunded: bool) -> str | None:
    """Why an operator may not accept the payment as it stands (a MARK_PAID_ code), or None when they may:
    the order waits for money, some confirmed money arrived, and none of it was given back."""
    if _state(state) not in MARK_PAID_STATES:
        return MARK_PAID_WRONG_STATE
    if received <= 0:
        return MARK_PAID_NOTHING_RECEIVED
    if refunded:
        return MARK_PAID_REFUNDED
    return None


def may_mark_paid(state: OrderState | str, *, received: int, refunded: bool) -> bool:
    return mark_paid_refusal(state, received=received, refunded=refunded) is None


def may_mark_invalid(state: OrderState | str) -> bool:
    """Whether an operator may declare the customer's claim unfounded."""
    return _state(state) is S.PAYMENT_CLAIMED


def may_refund(state: OrderState | str, *, whole_order: bool = True) -> bool:
    """Whether the order may be refunded as a whole (``whole_order``), or in part: a part of the price only
    while the order keeps its payment. Money received beyond what the order keeps is handled by
    ``payments.refunds`` (its amount checks), whatever the state."""
    state = _state(state)
    return state in REFUNDABLE if whole_order else state in KEEPS_PAYMENT


def keeps_payment(state: OrderState | str) -> bool:
    return _state(state) in KEEPS_PAYMENT


def waits_for_money(state: OrderState | str) -> bool:
    return _state(state) in WAITING_FOR_MONEY


def amount_due(state: OrderState | str, *, quoted: int, confirmed: int) -> int:
    """Base units the customer is asked to send now: the quoted amount while nothing (confirmed) counts yet,
    only what is missing once the order is underpaid, nothing outside the payable states.

    The operator's tolerance decides whether a short payment counts as paid (``payments.evaluation``); it
    is not taken off what is asked: an underpaid order asks for all that is missing to the quote."""
    if not isinstance(quoted, int) or quoted <= 0:
        raise ValueError("the quoted amount is a positive whole number of base units")
    if not isinstance(confirmed, int) or confirmed < 0:
        raise ValueError("the confirmed sum is a whole number of base units, at least 0")
    state = _state(state)
    if state not in PAYABLE:
        return 0
    if state is S.UNDERPAID and 0 < quoted - confirmed:
        return quoted - confirmed
    return quoted


def wants_refund_address(state: OrderState | str, *, refund_due: bool, received: int) -> bool:
    """Whether the order page asks for a refund address: wherever money was received and could be given
    back. A settled order can be refunded at any time."""
    state = _state(state)
    return (refund_due or state in _SETTLED_REFUNDABLE
            or (state in _REFUND_IF_RECEIVED and received > 0))
