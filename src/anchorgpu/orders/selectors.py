"""Reads of orders for the shop's pages and the API: one customer's own orders, and what the order page
shows about an order as it stands (``OrderPage``: the flags the template branches on, computed from the
order rules so the page offers exactly what the services accept)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from . import rules
from .models import Order
from .states import OrderState

S = OrderState


def order_for_customer(*, user, reference: str) -> Order | None:
    """The order ``reference`` if it belongs to ``user``, else None (the caller answers 404 either way: the
    shop does not confirm that another customer's reference exists)."""
    if not reference or len(reference) > 64 or user is None or not getattr(user, "is_authenticated", False):
        return None
    return (Order.objects.select_related("product", "environment", "quote__asset", "booking")
            .filter(reference=reference, user=user).first())


def orders_for_customer(*, user, limit: int = 200):
    """The customer's orders, newest first."""
    return (Order.objects.filter(user=user).select_related("product", "quote__asset")
            .order_by("-created_at")[:limit])


@dataclass(frozen=True)
class OrderPage:
    """What the live part of the order page shows, decided once from the order's state and its payment."""

    state: str
    payable: bool  # the payment section (address, QR, amount)
    underpaid: bool  # the payment asks only for what is missing
    units_due: int  # base units the payment request asks for now (0: none)
    claim_expired: bool  # claimed, and the quote's time ran out: checked, nothing more to send
    shows_next_steps: bool  # "what happens next" after a claim
    before_claim: bool  # ... worded for an order not yet claimed
    may_claim: bool  # the "I've paid" form
    claim_pending: bool  # "we are checking the transfer you told us about"
    may_correct_claim: bool  # the form to give (another) transaction id
    expired: bool  # the expired notice
    paid: bool  # the paid notice
    late_options: bool  # the choices for a late payment whose cards were gone
    shows_access: bool  # the access section
    access_ready: bool  # ... with the host, port and user
    wants_refund_address: bool
    may_cancel: bool


def order_page(order: Order, *, evaluation, claim_refused: bool, now: datetime,
               transfer_recorded: bool | None = None) -> OrderPage:
    """The page's flags for ``order``; ``evaluation`` is its payment evaluation (None without a quote),
    ``claim_refused`` whether the last hash check refuted the claimed transfer."""
    state = order.order_state
    quote = getattr(order, "quote", None)
    received = evaluation.confirmed_total if evaluation is not None else 0
    payable = quote is not None and rules.may_pay(state)
    units = rules.amount_due(state, quoted=quote.amount, confirmed=received) if payable else 0
    if transfer_recorded is None:
        transfer_recorded = state in rules.CANCELLABLE and order.transfers.exists()
    return OrderPage(
        state=state.value,
        payable=payable,
        underpaid=payable and state is S.UNDERPAID,
        units_due=units,
        claim_expired=quote is not None and state is S.PAYMENT_CLAIMED and quote.expires_at <= now,
        shows_next_steps=payable and state in (S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED),
        before_claim=state is S.AWAITING_PAYMENT,
        may_claim=payable and rules.may_claim(state, expires_at=quote.expires_at, now=now),
        claim_pending=payable and state is S.PAYMENT_CLAIMED,
        may_correct_claim=payable and rules.may_correct_claim(state) and (claim_refused or not order.claimed_txid),
        expired=state is S.EXPIRED,
        paid=state is S.PAID,
        late_options=state is S.PAID_LATE and order.refund_due,
        shows_access=state in rules.SHOWS_ACCESS and not order.extends_id,  # an extension's access is its order's
        access_ready=state is S.ACTIVE,
        wants_refund_address=rules.wants_refund_address(state, refund_due=order.refund_due, received=received),
        may_cancel=rules.may_cancel(state, transfer_recorded=transfer_recorded),
    )
