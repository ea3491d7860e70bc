"""Payment use cases: the customer's "I've paid", transfers an operator
records (a chain watcher will call the same ``transfer_record``), the
evaluation that moves the order, the operator's manual decisions, refunds.

Every function runs in one transaction with the order's row locked, so two
operators (or an operator and the watcher) cannot act on one order at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation import services as allocation
from anchorgpu.allocation.errors import HoldExpired, InvalidRequest, NoLongerAvailable
from anchorgpu.allocation.models import Booking
from anchorgpu.audit.services import audit_record
from anchorgpu.billing.services import credit_note_issue, invoice_issue
from anchorgpu.i18n import message
from anchorgpu.orders.errors import InvalidOrder, NotAllowedNow
from anchorgpu.orders.lifecycle import wipe_recorded
from anchorgpu.orders.models import Order
from anchorgpu.orders.states import OrderState
from anchorgpu.orders.transitions import order_lock, order_transition

from . import evaluation
from .address_check import AddressCheckError, check_address
from .amounts import fiat_value
from .models import Asset, PaymentSettings, Refund, Transfer
from .txids import TxIdError, normalise_txid

S = OrderState
# Bitcoin block times may run up to two hours ahead of the clock.
SEEN_AT_SLACK = timedelta(hours=2)


# --- the customer ---------------------------------------------------------

def payment_claim(*, order: Order, actor: str, txid: str = "", now: datetime | None = None) -> Order:
    """ "I've paid": the customer says a transfer is on its way. The hash, when
    given, is only a hint for the operator (or the watcher) to check; while the
    claim stands, a later call may add the hash or replace a wrong one."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(order)
        quote = locked.quote
        normalised = ""
        if txid.strip():
            try:
                normalised = normalise_txid(txid, chain=quote.asset.chain)
            except TxIdError as exc:
                raise InvalidOrder(message(exc), code="bad_txid") from None
        if locked.order_state is S.PAYMENT_CLAIMED and normalised:
            if normalised != locked.claimed_txid:  # adding the hash to an earlier claim, or correcting it
                previous, locked.claimed_txid = locked.claimed_txid, normalised
                locked.save(update_fields=["claimed_txid", "updated_at"])
                audit_record(actor=actor, action="payment_claim_txid", obj=locked,
                             data={"txid": normalised, "previous": previous})
            return locked
        if locked.order_state is not S.AWAITING_PAYMENT:
            raise NotAllowedNow(_("This order is %(state)s; “I've paid” is for an order awaiting payment.")
                                % {"state": locked.state_label})
        if quote.expires_at <= now:
            raise NotAllowedNow(_("This quote expired at %(time)s UTC. If you sent a transfer, contact us with "
                                  "its transaction id; it is checked until the watch window ends.")
                                % {"time": f"{quote.expires_at:%Y-%m-%d %H:%M}"})
        locked.claimed_txid = normalised
        locked.claimed_at = now
        order_transition(order=locked, to=S.PAYMENT_CLAIMED, actor=actor, reason="customer pressed “I've paid”",
                         data={"txid": normalised}, update_fields=("claimed_txid", "claimed_at"))
        grace = timedelta(minutes=PaymentSettings.current().claim_grace_minutes)
        _keep_hold(locked, until=min(quote.expires_at + grace, quote.monitor_until), actor=actor, now=now,
                   reason="the customer says a transfer is on its way")
    return locked


def _keep_hold(order: Order, *, until: datetime, actor: str, now: datetime, reason: str) -> None:
    booking = order.booking
    if booking is not None and booking.kind == Booking.Kind.HOLD and until > now:
        allocation.hold_extend(booking=booking, until=until, actor=actor, reason=reason, now=now)


