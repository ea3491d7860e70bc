"""Refunds: money the operator sends back, recorded with its amount, rate, transaction id and reason
(DESIGN §5), and, where the asset is watched, checked on the chain before the customer is told it was sent.

What can be refunded, from which state:

* **the whole order** (``whole_order``), from underpaid, paid late, paid, preparing access, active and failed:
  the order ends as refunded in the same transaction, its invoice is credited, its access is wiped and its
  cards are released — never the cards without the order;
* **money beyond what the order keeps** (an overpayment, a late top-up), from any state that keeps money;
* **part of the price** (``of_price``) of a settled order (paid, preparing access, active, completed, failed),
  e.g. a goodwill refund after a fault: the order stands and a credit note of the refund's value is issued.

A refund goes to the address the customer gave on the order page, or to one the operator enters from the
customer's written request (``customer_request`` says where and when they asked); never to the deposit address,
never back to a sender of the payment.

A refund is paid in the coin that was paid (the quote's symbol), on the network the customer chose for it or another
the shop has for that coin (``RefundInput.asset``): its amount is in THAT network's base units (USDT has 18 decimal
places on BNB Chain, 6 elsewhere), it is checked on that network's chain, and it counts against what the order
received in the quote's base units (``payments.refund_units``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.audit.services import audit_record
from anchorgpu.billing.models import CustomerReason
from anchorgpu.billing.selectors import service_credit_units
from anchorgpu.billing.services import credit_note_issue
from anchorgpu.chains.base import ChainUnavailable, LookupOutcome
from anchorgpu.chains.keys import watch_key
from anchorgpu.i18n import message
from anchorgpu.orders import notify, rules
from anchorgpu.orders.errors import InvalidOrder, NotAllowedNow
from anchorgpu.orders.models import Order
from anchorgpu.orders.queue import REFUND_CHECK_FAILED
from anchorgpu.orders.states import OrderState
from anchorgpu.orders.transitions import order_lock, order_transition
from anchorgpu.orders.wipes import wipe_mark_due

from .address_check import AddressCheckError, check_address
from .amounts import fiat_value
from .models import Asset, Refund
from .refund_networks import customer_network, refund_network
from .refund_units import from_quote_units, to_quote_units
from .services import (
    need_reason,
    note_excess,
    owed_back,
    price_refunded,
    received_total,
    refund_address_problem,
    refunded_total,
    release_booking,
)
from .txids import TxIdError, normalise_txid
from .watch_config import watcher_for

log = logging.getLogger(__name__)
S = OrderState
CHAIN = "chain-watcher"

MAX_FIAT = Decimal(10) ** 12  # Refund.fiat_amount holds 12 digits before the point


@dataclass(frozen=True)
class RefundInput:
    address: str  # where the operator sent it: the customer's refund address, or one from their written request
    amount: int  # base units sent back
    rate_choice: str  # Refund.RateChoice
    txid: str
    reason: str
    whole_order: bool  # True: the order is refunded (state REFUNDED)
    rate: Decimal | None = None  # the day's rate when rate_choice is "current"
    network_fee: int = 0  # base units the network took out of the customer's money
    of_price: bool = False  # a part of what a settled order keeps (a credit note follows); the order stands
    customer_request: str = ""  # where and when the customer asked in writing for ``address``, if not on the page
    # What the credit note (whole order, part of the price) tells the customer: a ``billing.models.CustomerReason``
    # and words for the customer; ``reason`` above is the operator's own note and is never printed.
    customer_reason: str = ""
    customer_reason_text: str = ""
    # The network it was sent on: an Asset (or its code) with the quote's symbol; None: the quote's own.
    asset: Asset | str | None = None


def _destination(order: Order, refund: RefundInput, network: Asset) -> tuple[str, str]:
    """The checked address the refund went to, and the customer's written request when the operator typed it.
    The customer's address counts as theirs only on the network they gave it for (an exchange's EVM address on
    Ethereum may not be theirs on Polygon)."""
    try:
        sent_to = check_address(refund.address, network.scheme)
    except AddressCheckError as exc:
        raise InvalidOrder(message(exc), code="bad_address") from None
    request = refund.customer_request.strip()
    customers = order.refund_address
    theirs = bool(customers and sent_to.lower() == customers.lower())
    if theirs and customer_network(order).pk != network.pk and not request:
        raise InvalidOrder(_("The customer gave that address for %(theirs)s, not %(network)s. Send the refund on "
                             "%(theirs)s, or note where and when the customer asked for %(network)s in writing.")
                           % {"theirs": customer_network(order).network_name, "network": network.network_name},
                           code="bad_network")
    if not theirs and not request:
        if customers:
            raise InvalidOrder(_("That is not the refund address the customer gave (%(address)s). A refund goes "
                                 "there, or to an address the customer asked for in writing: then note where and "
                                 "when they asked.") % {"address": customers}, code="bad_address")
        raise NotAllowedNow(_("The customer has not given a refund address on the order page. Ask them for one, "
                              "or enter the address from their written request and note where and when they "
                              "asked."), code="no_refund_address")
    problem = refund_address_problem(order, sent_to)
    if problem == "deposit":
        raise InvalidOrder(_("That is this order's deposit address; a refund goes to the customer."),
                           code="bad_address")
    if problem == "sender":
        raise InvalidOrder(_("The refund address is also the sender of a transfer to this order; refunds never "
                             "go back to the sender. Ask the customer for another address."), code="bad_address")
    return sent_to, (request if not theirs or customer_network(order).pk != network.pk else "")


def _check_scope(order: Order, refund: RefundInput, network: Asset) -> None:
    """What may be refunded, counted in the quote's base units; the limits told to the operator are in the base
    units of the network the refund was sent on."""
    state = order.order_state
    quote_decimals = order.quote.asset.decimals

    def sent(units: int) -> int:  # the quote's units in the refund network's, rounded down
        return from_quote_units(max(units, 0), quote_decimals=quote_decimals, sent_decimals=network.decimals)

    received = received_total(order)
    refunded = refunded_total(order)
    out = to_quote_units(refund.amount + refund.network_fee, sent_decimals=network.decimals,
                         quote_decimals=quote_decimals)
    if refund.whole_order and refund.of_price:
        raise InvalidOrder(_("A refund is either of the whole order or of a part of its price."), code="bad_scope")
    if refund.whole_order and not rules.may_refund(state, whole_order=True):
        raise NotAllowedNow(_("This order is %(state)s: it cannot be refunded as a whole. Part of its price, or "
                              "money received beyond it, can be.") % {"state": order.state_label},
                            code="not_refundable")
    if state is S.PAID_LATE and not refund.whole_order:
        raise InvalidOrder(_("A late payment is refunded as a whole order."), code="whole_only")
    if refund.of_price and not rules.may_refund(state, whole_order=False):
        raise NotAllowedNow(_("This order is %(state)s and keeps no payment; refund what is owed back, or the "
                              "whole order.") % {"state": order.state_label}, code="not_refundable")
    if refund.of_price:
        kept = min(received, order.quote.amount) - price_refunded(order) - service_credit_units(order)
        if out > kept:
            raise InvalidOrder(_("The order keeps %(kept)d base units of its price; a refund of part of the price "
                                 "gives back at most that (money beyond the price is refunded as an excess).")
                               % {"kept": sent(kept)}, code="too_much")
    if not refund.whole_order and not refund.of_price and out > owed_back(order):
        raise InvalidOrder(_("Only %(owed)d base units are owed back beyond what the order keeps; refund part of "
                             "the price or the whole order instead, or less.") % {"owed": sent(owed_back(order))},
                           code="too_much")
    if refunded + out > received:
        raise InvalidOrder(_("That is more than was received for this order (received %(received)d, already "
                             "refunded %(refunded)d base units).") % {"received": sent(received),
                                                                    "refunded": sent(refunded)},
                           code="too_much")


def _rate(order: Order, refund: RefundInput) -> Decimal:
    if refund.rate_choice != Refund.RateChoice.CURRENT:
        return order.quote.rate
    if refund.rate is None or refund.rate <= 0:
        raise InvalidOrder(_("Give the day's rate used for the refund."), code="rate_required")
    return refund.rate


def _customer_reason(order: Order, refund: RefundInput) -> None:
    """A refund that credits the invoice carries the reason its credit note gives the customer."""
    if not (refund.whole_order or refund.of_price) or getattr(order, "invoice", None) is None:
        return
    if refund.customer_reason not in CustomerReason.values:
        raise InvalidOrder(_("Choose the reason the credit note gives the customer."), code="customer_reason")
    if refund.customer_reason == CustomerReason.OTHER and not refund.customer_reason_text.strip():
        raise InvalidOrder(_("Say in words, for the customer, why the invoice is credited."), code="customer_reason")


def _credit(order: Order, *, amount: Decimal | None, reason: str, actor: str, row: Refund, now: datetime,
            refund: RefundInput) -> None:
    """Credit the order's invoice: all that is still open (``amount=None``), or up to ``amount``."""
    invoice = getattr(order, "invoice", None)
    if invoice is None:
        return
    open_amount = invoice.total - sum((n.amount for n in invoice.credit_notes.all()), Decimal(0))
    credit = open_amount if amount is None else min(amount, open_amount)
    if credit > 0:
        credit_note_issue(invoice=invoice, amount=credit, reason=reason, actor=actor, refund=row, now=now,
                          customer_reason=refund.customer_reason, customer_reason_text=refund.customer_reason_text)


