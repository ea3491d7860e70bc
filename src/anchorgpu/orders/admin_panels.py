"""What the operator reads about an order's payment: the quote, what the
transfers add up to, and what the order waits for. Reads only."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone
from django.utils.timesince import timesince
from django.utils.translation import gettext as _

from anchorgpu.audit.models import AuditEntry
from anchorgpu.billing.models import Invoice
from anchorgpu.payments.evaluation import Evaluation, EvaluationError
from anchorgpu.payments.refund_networks import refund_amount_quote_units
from anchorgpu.payments.services import payment_status
from anchorgpu.payments.uri import whole_units

from . import rules
from .credits import order_credit
from .models import Order
from .moves import MOVABLE
from .queue import REFUND_CHECK_FAILED
from .retry import MAX_WIPE_FAILURES
from .states import OrderState

S = OrderState


@dataclass(frozen=True)
class Money:
    units: int
    decimals: int
    symbol: str

    @property
    def coins(self) -> str:
        return f"{whole_units(self.units, self.decimals)} {self.symbol}"

    def __str__(self) -> str:
        return f"{self.coins} ({self.units} base units)"


@dataclass(frozen=True)
class PaymentSummary:
    quote: object | None  # payments.Quote
    evaluation: Evaluation | None
    problem: str  # why there is no evaluation
    due: Money | None
    received: Money | None
    unconfirmed: Money | None
    shortfall: Money | None
    excess: Money | None
    refunded: Money | None

    @property
    def has_money(self) -> bool:
        return bool(self.received and self.received.units)


def _quote(order: Order):
    try:
        return order.quote
    except Order.quote.RelatedObjectDoesNotExist:
        return None


def payment_summary(order: Order) -> PaymentSummary:
    quote = _quote(order)
    if quote is None:
        return PaymentSummary(None, None, _("This order has no quote."), *([None] * 6))
    asset = quote.asset

    def money(units: int) -> Money:
        return Money(units, asset.decimals, asset.symbol)

    # In the quote's units: a refund sent on another network of the same coin is converted by its decimals.
    refunded = money(sum(refund_amount_quote_units(r, quote) for r in order.refunds.all()))
    try:
        ev = payment_status(order)
    except EvaluationError as exc:  # corrupt data: say so rather than fail the page
        return PaymentSummary(quote, None, str(exc), money(quote.amount), None, None, None, None, refunded)
    return PaymentSummary(quote, ev, "", money(quote.amount), money(ev.confirmed_total), money(ev.unconfirmed_total),
                          money(ev.shortfall), money(ev.excess), refunded)


def to_do(order: Order, summary: PaymentSummary | None = None, *, with_txid: bool = True) -> str:
    """In a few words, what the order waits for from the operator (``with_txid``: naming the transaction id
    the customer gave; the queue shows it in a column of its own)."""
    summary = summary or payment_summary(order)
    state = order.order_state
    if order.chain_alert:  # the most urgent: money counted for the order is gone (payments.chain_alerts)
        return _("Money counted for this order is no longer on chain: read the chain alert, check the transfer, "
                 "then clear the alert.")
    if state is S.PAYMENT_CLAIMED:
        hint = (_(" (transaction id %(txid)s)") % {"txid": order.claimed_txid}
                if order.claimed_txid and with_txid else "")
        return _("The customer says they paid%(hint)s: find the transfer and record it, or mark the claim "
                 "invalid.") % {"hint": hint}
    if state is S.UNDERPAID:
        short = summary.shortfall.coins if summary.shortfall else "?"
        return _("Short by %(short)s: wait for a top-up, accept it as paid, or refund.") % {"short": short}
    if state is S.PAID_LATE:
        if order.refund_due:
            return _("Paid after expiry and the cards were gone: re-check capacity, or refund.")
        return _("Paid after expiry: re-check capacity, or refund.")
    if state is S.FAILED:
        return _("Access could not be prepared: retry provisioning, or refund.")
    if order.wipe_due_at is not None and order.wipe_attempts >= MAX_WIPE_FAILURES:
        return _("The machine could not be wiped after the order ended (%(error)s): fix the cause, then wipe "
                 "now. No new term starts on its cards until then.") % {"error": order.last_error or "?"}
    failed = next((r for r in order.refunds.all() if r.verified_at is None
                   and r.verification.get("status") in REFUND_CHECK_FAILED), None)
    if failed is not None:
        return _("Refund %(txid)s does not hold up on chain (%(status)s), so the customer is not told it was sent: "
                 "check the transaction you sent.") % {"txid": failed.txid[:18] + "…",
                                                        "status": failed.verification["status"]}
    if order.refund_due:
        excess = summary.excess.coins if summary.excess and summary.excess.units else ""
        if excess and not rules.keeps_payment(state):
            return _("%(excess)s arrived after the order had ended: refund it.") % {"excess": excess}
        if excess:
            return _("More than quoted was received: refund the excess of %(excess)s.") % {"excess": excess}
        return _("A refund is due.")
    return ""


def claim_checks(order: Order) -> list:
    """The order's claim checks, each with its verdict in words (``verdict``) for the operator."""
    from anchorgpu.payments.claim_check import verdict

    quote = _quote(order)
    checks = list(order.claim_checks.all())
    for check in checks:
        check.verdict = verdict(check, quote.asset) if quote else check.get_outcome_display()
    return checks