def refund_address_set(*, order: Order, actor: str, address: str) -> Order:
    """Where the customer wants a refund sent: checked for the quote's network;
    never the deposit address and never a sender of the payment."""
    with transaction.atomic():
        locked = order_lock(order)
        quote = locked.quote
        try:
            canonical = check_address(address, quote.scheme)
        except AddressCheckError as exc:
            raise InvalidOrder(message(exc), code="bad_address") from None
        if canonical.lower() == quote.address.lower():
            raise InvalidOrder(_("That is this order's deposit address; give an address of your own."),
                               code="bad_address")
        senders = {s.lower() for s in locked.transfers.exclude(sender="").values_list("sender", flat=True)}
        if canonical.lower() in senders:
            raise InvalidOrder(_("Refunds are never sent back to the address a payment came from (it may be an "
                                 "exchange's). Give an address you control."), code="bad_address")
        locked.refund_address = canonical
        locked.save(update_fields=["refund_address", "updated_at"])
        audit_record(actor=actor, action="refund_address_set", obj=locked, data={"address": canonical})
    return locked


# --- evaluation -------------------------------------------------------------

def _terms(order: Order) -> evaluation.Terms:
    quote = order.quote
    return evaluation.Terms(amount=quote.amount, tolerance=quote.tolerance,
                            confirmations_required=quote.confirmations_required, expires_at=quote.expires_at)


def _transfers(order: Order) -> list[evaluation.Transfer]:
    return [evaluation.Transfer(key=(t.chain, t.txid, t.index), amount=t.amount, confirmations=t.confirmations,
                                seen_at=t.seen_at) for t in order.transfers.filter(withdrawn_at__isnull=True)]


def payment_status(order: Order) -> evaluation.Evaluation:
    """The evaluation of the order's transfers as they stand (a read)."""
    return evaluation.evaluate(_terms(order), _transfers(order))


def _secure_capacity(order: Order, *, actor: str, now: datetime) -> bool:
    """Make sure the order's term has confirmed cards: confirm its live hold,
    or, when the hold has run out, book the term again if the cards are
    still free (from the original start, or from now when that has passed)."""
    booking = order.booking
    if booking is not None and booking.state == Booking.State.LIVE:
        if booking.kind == Booking.Kind.CONFIRMED:
            return True
        if booking.kind == Booking.Kind.HOLD:
            try:
                allocation.hold_confirm(booking=booking, actor=actor, now=now)
                return True
            except HoldExpired:
                pass
    start = max(order.starts_at, now.replace(microsecond=0))
    try:
        hold = allocation.hold_place(product=order.product, quantity=order.quantity, start=start,
                                     term_days=order.term_days, actor=actor, reference=order.reference,
                                     hold_minutes=5, now=now)
        allocation.hold_confirm(booking=hold, actor=actor, now=now)
    except (NoLongerAvailable, InvalidRequest):
        return False
    moved = start != order.starts_at
    order.booking, order.starts_at, order.ends_at = hold, hold.starts_at, hold.ends_at
    order.save(update_fields=["booking", "starts_at", "ends_at", "updated_at"])
    audit_record(actor=actor, action="order_rebook", obj=order, reason="hold had expired; cards booked again",
                 data={"booking": hold.pk, "start": hold.starts_at.isoformat(), "moved": moved})
    return True


def _received(order: Order) -> int:
    ev = payment_status(order)
    return ev.confirmed_total


# States in which the order keeps (up to) the quoted amount; in the waiting
# states money received is a partial payment, not yet owed back.
_KEEPS_PAYMENT = (S.PAID, S.PROVISIONING, S.ACTIVE, S.COMPLETED, S.FAILED)
_WAITING = (S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED, S.UNDERPAID, S.EXPIRED)


def owed_back(order: Order) -> int:
    """Base units received for the order that it does not keep, less what was
    already refunded: what lies above the quote once paid; all of it for an
    order that was cancelled or could not get its cards; after a whole-order
    refund, whatever arrived later."""
    if order.order_state in _WAITING:
        return 0
    refunds = list(order.refunds.all())
    received = _received(order)
    kept = min(received, order.quote.amount) if order.order_state in _KEEPS_PAYMENT else 0
    # A refund's network fee was paid out of the customer's money: it counts as returned.
    return max(0, received - kept - sum(r.amount + r.network_fee for r in refunds))