def _end_whole(order: Order, *, actor: str, reason: str, row: Refund, now: datetime, refund: RefundInput) -> None:
    """The whole order ends as refunded: the state first (the database refuses a paid or active order without
    its booking), then the invoice, the machine and the cards."""
    was = order.order_state
    order_transition(order=order, to=S.REFUNDED, actor=actor, reason=reason)
    _credit(order, amount=None, reason=reason, actor=actor, row=row, now=now, refund=refund)
    # Whatever access had been prepared goes: the worker wipes it after this transaction (orders.wipes).
    wipe_mark_due(order, now=now, always=was is S.ACTIVE, actor=actor)
    release_booking(order, actor=actor, reason=f"refunded: {reason}")
    _credit_extensions(order, actor=actor, reason=reason, now=now, refund=refund)


def _credit_extensions(order: Order, *, actor: str, reason: str, now: datetime, refund: RefundInput) -> None:
    """A term refunded whole takes its applied extensions with it: each was paid by its own quote and invoiced on
    its own invoice (``orders.extensions``), and its days are gone with the term's booking. Each invoice is
    credited for what is still open, with no refund attached (like a service credit), so the money it settled
    is owed back on the extension's own order, in its own asset: its refund falls due and the queue lists it."""
    for extension in Order.objects.filter(extends=order, state=S.COMPLETED.value).order_by("pk"):
        locked = order_lock(extension)
        invoice = getattr(locked, "invoice", None)
        if invoice is None:
            continue
        open_amount = invoice.total - sum((n.amount for n in invoice.credit_notes.all()), Decimal(0))
        if open_amount > 0:
            credit_note_issue(invoice=invoice, amount=open_amount, reason=f"the term it extended was refunded: "
                              f"{reason}", actor=actor, now=now, customer_reason=CustomerReason.REFUND,
                              customer_reason_text=refund.customer_reason_text)
        note_excess(locked, actor, why=f"Order {order.reference}, which this extension lengthened, was refunded "
                    "whole: pay the extension's money back to the customer's refund address (a refund of money "
                    "owed back).")


