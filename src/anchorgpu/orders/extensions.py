"""Extending a paid term on the same cards (issue 25): the data stays on the same machine.

An extension is an order of its own that ``extends`` the order it lengthens: the same customer, product,
quantity, environment and options, for 3, 7 or 30 days from the end of the cards the term holds, priced from
the current price list with that term's discount, with its own VAT decision, quote, "I've paid", watchers and
invoice. Its booking is a hold on exactly the cards of the order it extends (``allocation.hold_place_on``).

* ``order_extend`` places it (the order's row locked, so two extensions of one order take turns; the
  product's turn and the exclusion constraint keep it from racing a new order for the same cards).
* An unpaid extension expires like any quote (``lifecycle.orders_expire_due``) and its hold goes with it.
* Paid (on time, late with the cards still free, or marked paid by an operator), ``payments.services`` secures
  its cards with ``extension_secure`` and issues its invoice, then ``extension_apply`` adds it to the order in
  the same transaction: the extension is completed ("added to order X"), its booking released, the order's
  booking stretched over the released days (release first, so the constraint never sees an overlap), the
  order's end moved, and its end-of-term reminders re-armed. A late payment whose cards were taken, or whose
  order has ended, goes to the operators' refund queue like any late payment.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation import services as allocation
from anchorgpu.allocation.errors import HoldExpired, InvalidRequest, NoLongerAvailable
from anchorgpu.allocation.models import Booking
from anchorgpu.audit.services import audit_record
from anchorgpu.billing import tax
from anchorgpu.billing.selectors import tax_decision
from anchorgpu.catalog import pricing
from anchorgpu.catalog.rules import TERM_DAYS, RuleError
from anchorgpu.catalog.selectors import NoPriceList, price_list_current
from anchorgpu.i18n import message
from anchorgpu.payments.models import Asset, PaymentSettings
from anchorgpu.payments.quotes import quote_create

from . import extension_options as options
from . import notify
from .errors import InvalidOrder, NotAllowedNow, Unavailable
from .extension_options import refusal_text
from .models import Order, OrderEmail, new_reference
from .services import _lines  # the checkout's own shape of price lines
from .states import OrderState
from .transitions import order_lock, order_transition

S = OrderState


def _price(order: Order, days: int, now: datetime) -> pricing.Price:
    try:
        prices = price_list_current(at=now)
        return pricing.price(prices, product=order.product.slug, product_name=order.product.name,
                             cards_per_unit=order.product.cards_per_unit, quantity=order.quantity, term_days=days,
                             options=list(order.option_slugs))
    except NoPriceList:
        raise Unavailable(_("The shop has no prices set right now; please try again later."),
                          code="no_prices") from None
    except RuleError as exc:
        raise InvalidOrder(message(exc)) from None


def extension_price(*, order: Order, days: int, now: datetime | None = None) -> pricing.Price:
    """What ``days`` more of ``order``'s term cost now (the current price list, that term's discount)."""
    _check_days(days)
    return _price(order, days, now or timezone.now())


def _check_days(days) -> int:
    if not isinstance(days, int) or isinstance(days, bool) or days not in TERM_DAYS:
        raise InvalidOrder(_("A term can be extended by %(terms)s days.")
                           % {"terms": ", ".join(map(str, TERM_DAYS))}, code="bad_days")
    return days


def _tax(order: Order) -> dict:
    """The extension's own VAT decision, under the operator's rules now, for the order's customer."""
    try:
        return tax_decision(country=str(order.country), business=order.business, vat_id=order.vat_id).as_data()
    except tax.TaxError as exc:
        raise InvalidOrder(_("We cannot take orders billed to this country yet (%(reason)s). Please write to us.")
                           % {"reason": message(exc)}, code="vat_not_set_up") from None