def _note_excess(order: Order, actor: str) -> None:
    """Keep the order's "owed back" figure and its refund flag up to date."""
    owed = owed_back(order)
    before = int(order.excess.get("units", 0)) if order.excess else 0
    # A late payment without cards is refunded whole; so is a paid term that ended before access was ready.
    due = (owed > 0 or order.order_state is S.PAID_LATE
           or (order.order_state is S.PAID and order.ends_at <= timezone.now()))
    if owed == before and order.refund_due == due:
        return
    order.excess = {"units": str(owed), "asset": order.quote.asset.code} if owed else {}
    order.refund_due = due
    order.save(update_fields=["excess", "refund_due", "updated_at"])
    if owed > before:
        audit_record(actor=actor, action="payment_overpaid", obj=order,
                     reason="money was received that this order does not keep; it is owed back",
                     data={"excess_units": str(owed), "asset": order.quote.asset.code})


def _mark_paid(order: Order, *, actor: str, now: datetime, reason: str, late: bool) -> None:
    """Secure the cards, then PAID (with the invoice) or, with the cards gone, a refund is due."""
    if late and order.order_state is not S.PAID_LATE:
        order_transition(order=order, to=S.PAID_LATE, actor=actor, reason=reason)
    if _secure_capacity(order, actor=actor, now=now):
        order.paid_at = now
        order_transition(order=order, to=S.PAID, actor=actor, reason=reason, update_fields=("paid_at",))
        # The invoice is settled by the quoted amount at most; any excess is owed back, not invoiced.
        invoice_issue(order=order, crypto_amount=min(_received(order), order.quote.amount), actor=actor, now=now)
        _note_excess(order, actor)
        return
    if order.order_state is not S.PAID_LATE:
        order_transition(order=order, to=S.PAID_LATE, actor=actor, reason="paid, but the cards are no longer free")
    _note_excess(order, actor)
    audit_record(actor=actor, action="capacity_gone", obj=order,
                 reason="the cards for this term were taken after the hold expired; the payment is to be refunded")


def payment_apply(order: Order, *, actor: str, now: datetime) -> evaluation.Evaluation:
    """Evaluate the order's transfers and move it accordingly; the caller holds the order's lock."""
    ev = payment_status(order)
    state = order.order_state
    waiting = state in (S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED, S.UNDERPAID, S.EXPIRED)
    if ev.status in (evaluation.PaymentStatus.PAID, evaluation.PaymentStatus.OVERPAID) and waiting:
        _mark_paid(order, actor=actor, now=now, reason=f"payment {ev.status.value}",
                   late=state is S.EXPIRED)  # on time, but the order had already been expired by the sweep
    elif ev.status is evaluation.PaymentStatus.LATE and waiting:
        _mark_paid(order, actor=actor, now=now, reason="enough arrived, but after the quote expired", late=True)
    elif ev.status is evaluation.PaymentStatus.UNDERPAID and state in (S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED,
                                                                         S.EXPIRED):
        order_transition(order=order, to=S.UNDERPAID, actor=actor,
                         reason="confirmed transfers are short of the quote",
                         data={"received": str(ev.confirmed_total), "shortfall": str(ev.shortfall)})
    elif not waiting:
        _note_excess(order, actor)  # money arriving after the order was settled (or cancelled) is owed back
    if ev.status is evaluation.PaymentStatus.PENDING and order.order_state in (S.AWAITING_PAYMENT,
                                                                              S.PAYMENT_CLAIMED):
        quote = order.quote
        if any(t.seen_at < quote.expires_at for t in order.transfers.filter(withdrawn_at__isnull=True)):
            # Paid in time, still confirming: the cards must not go to someone else meanwhile.
            hold = timedelta(hours=PaymentSettings.current().pending_hold_hours)
            until = min(now + hold, quote.monitor_until)
            booking = order.booking
            # Each new block re-evaluates the order: the hold is stretched again only once a quarter of it is used.
            if booking is None or booking.expires_at is None or booking.expires_at < until - hold / 4:
                _keep_hold(order, until=until, actor=actor, now=now,
                           reason="a transfer seen before expiry is still confirming")
    return ev


