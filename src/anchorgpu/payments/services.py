"""Payment use cases: the customer's "I've paid", the evaluation that moves
the order (every transfer, found by the watcher or recorded by an operator in
``payments.transfers``, ends in ``payment_apply``), and the operator's manual
decisions. Refunds are in ``payments.refunds``.

Every function runs in one transaction with the order's row locked, so two
operators (or an operator and the watcher) cannot act on one order at once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation import services as allocation
from anchorgpu.allocation.errors import HoldExpired, InvalidRequest, NoLongerAvailable, NoStartFree
from anchorgpu.allocation.models import Booking
from anchorgpu.audit.services import audit_record
from anchorgpu.billing.selectors import service_credit_units
from anchorgpu.billing.services import invoice_issue
from anchorgpu.chains.keys import watch_key
from anchorgpu.i18n import message
from anchorgpu.orders import extensions, operator_events, rules, term_slide
from anchorgpu.orders.errors import InvalidOrder, NotAllowedNow
from anchorgpu.orders.models import Order
from anchorgpu.orders.states import OrderState
from anchorgpu.orders.transitions import order_lock, order_transition

from . import evaluation
from .address_check import AddressCheckError, check_address
from .models import PaymentSettings
from .refund_networks import refund_network, refund_quote_units
from .selectors import payment_status  # a read, kept importable from here for the services' callers
from .txids import TxIdError, normalise_txid

S = OrderState


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
        refusal = rules.claim_refusal(locked.order_state, expires_at=quote.expires_at, now=now,
                                      adds_txid=bool(normalised))
        if locked.order_state is S.PAYMENT_CLAIMED and refusal is None:
            if normalised != locked.claimed_txid:  # adding the hash to an earlier claim, or correcting it
                previous, locked.claimed_txid = locked.claimed_txid, normalised
                locked.save(update_fields=["claimed_txid", "updated_at"])
                audit_record(actor=actor, action="payment_claim_txid", obj=locked,
                             data={"txid": normalised, "previous": previous})
            return locked
        if refusal == rules.CLAIM_WRONG_STATE:
            raise NotAllowedNow(_("This order is %(state)s; “I've paid” is for an order awaiting payment.")
                                % {"state": locked.state_label})
        if refusal == rules.CLAIM_QUOTE_EXPIRED:
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
        if allocation.hold_extend(booking=booking, until=until, actor=actor, reason=reason, now=now):
            term_slide.hold_until(order, until=until, actor=actor, now=now)


def refund_address_problem(order: Order, address: str) -> str | None:
    """Why ``address`` (checked for the network) cannot receive the order's refund: "deposit" (the order's own
    deposit address) or "sender" (a payment came from it, perhaps an exchange's); None when it can."""
    if watch_key(address) == watch_key(order.quote.address):
        return "deposit"
    # Senders are kept as the watcher read them (a TRON one in its 0x form): compared by watch key.
    key = watch_key(address)
    if any(watch_key(sender) == key for sender in order.transfers.exclude(sender="").values_list("sender", flat=True)):
        return "sender"
    return None


def refund_address_set(*, order: Order, actor: str, address: str, asset=None) -> Order:
    """Where the customer wants a refund sent: ``asset`` is the network (the quote's coin on a network the shop
    has for it; None: the quote's), the address is checked for that network's scheme; never the deposit address
    and never a sender of the payment."""
    with transaction.atomic():
        locked = order_lock(order)
        quote = locked.quote
        network = refund_network(quote, asset)
        try:
            canonical = check_address(address, network.scheme)
        except AddressCheckError as exc:
            raise InvalidOrder(message(exc), code="bad_address") from None
        problem = refund_address_problem(locked, canonical)
        if problem == "deposit":
            raise InvalidOrder(_("That is this order's deposit address; give an address of your own."),
                               code="bad_address")
        if problem == "sender":
            raise InvalidOrder(_("Refunds are never sent back to the address a payment came from (it may be an "
                                 "exchange's). Give an address you control."), code="bad_address")
        locked.refund_address = canonical
        locked.refund_asset = None if network.pk == quote.asset_id else network
        locked.save(update_fields=["refund_address", "refund_asset", "updated_at"])
        audit_record(actor=actor, action="refund_address_set", obj=locked,
                     data={"address": canonical, "asset": network.code, "network": network.network_name})
    return locked


# --- evaluation -------------------------------------------------------------

def _secure_capacity(order: Order, *, actor: str, now: datetime) -> bool:
    """Make sure the order's term has confirmed cards: confirm its live hold,
    or, when the hold has run out, book the term again if the cards are
    still free (from the original start, or from now when that has passed). An extension's cards are the
    same cards right after its term, or none (``orders.extensions``)."""
    if order.extends_id:
        return extensions.extension_secure(order, actor=actor, now=now)
    booking = order.booking
    if booking is not None and booking.state == Booking.State.LIVE:
        if booking.kind == Booking.Kind.CONFIRMED:
            return True
        if booking.kind == Booking.Kind.HOLD:
            try:
                order.booking = allocation.hold_confirm(booking=booking, actor=actor, now=now)
                term_slide.term_slide(order, at=now, actor=actor, final=False, now=now)
                return True
            except HoldExpired:
                pass
    return _book_again(order, start=max(order.starts_at, now.replace(microsecond=0)), actor=actor, now=now)


def _book_again(order: Order, *, start: datetime | None, actor: str, now: datetime) -> bool:
    """Book the order's term again, its hold having run out: from ``start``, or (None) from the earliest
    start free. An as-soon-as-possible term keeps room to start when access is ready."""
    reach = term_slide.access_allowance() if order.start_asap else timedelta(0)
    try:
        hold = allocation.hold_place(product=order.product, quantity=order.quantity, start=start,
                                     term_days=order.term_days, actor=actor, reference=order.reference,
                                     hold_minutes=5, reach=reach, now=now)
        hold = allocation.hold_confirm(booking=hold, actor=actor, now=now)
    except (NoLongerAvailable, NoStartFree, InvalidRequest):
        return False
    moved = hold.starts_at != order.starts_at
    order.booking, order.starts_at = hold, hold.starts_at
    order.ends_at = hold.starts_at + timedelta(days=order.term_days)
    order.save(update_fields=["booking", "starts_at", "ends_at", "updated_at"])
    audit_record(actor=actor, action="order_rebook", obj=order, reason="hold had expired; cards booked again",
                 data={"booking": hold.pk, "start": hold.starts_at.isoformat(), "moved": moved})
    term_slide.term_slide(order, at=now, actor=actor, final=False, now=now)
    return True


def received_total(order: Order) -> int:
    ev = payment_status(order)
    return ev.confirmed_total


# States in which the order keeps (up to) the quoted amount; in the waiting
# states money received is a partial payment, not yet owed back.
KEEPS_PAYMENT = rules.KEEPS_PAYMENT
_WAITING = rules.WAITING_FOR_MONEY


def owed_back(order: Order) -> int:
    """Base units received for the order that it does not keep, less what was
    already refunded: what lies above the quote once paid; all of it for an
    order that was cancelled or could not get its cards; after a whole-order
    refund, whatever arrived later. A service credit (``orders.credits``) is
    taken off what the order keeps: it is owed back too."""
    if order.order_state in _WAITING:
        return 0
    refunds = list(order.refunds.all())
    received = received_total(order)
    keeps = order.order_state in KEEPS_PAYMENT
    kept = max(0, min(received, order.quote.amount) - service_credit_units(order)) if keeps else 0
    # A refund's network fee was paid out of the customer's money: it counts as returned. A refund of part of
    # the price came out of what the order keeps, not out of what it owes back.
    quote = order.quote
    returned = sum(refund_quote_units(r, quote) for r in refunds if not (keeps and r.of_price))
    return max(0, received - kept - returned)


def price_refunded(order: Order) -> int:
    """Base units of the quote's asset of the price already given back (refunds of part of the price, network
    fees included; a refund on another network counted in the quote's units)."""
    quote = order.quote
    return sum(refund_quote_units(r, quote) for r in order.refunds.all() if r.of_price)


def refunded_total(order: Order) -> int:
    """All refunds of the order with their network fees, in the quote's base units."""
    quote = order.quote
    return sum(refund_quote_units(r, quote) for r in order.refunds.all())


def note_excess(order: Order, actor: str, *, why: str = "", service_credit: bool = False) -> None:
    """Keep the order's "owed back" figure and its refund flag up to date; ``why``: what the operators are told
    when a refund falls due (a service credit says so; else an excess received), ``service_credit``: the rise
    comes from one (the audit row says so, and the customer's timeline)."""
    owed = owed_back(order)
    before = int(order.excess.get("units", 0)) if order.excess else 0
    # A late payment without cards is refunded whole; so is a paid term that ended before access was ready.
    due = (owed > 0 or order.order_state is S.PAID_LATE
           or (order.order_state is S.PAID and order.ends_at <= timezone.now()))
    if owed == before and order.refund_due == due:
        return
    rose = due and not order.refund_due
    order.excess = {"units": str(owed), "asset": order.quote.asset.code} if owed else {}
    order.refund_due = due
    order.save(update_fields=["excess", "refund_due", "updated_at"])
    if rose:
        operator_events.on_refund_due(order, why=why)
    if owed > before:
        audit_record(actor=actor, action="payment_overpaid", obj=order,
                     reason=why or "money was received that this order does not keep; it is owed back",
                     data={"excess_units": str(owed), "asset": order.quote.asset.code,
                           **({"service_credit": True} if service_credit else {})})


def _paid(order: Order, *, actor: str, now: datetime, reason: str) -> None:
    order.paid_at = now
    order_transition(order=order, to=S.PAID, actor=actor, reason=reason, update_fields=("paid_at",))
    # The invoice is settled by the quoted amount at most; any excess is owed back, not invoiced.
    invoice_issue(order=order, crypto_amount=min(received_total(order), order.quote.amount), actor=actor, now=now)
    note_excess(order, actor)


def _mark_paid(order: Order, *, actor: str, now: datetime, reason: str, late: bool) -> None:
    """Secure the cards, then PAID (with the invoice) or, with the cards gone, a refund is due."""
    if late and order.order_state is not S.PAID_LATE:
        order_transition(order=order, to=S.PAID_LATE, actor=actor, reason=reason)
    if _secure_capacity(order, actor=actor, now=now):
        _paid(order, actor=actor, now=now, reason=reason)
        if order.extends_id:  # added to the order it extends, in this same transaction
            extensions.extension_apply(order, actor=actor, now=now)
        return
    if order.order_state is not S.PAID_LATE:
        order_transition(order=order, to=S.PAID_LATE, actor=actor, reason="paid, but the cards are no longer free")
    note_excess(order, actor)
    audit_record(actor=actor, action="capacity_gone", obj=order,
                 reason="the cards for this term were taken after the hold expired; the payment is to be refunded")


def payment_apply(order: Order, *, actor: str, now: datetime) -> evaluation.Evaluation:
    """Evaluate the order's transfers and move it accordingly; the caller holds the order's lock."""
    ev = payment_status(order)
    state = order.order_state
    waiting = rules.waits_for_money(state)
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
        note_excess(order, actor)  # money arriving after the order was settled (or cancelled) is owed back
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


# --- the operator's decisions ------------------------------------------------

def need_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise InvalidOrder(_("Say why: a manual decision is recorded with its reason."), code="reason_required")
    return reason


def payment_mark_paid(*, order: Order, actor: str, reason: str, now: datetime | None = None) -> Order:
    """The operator accepts the payment as it stands (e.g. a fee taken by an exchange)."""
    reason = need_reason(reason)
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(order)
        state = locked.order_state
        refusal = rules.mark_paid_refusal(state, received=received_total(locked), refunded=locked.refunds.exists())
        if refusal == rules.MARK_PAID_WRONG_STATE:
            raise NotAllowedNow(_("This order is %(state)s; there is no payment to accept.")
                                % {"state": locked.state_label})
        if refusal == rules.MARK_PAID_NOTHING_RECEIVED:
            raise NotAllowedNow(_("No confirmed transfer is recorded for this order; record the transfer first."),
                                code="nothing_received")
        if refusal == rules.MARK_PAID_REFUNDED:
            raise NotAllowedNow(_("Money was already refunded for this order; it cannot be marked paid."),
                                code="refunded")
        audit_record(actor=actor, action="payment_mark_paid", obj=locked, reason=reason)
        late = state in (S.EXPIRED, S.PAID_LATE) or locked.quote.expires_at <= now
        _mark_paid(locked, actor=actor, now=now, reason=f"marked paid by an operator: {reason}", late=late)
    return locked


def payment_mark_invalid(*, order: Order, actor: str, reason: str, customer_reason: str,
                         now: datetime | None = None) -> Order:
    """The customer's "I've paid" does not hold up (no such transfer, wrong
    network…): back to awaiting payment while the quote runs, else expired.
    ``reason`` stays with the operators; ``customer_reason`` is what the customer
    is told, in the state change's e-mail and on the order page."""
    reason = need_reason(reason)
    customer_reason = (customer_reason or "").strip()
    if not customer_reason:
        raise InvalidOrder(_("Say what to tell the customer: the e-mail about this decision gives it."),
                           code="customer_reason_required")
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(order)
        if not rules.may_mark_invalid(locked.order_state):
            raise NotAllowedNow(_("Only a claimed payment can be marked invalid; this order is %(state)s.")
                                % {"state": locked.state_label})
        target = S.AWAITING_PAYMENT if locked.quote.expires_at > now else S.EXPIRED
        data = {"claimed_txid": locked.claimed_txid, "customer_reason": customer_reason}
        locked.claimed_txid = ""
        order_transition(order=locked, to=target, actor=actor, reason=f"claim marked invalid: {reason}", data=data,
                         update_fields=("claimed_txid",), customer_note=customer_reason)
        if target is S.EXPIRED:
            release_booking(locked, actor=actor, reason="quote expired")
    return locked


def release_booking(order: Order, *, actor: str, reason: str) -> None:
    booking = order.booking
    if booking is not None and booking.state == Booking.State.LIVE:
        allocation.booking_release(booking=booking, actor=actor, reason=reason, for_order=True)


def _late_unrefunded(order: Order, not_late: str) -> Order:
    """The order locked, if it is a late payment of which nothing was refunded yet (``not_late`` says why not)."""
    locked = order_lock(order)
    if locked.order_state is not S.PAID_LATE:
        raise NotAllowedNow(not_late)
    if locked.refunds.exists():
        raise NotAllowedNow(_("Money was already refunded for this order; refund the rest instead."), code="refunded")
    return locked


def payment_recheck_capacity(*, order: Order, actor: str, now: datetime | None = None) -> Order:
    """For a late payment whose cards were gone: try again (cards free up)."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _late_unrefunded(order, _("Only a late payment waits for capacity."))
        _mark_paid(locked, actor=actor, now=now, reason="capacity re-checked", late=True)
    return locked


def payment_take_earliest_start(*, order: Order, actor: str, now: datetime | None = None) -> Order:
    """A late payment whose cards were taken meanwhile: the customer (or an operator for them) accepts the
    earliest start from now at which the same cards are free for the whole term, instead of a refund."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _late_unrefunded(order, _("Only a late payment whose cards were taken can take a later start."))
        if locked.extends_id:
            raise NotAllowedNow(extensions.later_start_refusal(), code="extension")
        if payment_status(locked).status not in (evaluation.PaymentStatus.PAID, evaluation.PaymentStatus.OVERPAID,
                                                 evaluation.PaymentStatus.LATE):
            raise NotAllowedNow(_("The confirmed transfers are short of the quote."), code="underpaid")
        if not locked.product.is_active:
            raise NotAllowedNow(_("%(product)s is no longer on sale; ask for a refund instead.")
                                % {"product": locked.product.name}, code="not_on_sale")
        if not _book_again(locked, start=None, actor=actor, now=now):
            raise NotAllowedNow(_("No start within the booking horizon has these cards free for the whole term; "
                                  "ask for a refund instead."), code="unavailable")
        audit_record(actor=actor, action="payment_take_earliest_start", obj=locked,
                     data={"start": locked.starts_at.isoformat()})
        _paid(locked, actor=actor, now=now, reason="late payment: the customer took the earliest free start")
    return locked