def order_extend(*, order: Order, days: int, actor: str, asset: Asset, now: datetime | None = None) -> Order:
    """Hold the same cards for ``days`` after ``order``'s term and record the extension with its quote, all in
    one transaction. Returns the extension (an order awaiting payment)."""
    days = _check_days(days)
    now = (now or timezone.now()).replace(microsecond=0)
    if not asset.is_active:
        raise InvalidOrder(_("That payment asset is no longer accepted."))
    payment = PaymentSettings.current()
    reference = new_reference()
    with transaction.atomic():
        parent = order_lock(order)  # two extensions of one order take turns here
        found = options.extension_options(parent, now=now)
        if found.refusal in (options.NOT_EXTENDABLE, options.PENDING):
            raise NotAllowedNow(refusal_text(found), code=found.refusal)
        if found.refusal == options.NOT_ON_SALE:
            raise Unavailable(refusal_text(found), code=found.refusal)
        if days not in found.days:
            raise Unavailable(refusal_text(found), code=found.refusal or "too_long")
        price = _price(parent, days, now)
        tax_data = _tax(parent)
        start, end = found.start, found.start + timedelta(days=days)
        try:
            hold = allocation.hold_place_on(product=parent.product, device_ids=options.extension_devices(parent),
                                            start=start, end=end, actor=actor, reference=reference,
                                            hold_minutes=payment.quote_minutes, now=now)
        except NoLongerAvailable:
            raise Unavailable(_("Someone else has just booked these cards after your term. Nothing was charged."),
                              code="taken") from None
        except InvalidRequest as exc:
            raise InvalidOrder(message(exc)) from None
        extension = Order.objects.create(
            reference=reference, user=parent.user, language=parent.language, product=parent.product,
            quantity=parent.quantity, term_days=days, start_asap=False, starts_at=start, ends_at=end,
            environment=parent.environment, option_slugs=list(parent.option_slugs), booking=hold, extends=parent,
            currency=price.currency, lines=_lines(price), fiat_total=price.total, name=parent.name,
            email=parent.email, company=parent.company, country=parent.country,
            billing_address=parent.billing_address, vat_id=parent.vat_id, business=parent.business, tax=tax_data,
            purpose=parent.purpose)
        audit_record(actor=actor, action="order_extend", obj=extension, to_state=extension.state,
                     data={"extends": parent.reference, "days": days, "total": str(price.total),
                           "currency": price.currency, "booking": hold.pk, "start": start.isoformat(),
                           "end": end.isoformat()})
        audit_record(actor=actor, action="extension_held", obj=parent,
                     data={"extension": reference, "days": days, "until": end.isoformat()})
        quote_create(order=extension, asset=asset, now=now, actor=actor, settings=payment)
        notify.order_placed(extension.pk)
    return extension


# --- paid: called by payments.services with the extension's row locked, inside its transaction ---------------

def _parent_takes(parent: Order, extension: Order) -> bool:
    """Whether ``parent`` can still take ``extension``: it runs (or is to run) on a live term whose cards end
    where the extension begins."""
    booking = parent.booking
    return (parent.order_state in options.EXTENDABLE and booking is not None
            and booking.state == Booking.State.LIVE and booking.kind == Booking.Kind.CONFIRMED
            and booking.ends_at == extension.starts_at)


def extension_secure(extension: Order, *, actor: str, now: datetime) -> bool:
    """The cards of a paid extension: its live hold confirmed, or (the hold ran out) the same cards held again
    if they are still free and the order it extends still runs up to it. False: a refund is due."""
    parent = order_lock(extension.extends_id)
    if not _parent_takes(parent, extension):
        return False
    booking = extension.booking
    cards = options.extension_devices(parent)
    if (booking is not None and booking.state == Booking.State.LIVE
            and sorted(booking.slots.values_list("device_id", flat=True)) != cards):
        # The term was moved to other cards since (``booking_move``): the extension follows it, if they are free.
        allocation.booking_release(booking=booking, actor=actor, for_order=True,
                                   reason=f"order {parent.reference} moved to other cards")
        booking = None
    if booking is not None and booking.state == Booking.State.LIVE:
        if booking.kind == Booking.Kind.CONFIRMED:
            return True
        if booking.kind == Booking.Kind.HOLD:
            try:
                extension.booking = allocation.hold_confirm(booking=booking, actor=actor, now=now)
                return True
            except HoldExpired:
                pass
    try:
        hold = allocation.hold_place_on(product=extension.product, device_ids=cards,
                                        start=extension.starts_at, end=extension.ends_at, actor=actor,
                                        reference=extension.reference, hold_minutes=5, now=now)
        hold = allocation.hold_confirm(booking=hold, actor=actor, now=now)
    except (NoLongerAvailable, InvalidRequest, HoldExpired):
        return False
    extension.booking = hold
    extension.save(update_fields=["booking", "updated_at"])
    audit_record(actor=actor, action="order_rebook", obj=extension, reason="hold had expired; the same cards "
                 "held again", data={"booking": hold.pk, "start": hold.starts_at.isoformat()})
    return True