@dataclass(frozen=True)
class TransferInput:
    txid: str
    index: int
    amount: int
    confirmations: int
    seen_at: datetime
    sender: str = ""
    note: str = ""


def transfer_record(*, order: Order, transfer: TransferInput, actor: str, source: str = Transfer.Source.OPERATOR,
                    now: datetime | None = None) -> Transfer:
    """Record one transfer to the order's deposit address and re-evaluate the
    order. The same (network, txid, index) can be recorded once, for one order."""
    now = now or timezone.now()
    if transfer.amount <= 0:
        raise InvalidOrder(_("The amount must be a positive whole number of base units."), code="bad_amount")
    if transfer.seen_at > now + SEEN_AT_SLACK:
        raise InvalidOrder(_("A transfer cannot have been seen in the future."), code="bad_time")
    with transaction.atomic():
        locked = order_lock(order)
        quote = locked.quote
        asset: Asset = quote.asset
        try:
            txid = normalise_txid(transfer.txid, chain=asset.chain)
        except TxIdError as exc:
            raise InvalidOrder(message(exc), code="bad_txid") from None
        watched = (Transfer.objects.filter(order=locked, chain=asset.network, txid=txid, source=Transfer.Source.WATCHER)
                   .exclude(index=transfer.index).first())
        if watched is not None:
            raise NotAllowedNow(_("The chain watcher already recorded this transaction for this order (index "
                                  "%(index)d, %(amount)s base units); it follows its confirmations itself.")
                                % {"index": watched.index, "amount": watched.amount}, code="duplicate_transfer")
        duplicate = Transfer.objects.filter(chain=asset.network, txid=txid, index=transfer.index).first()
        if duplicate is not None:
            where = _("this order") if duplicate.order_id == locked.pk else _("order %(ref)s") % {
                "ref": duplicate.order.reference}
            raise NotAllowedNow(_("This transfer (%(txid)s, index %(index)d) is already recorded for %(where)s; "
                                  "one transfer credits one order once.")
                                % {"txid": txid[:18] + "…", "index": transfer.index, "where": where},
                                code="duplicate_transfer")
        try:
            with transaction.atomic():
                row = Transfer.objects.create(
                    order=locked, asset=asset, chain=asset.network, txid=txid, index=transfer.index,
                    amount=transfer.amount, confirmations=transfer.confirmations, seen_at=transfer.seen_at,
                    sender=transfer.sender.strip(), source=source, recorded_by=actor, note=transfer.note)
        except IntegrityError:  # recorded by someone else a moment ago
            raise NotAllowedNow(_("This transfer is already recorded; one transfer credits one order once."),
                                code="duplicate_transfer") from None
        audit_record(actor=actor, action="transfer_record", obj=locked,
                     data={"txid": txid, "index": transfer.index, "amount": str(transfer.amount),
                           "confirmations": transfer.confirmations, "seen_at": transfer.seen_at.isoformat(),
                           "source": source})
        payment_apply(locked, actor=actor, now=now)
    return row


def transfer_confirmations_update(*, transfer: Transfer, confirmations: int, actor: str,
                                  now: datetime | None = None) -> Transfer:
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(transfer.order_id)
        row = Transfer.objects.select_for_update().get(pk=transfer.pk)
        if confirmations < row.confirmations:
            raise InvalidOrder(_("Confirmations only grow; a transfer that lost them was reorganised away and "
                                 "needs an operator's decision."), code="confirmations_fell")
        row.confirmations = confirmations
        row.save(update_fields=["confirmations"])
        audit_record(actor=actor, action="transfer_confirmations", obj=locked,
                     data={"transfer": str(row), "confirmations": confirmations})
        payment_apply(locked, actor=actor, now=now)
    return row


# --- the operator's decisions ------------------------------------------------

def _need_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise InvalidOrder(_("Say why: a manual decision is recorded with its reason."), code="reason_required")
    return reason


