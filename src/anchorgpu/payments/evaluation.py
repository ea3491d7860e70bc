"""What the transfers received for one order add up to (DESIGN §5).

Pure domain code. The same function judges transfers an operator records
by hand and transfers a chain watcher finds, so paid, underpaid, overpaid
and late mean the same whichever way a transfer arrived. Amounts are
integers in the asset's base units (satoshi, wei, a token's smallest unit).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from anchorgpu.allocation.periods import require_aware
from anchorgpu.orders.states import OrderState


class PaymentStatus(str, Enum):
    NOTHING = "nothing"  # no transfer seen
    PENDING = "pending"  # enough would arrive, but not all of it has its confirmations yet
    UNDERPAID = "underpaid"  # even counting unconfirmed transfers, short of the quote
    PAID = "paid"  # on time, within the tolerance
    OVERPAID = "overpaid"  # on time, more than quoted: the excess is noted for a refund or credit
    LATE = "late"  # enough, but only counting transfers first seen after the quote expired


class EvaluationError(ValueError):
    """Inconsistent input: a bug or corrupt data, never a customer's mistake."""


@dataclass(frozen=True)
class Terms:
    amount: int  # quoted, base units
    tolerance: int  # how far short the operator still accepts as paid, base units
    confirmations_required: int
    expires_at: datetime


@dataclass(frozen=True)
class Transfer:
    key: Hashable  # (chain, transaction id, output or log index): unique
    amount: int
    confirmations: int
    seen_at: datetime  # when it first appeared (block time, or first sight in the mempool)


@dataclass(frozen=True)
class Evaluation:
    status: PaymentStatus
    confirmed_total: int
    on_time_total: int  # confirmed and first seen before the quote expired
    unconfirmed_total: int
    shortfall: int  # how much is still missing to the quoted amount (0 when covered)
    excess: int  # how much confirmed money exceeds the quoted amount

    @property
    def order_state(self) -> OrderState | None:
        """The state the order should move to, or None for no change."""
        return _ORDER_STATE.get(self.status)


_ORDER_STATE = {
    PaymentStatus.PAID: OrderState.PAID,
    PaymentStatus.OVERPAID: OrderState.PAID,
    PaymentStatus.LATE: OrderState.PAID_LATE,
    PaymentStatus.UNDERPAID: OrderState.UNDERPAID,
}


def _check(terms: Terms, transfers: Sequence[Transfer]) -> None:
    if not isinstance(terms.amount, int) or terms.amount <= 0:
        raise EvaluationError("the quoted amount must be a positive whole number of base units")
    if not isinstance(terms.tolerance, int) or not 0 <= terms.tolerance < terms.amount:
        raise EvaluationError("the tolerance must be whole base units, at least 0 and below the quoted amount")
    if terms.confirmations_required < 0:
        raise EvaluationError("required confirmations cannot be negative")
    require_aware(terms.expires_at, "expires_at")
    keys = set()
    for t in transfers:
        if not isinstance(t.amount, int) or t.amount <= 0:
            raise EvaluationError(f"transfer {t.key!r}: the amount must be a positive whole number of base units")
        if t.confirmations < 0:
            raise EvaluationError(f"transfer {t.key!r}: confirmations cannot be negative")
        require_aware(t.seen_at, "seen_at")
        if t.key in keys:
            raise EvaluationError(f"transfer {t.key!r} is listed twice; one transfer credits one order once")
        keys.add(t.key)


def evaluate(terms: Terms, transfers: Sequence[Transfer]) -> Evaluation:
    _check(terms, transfers)
    confirmed = [t for t in transfers if t.confirmations >= terms.confirmations_required]
    confirmed_total = sum(t.amount for t in confirmed)
    on_time_total = sum(t.amount for t in confirmed if t.seen_at < terms.expires_at)
    unconfirmed_total = sum(t.amount for t in transfers) - confirmed_total
    needed = terms.amount - terms.tolerance
    if on_time_total >= needed:
        status = PaymentStatus.OVERPAID if confirmed_total > terms.amount else PaymentStatus.PAID
    elif confirmed_total >= needed:
        status = PaymentStatus.LATE
    elif confirmed_total + unconfirmed_total >= needed:
        status = PaymentStatus.PENDING
    elif transfers:
        status = PaymentStatus.UNDERPAID if confirmed_total else PaymentStatus.PENDING
    else:
        status = PaymentStatus.NOTHING
    return Evaluation(status=status, confirmed_total=confirmed_total, on_time_total=on_time_total,
                      unconfirmed_total=unconfirmed_total, shortfall=max(0, terms.amount - confirmed_total),
                      excess=max(0, confirmed_total - terms.amount))