def extension_apply(extension: Order, *, actor: str, now: datetime) -> Order:
    """Add a paid extension (state PAID, its cards confirmed, its invoice issued) to the order it extends.
    Returns that order, with its new end."""
    parent = order_lock(extension.extends_id)
    if not _parent_takes(parent, extension):  # extension_secure said yes in this same transaction
        raise NotAllowedNow(_("Order %(reference)s can no longer take this extension.")
                            % {"reference": parent.reference})
    order_transition(order=extension, to=S.COMPLETED, actor=actor,
                     reason=f"added to order {parent.reference}", data={"extends": parent.reference})
    # The "paid" email queued a moment ago in this transaction says less than the "added to order X" one.
    OrderEmail.objects.filter(order=extension, kind=OrderEmail.Kind.STATE_CHANGED, state=S.PAID.value,
                              sent_at__isnull=True).delete()
    allocation.booking_release(booking=extension.booking, actor=actor, for_order=True,
                               reason=f"extension added to order {parent.reference}")
    before = parent.ends_at
    stretched = allocation.booking_stretch(booking=parent.booking, until=extension.ends_at, actor=actor, now=now,
                                           reason=f"extended by {extension.reference}")
    if stretched.ends_at < extension.ends_at:  # its own cards, just released in this transaction: cannot happen
        raise NoLongerAvailable(f"booking {stretched.pk} could not be stretched to {extension.ends_at.isoformat()}")
    parent.booking = stretched
    parent.ends_at = before + timedelta(days=extension.term_days)
    parent.extended_days += extension.term_days
    parent.end_warned_at = parent.end_warned_hour_at = None  # the reminders are about the new end now
    parent.save(update_fields=["ends_at", "extended_days", "end_warned_at", "end_warned_hour_at", "updated_at"])
    invoice = getattr(extension, "invoice", None)
    audit_record(actor=actor, action="order_extended", obj=parent,
                 data={"extension": extension.reference, "days": extension.term_days, "from": before.isoformat(),
                       "to": parent.ends_at.isoformat(), "invoice": invoice.number if invoice else None})
    return parent


def later_start_refusal() -> str:
    """Why a late-paid extension cannot take a later start instead of a refund (it must follow its term)."""
    return _("An extension runs right after its term or not at all; it is refunded instead.")


def paid_segments(order: Order) -> list[tuple[datetime, datetime, object]]:
    """The paid periods of ``order`` in term order: its own term, then each applied extension, each with the
    invoice that paid it (None where none was issued). The own term is ``[starts_at, ends_at)`` less the
    extensions' days."""
    from anchorgpu.billing.models import Invoice

    applied = list(options.extensions_applied(order))
    added = timedelta(days=sum(e.term_days for e in applied))
    own = Invoice.objects.filter(order=order).first()
    segments: list[tuple[datetime, datetime, object]] = [(order.starts_at, order.ends_at - added, own)]
    start = order.ends_at - added
    invoices = {i.order_id: i for i in Invoice.objects.filter(order__in=applied)}
    for extension in applied:
        end = start + timedelta(days=extension.term_days)
        segments.append((start, end, invoices.get(extension.pk)))
        start = end
    return segments