def payment_mark_paid(*, order: Order, actor: str, reason: str, now: datetime | None = None) -> Order:
    """The operator accepts the payment as it stands (e.g. a fee taken by an exchange)."""
    reason = _need_reason(reason)
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(order)
        state = locked.order_state
        if state not in (S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED, S.UNDERPAID, S.PAID_LATE, S.EXPIRED):
            raise NotAllowedNow(_("This order is %(state)s; there is no payment to accept.")
                                % {"state": locked.state_label})
        if _received(locked) <= 0:
            raise NotAllowedNow(_("No confirmed transfer is recorded for this order; record the transfer first."),
                                code="nothing_received")
        if locked.refunds.exists():
            raise NotAllowedNow(_("Money was already refunded for this order; it cannot be marked paid."),
                                code="refunded")
        audit_record(actor=actor, action="payment_mark_paid", obj=locked, reason=reason)
        late = state in (S.EXPIRED, S.PAID_LATE) or locked.quote.expires_at <= now
        _mark_paid(locked, actor=actor, now=now, reason=f"marked paid by an operator: {reason}", late=late)
    return locked


def payment_mark_invalid(*, order: Order, actor: str, reason: str, now: datetime | None = None) -> Order:
    """The customer's "I've paid" does not hold up (no such transfer, wrong
    network…): back to awaiting payment while the quote runs, else expired."""
    reason = _need_reason(reason)
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(order)
        if locked.order_state is not S.PAYMENT_CLAIMED:
            raise NotAllowedNow(_("Only a claimed payment can be marked invalid; this order is %(state)s.")
                                % {"state": locked.state_label})
        target = S.AWAITING_PAYMENT if locked.quote.expires_at > now else S.EXPIRED
        data = {"claimed_txid": locked.claimed_txid}
        locked.claimed_txid = ""
        order_transition(order=locked, to=target, actor=actor, reason=f"claim marked invalid: {reason}", data=data,
                         update_fields=("claimed_txid",))
        if target is S.EXPIRED:
            _release_booking(locked, actor=actor, reason="quote expired")
    return locked


def _release_booking(order: Order, *, actor: str, reason: str) -> None:
    booking = order.booking
    if booking is not None and booking.state == Booking.State.LIVE:
        allocation.booking_release(booking=booking, actor=actor, reason=reason)