def refund_record(*, order: Order, refund: RefundInput, actor: str, now: datetime | None = None,
                  watcher=None) -> Refund:
    """Record a refund the operator has sent. Where the asset is watched, the refund is then looked up on the
    chain (``refund_verify``); until it is found paying the address, the customer sees it as on its way."""
    reason = need_reason(refund.reason)
    now = now or timezone.now()
    if refund.amount <= 0 or refund.network_fee < 0:
        raise InvalidOrder(_("The amount must be a positive whole number of base units."), code="bad_amount")
    with transaction.atomic():
        locked = order_lock(order)
        quote = locked.quote
        network = refund_network(quote, refund.asset)
        sent_to, request = _destination(locked, refund, network)
        _check_scope(locked, refund, network)
        _customer_reason(locked, refund)
        try:
            txid = normalise_txid(refund.txid, chain=network.chain)
        except TxIdError as exc:
            raise InvalidOrder(message(exc), code="bad_txid") from None
        rate = _rate(locked, refund)
        # The rate is the price of one whole coin, the same coin on every network: the decimals are the network's.
        fiat = fiat_value(refund.amount, rate=rate, decimals=network.decimals).quantize(Decimal("0.01"),
                                                                                          rounding=ROUND_HALF_UP)
        if fiat >= MAX_FIAT:
            raise InvalidOrder(_("At that rate the refund would be worth %(fiat)s %(currency)s: check the rate.")
                               % {"fiat": fiat, "currency": quote.currency}, code="bad_rate")
        watched = _is_watched(network)
        try:
            with transaction.atomic():
                row = Refund.objects.create(order=locked, asset=network, address=sent_to, amount=refund.amount,
                                            fiat_amount=fiat, currency=quote.currency, rate=rate,
                                            rate_choice=refund.rate_choice, txid=txid, reason=reason,
                                            recorded_by=actor, whole_order=refund.whole_order,
                                            of_price=refund.of_price,
                                            network_fee=refund.network_fee, customer_request=request,
                                            verification={"status": "pending" if watched else "not_watched"})
        except IntegrityError:
            raise NotAllowedNow(_("A refund with this transaction id is already recorded."),
                                code="duplicate_refund") from None
        audit_record(actor=actor, action="refund_record", obj=locked, reason=reason,
                     data={"amount": str(refund.amount), "fiat": str(fiat), "rate": str(rate),
                           "rate_choice": refund.rate_choice, "txid": txid, "address": sent_to,
                           "network_fee": str(refund.network_fee), "refund": row.pk,
                           "scope": "whole" if refund.whole_order else "price" if refund.of_price else "excess",
                           "customer_request": request, "verify": row.verification["status"],
                           "asset": network.code, "network": network.network_name,
                           "decimals": network.decimals, "places": network.quoted_places})
        if refund.whole_order:
            _end_whole(locked, actor=actor, reason=reason, row=row, now=now, refund=refund)
        elif refund.of_price:
            _credit(locked, amount=fiat, reason=reason, actor=actor, row=row, now=now, refund=refund)
        note_excess(locked, actor)
    if watched:
        row = refund_verify(refund=row, actor=actor, watcher=watcher, now=now)
    return row