def claim_verdict(order: Order) -> str:
    """The automatic check of the transaction id the customer gave, in words ("" when there is none)."""
    from anchorgpu.payments.claim_check import latest_claim_check, verdict

    quote = _quote(order)
    check = latest_claim_check(order) if quote else None
    return verdict(check, quote.asset) if check else ""


def age(order: Order) -> str:
    return timesince(order.created_at, timezone.now())


def audit_trail(order: Order):
    return AuditEntry.objects.filter(object_type=order._meta.label_lower, object_id=str(order.pk)).order_by("at", "id")


@dataclass(frozen=True)
class Tool:
    name: str  # the URL name suffix
    label: str


def tools_for(order: Order, summary: PaymentSummary) -> list[Tool]:
    """The operator's tools that make sense for the order as it stands
    (every tool's page still lets the service have the last word)."""
    if summary.quote is None:
        return []
    state = order.order_state
    tools = [Tool("record_transfer", _("Record a transfer"))]
    received = summary.evaluation.confirmed_total if summary.evaluation is not None else 0
    if rules.may_mark_paid(state, received=received, refunded=order.refunds.exists()):  # the service's own rule
        tools.append(Tool("mark_paid", _("Mark paid")))
    if rules.may_mark_invalid(state):
        tools.append(Tool("mark_invalid", _("Mark invalid")))
    if state is S.PAID_LATE:
        tools.append(Tool("recheck_capacity", _("Re-check capacity")))
    if state is S.FAILED:
        tools.append(Tool("retry_provisioning", _("Retry access preparation")))
    if state in (S.PAID, S.PROVISIONING) and (order.lease_owner or order.retry_at or order.moves.filter(
            wipe_due_at__isnull=False, wiped_at__isnull=True, wipe_attempts__gt=0).exists()):
        tools.append(Tool("retry_step", _("Retry the step")))
    elif order.wipe_due_at is not None and (order.lease_owner or order.retry_at or order.wipe_attempts):
        tools.append(Tool("retry_step", _("Retry the step")))
    if state is S.ACTIVE:
        tools.append(Tool("health_recheck", _("Re-check health")))
        tools.append(Tool("end_term", _("End the term now")))
    if order.wipe_due_at is not None or (state is S.FAILED and order.ends_at <= timezone.now()
                                         and order.steps.exists() and not order.steps.filter(step="wipe").exists()):
        tools.append(Tool("wipe_now", _("Wipe now")))
    if state in MOVABLE and order.ends_at > timezone.now():
        tools.append(Tool("move_term", _("Move to other cards")))
    if summary.has_money:
        tools.append(Tool("record_refund", _("Record a refund")))
    if order.chain_alert:
        tools.append(Tool("clear_chain_alert", _("Clear the chain alert")))
    credit = service_credit(order) if state in rules.KEEPS_PAYMENT else None
    if credit is not None and credit.due > 0:
        tools.append(Tool("issue_credit", _("Issue the service credit")))
    return tools


def service_credit(order: Order):
    """What the service credit rule gives the order now (``orders.credits``); None for an order not invoiced."""
    if not Invoice.objects.filter(order=order).exists():
        return None
    return order_credit(order)


def lost_rows(credit) -> list[dict]:
    """The lost intervals of a computed credit, one row each, with the cause in words."""
    if credit is None:
        return []
    labels = {"fault": _("host fault"), "move": _("move to other cards"), "late_access": _("late access")}
    return [{"cause": labels.get(lost.cause, lost.cause), "start": lost.start, "end": lost.end}
            for lost in sorted(credit.lost, key=lambda lost: (lost.start, lost.end))]