def payment_recheck_capacity(*, order: Order, actor: str, now: datetime | None = None) -> Order:
    """For a late payment whose cards were gone: try again (cards free up)."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(order)
        if locked.order_state is not S.PAID_LATE:
            raise NotAllowedNow(_("Only a late payment waits for capacity."))
        if locked.refunds.exists():
            raise NotAllowedNow(_("Money was already refunded for this order; refund the rest instead."),
                                code="refunded")
        _mark_paid(locked, actor=actor, now=now, reason="capacity re-checked", late=True)
    return locked


# --- refunds -------------------------------------------------------------------

# States a whole order can be refunded from (the transition table agrees).
REFUNDABLE = (S.UNDERPAID, S.PAID_LATE, S.PAID, S.FAILED)


@dataclass(frozen=True)
class RefundInput:
    address: str  # where the operator sent it: must be the customer's refund address
    amount: int  # base units sent back
    rate_choice: str  # Refund.RateChoice
    txid: str
    reason: str
    whole_order: bool  # True: the order is refunded (state REFUNDED); False: only an excess is returned
    rate: Decimal | None = None  # the day's rate when rate_choice is "current"
    network_fee: int = 0  # base units the network took out of the customer's money


def refund_record(*, order: Order, refund: RefundInput, actor: str, now: datetime | None = None) -> Refund:
    """Record a refund the operator has sent to the customer's refund address."""
    reason = _need_reason(refund.reason)
    now = now or timezone.now()
    if refund.amount <= 0 or refund.network_fee < 0:
        raise InvalidOrder(_("The amount must be a positive whole number of base units."), code="bad_amount")
    with transaction.atomic():
        locked = order_lock(order)
        quote = locked.quote
        state = locked.order_state
        if not locked.refund_address:
            raise NotAllowedNow(_("The customer has not given a refund address yet; ask them to add it on the "
                                  "order page."), code="no_refund_address")
        try:
            sent_to = check_address(refund.address, quote.scheme)
        except AddressCheckError as exc:
            raise InvalidOrder(message(exc), code="bad_address") from None
        if sent_to.lower() != locked.refund_address.lower():
            raise InvalidOrder(_("That is not the refund address the customer gave (%(address)s); a refund goes "
                                 "only there.") % {"address": locked.refund_address}, code="bad_address")
        senders = {a.lower() for a in locked.transfers.exclude(sender="").values_list("sender", flat=True)}
        if sent_to.lower() in senders:
            raise InvalidOrder(_("The refund address is also the sender of a transfer to this order; refunds never "
                                 "go back to the sender. Ask the customer for another address."), code="bad_address")
        if state is S.PAID_LATE and not refund.whole_order:
            raise InvalidOrder(_("A late payment is refunded as a whole order."), code="whole_only")
        received = _received(locked)
        refunded = sum(r.amount + r.network_fee for r in locked.refunds.all())
        if not refund.whole_order and refund.amount + refund.network_fee > owed_back(locked):
            raise InvalidOrder(_("Only %(owed)d base units are owed back beyond what the order keeps; refund the "
                                 "whole order instead, or less.") % {"owed": owed_back(locked)}, code="too_much")
        if refunded + refund.amount + refund.network_fee > received:
            raise InvalidOrder(_("That is more than was received for this order (received %(received)d, already "
                                 "refunded %(refunded)d base units).") % {"received": received, "refunded": refunded},
                               code="too_much")
        if refund.whole_order and state not in REFUNDABLE:
            raise NotAllowedNow(_("This order is %(state)s: it cannot be refunded as a whole. Money received "
                                  "beyond what is owed can be returned as an excess refund.")
                                % {"state": locked.state_label}, code="not_refundable")
        try:
            txid = normalise_txid(refund.txid, chain=quote.asset.chain)
        except TxIdError as exc:
            raise InvalidOrder(message(exc), code="bad_txid") from None
        if refund.rate_choice == Refund.RateChoice.CURRENT:
            if refund.rate is None or refund.rate <= 0:
                raise InvalidOrder(_("Give the day's rate used for the refund."), code="rate_required")
            rate = refund.rate
        else:
            rate = quote.rate
        fiat = fiat_value(refund.amount, rate=rate, decimals=quote.asset.decimals).quantize(Decimal("0.01"),
                                                                                             rounding=ROUND_HALF_UP)
        try:
            with transaction.atomic():
                row = Refund.objects.create(order=locked, asset=quote.asset, address=locked.refund_address,
                                            amount=refund.amount, fiat_amount=fiat, currency=quote.currency,
                                            rate=rate, rate_choice=refund.rate_choice, txid=txid, reason=reason,
                                            recorded_by=actor, whole_order=refund.whole_order,
                                            network_fee=refund.network_fee)
        except IntegrityError:
            raise NotAllowedNow(_("A refund with this transaction id is already recorded."),
                                code="duplicate_refund") from None
        audit_record(actor=actor, action="refund_record", obj=locked, reason=reason,
                     data={"amount": str(refund.amount), "fiat": str(fiat), "rate": str(rate),
                           "rate_choice": refund.rate_choice, "txid": txid, "address": locked.refund_address,
                           "network_fee": str(refund.network_fee)})
        if refund.whole_order:
            invoice = getattr(locked, "invoice", None)
            if invoice is not None:
                # The whole invoice is cancelled, whatever the coins are worth today.
                open_amount = invoice.total - sum((n.amount for n in invoice.credit_notes.all()), Decimal(0))
                if open_amount > 0:
                    credit_note_issue(invoice=invoice, amount=open_amount, reason=reason, actor=actor, refund=row,
                                      now=now)
            _release_booking(locked, actor=actor, reason=f"refunded: {reason}")
            wipe_recorded(locked, now=now)  # if access had been (partly) prepared
            order_transition(order=locked, to=S.REFUNDED, actor=actor, reason=reason)
        _note_excess(locked, actor)
    return row