def _is_watched(asset) -> bool:
    from .transfers import is_watched

    return is_watched(asset)


# Outcomes after which looking again will not help: the operator corrects the record (the queue lists them).
_FINAL = set(REFUND_CHECK_FAILED)


def refund_verify(*, refund: Refund, actor: str = CHAIN, watcher=None, now: datetime | None = None) -> Refund:
    """Look the refund's transaction up on the chain: verified when it pays the refund address at least the
    amount recorded, in the order's asset. The chain is read before the row is locked. A node that cannot be
    read leaves it as it was, for the worker to try again."""
    now = now or timezone.now()
    asset = refund.asset
    try:
        watcher = watcher or watcher_for(asset, timeout=settings.ANCHORGPU_WATCH_CLAIM_TIMEOUT)
        if watcher is None:
            return refund
        found = watcher.lookup(refund.txid, watch_key(refund.address))
    except ChainUnavailable as exc:
        log.info("refund %s of %s could not be checked: %s", refund.txid, refund.order_id, exc)
        return refund
    paid = sum(t.amount for t in found.transfers) if found.outcome is LookupOutcome.FOUND else 0
    confirmations = min((t.confirmations(found.tip or 0) for t in found.transfers), default=0)
    if found.outcome is not LookupOutcome.FOUND:
        status = found.outcome.value
    elif paid < refund.amount:
        status = "short"
    elif confirmations < max(1, asset.confirmations_required):
        # In the mempool (a Bitcoin transaction may still be replaced) or too few blocks deep: looked at again.
        status = "confirming"
    else:
        status = "verified"
    with transaction.atomic():
        locked = order_lock(refund.order_id)
        row = Refund.objects.select_for_update().get(pk=refund.pk)
        if row.verified_at is not None:
            return row
        row.verification = {"status": status, "paid": str(paid), "checked_at": now.isoformat(),
                            "checks": int(row.verification.get("checks", 0)) + 1, "tip": found.tip,
                            "confirmations": confirmations}
        if status == "verified":
            row.verified_at = now
            audit_record(actor=actor, action="refund_verified", obj=locked,
                         data={"refund": row.pk, "txid": row.txid, "amount": str(row.amount), "paid": str(paid),
                               "address": row.address, "confirmations": confirmations,
                               "asset": asset.code, "network": asset.network_name, "decimals": asset.decimals,
                               "places": asset.quoted_places})
            notify.refund_sent(locked.pk)
        elif status in _FINAL:
            log.warning("refund %s of order %s does not hold up on chain: %s", row.txid, locked.reference, status)
        row.save(update_fields=["verification", "verified_at"])
    return row


def refunds_verify_due(*, now: datetime | None = None, every: timedelta = timedelta(minutes=1),
                       limit: int = 50) -> int:
    """The worker's sweep: check again the refunds of watched assets that the chain has not shown yet."""
    now = now or timezone.now()
    done = 0
    candidates = (Refund.objects.filter(verified_at__isnull=True, created_at__gt=now - timedelta(days=30))
                  .exclude(verification__status__in=["not_watched", *_FINAL]).select_related("asset", "order")
                  .order_by("created_at")[: limit * 2])
    for refund in candidates:
        checked = refund.verification.get("checked_at")
        if checked and datetime.fromisoformat(checked) > now - every:
            continue
        try:
            refund_verify(refund=refund, now=now)
        except Exception:  # noqa: BLE001 - one refund's failure must not stop the others' checks
            log.exception("refund check of %s failed", refund.pk)
        done += 1
        if done >= limit:
            break
    return done
