"""Reads about extending an order (``orders.extensions``): which of the terms still fit on the same cards right
after the term, and, when none does, until when the cards are free, or that the next booking starts at the
term's end. One answer for the order page, the API, the CLI and the service that places the extension."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation import selectors
from anchorgpu.allocation.models import Booking
from anchorgpu.catalog.rules import TERM_DAYS
from anchorgpu.formats import display

from .models import Order
from .states import OrderState

S = OrderState
# The orders a customer may extend: paid and still to run (upcoming, preparing access, or running).
EXTENDABLE = frozenset({S.PAID, S.PROVISIONING, S.ACTIVE})
# An extension still waiting for its payment keeps its hold: a second one would ask for the same cards.
UNPAID = frozenset({S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED, S.UNDERPAID})

# Why an order cannot be extended now (``ExtensionOptions.refusal``).
NOT_EXTENDABLE = "not_extendable"  # its state (completed, cancelled, unpaid…) or it is an extension itself
NOT_ON_SALE = "not_on_sale"  # the product is off sale: no current price for more days
PENDING = "pending"  # an extension of it waits for payment
BOOKED_AT_END = "booked_at_end"  # the next booking of its cards starts when the term ends
TOO_SHORT = "too_short"  # the cards are free after the term, but for less than the shortest term


@dataclass(frozen=True)
class ExtensionOptions:
    """What the order page (and the API) says about extending ``order``."""

    order: Order
    start: datetime | None  # where an extension would begin: the end of the cards the term holds
    days: tuple[int, ...]  # the terms that fit, shortest first (empty: none does)
    free_until: datetime | None  # how far after ``start`` the cards stay free (within the longest term)
    refusal: str = ""  # why none can be bought now ("" when some can)
    pending: Order | None = None  # the extension waiting for payment

    @property
    def possible(self) -> bool:
        return bool(self.days)

    @property
    def days_text(self) -> str:
        return ", ".join(map(str, self.days))

    def as_data(self) -> dict:
        return {"reference": self.order.reference, "extendable": self.possible, "days": list(self.days),
                "starts_at": self.start.isoformat() if self.start else None,
                "free_until": self.free_until.isoformat() if self.free_until else None,
                "refusal": self.refusal or None,
                "pending": self.pending.reference if self.pending is not None else None}


def _devices(booking: Booking) -> list[int]:
    return sorted(booking.slots.filter(live=True).values_list("device_id", flat=True))


def extension_pending(order: Order) -> Order | None:
    """An extension of ``order`` still waiting for its payment (with its hold), if any."""
    return (order.extensions.filter(state__in=[s.value for s in UNPAID]).order_by("-created_at").first())


def extension_devices(order: Order) -> list[int]:
    """The cards an extension of ``order`` holds: those of its own live booking."""
    booking = order.booking
    return _devices(booking) if booking is not None else []


def extension_options(order: Order, *, now: datetime | None = None) -> ExtensionOptions:
    now = now or timezone.now()
    booking = order.booking
    live = (booking is not None and booking.state == Booking.State.LIVE and booking.kind == Booking.Kind.CONFIRMED)
    if order.order_state not in EXTENDABLE or order.extends_id is not None or not live or order.ends_at <= now:
        return ExtensionOptions(order, None, (), None, NOT_EXTENDABLE)
    start = booking.ends_at
    pending = extension_pending(order)
    if pending is not None:
        return ExtensionOptions(order, start, (), None, PENDING, pending)
    longest = max(TERM_DAYS)
    free = selectors.free_until(_devices(booking), after=start, until=start + timedelta(days=longest), now=now,
                                besides=booking.pk)
    days = tuple(d for d in sorted(TERM_DAYS) if start + timedelta(days=d) <= free)
    if not order.product.is_active:
        return ExtensionOptions(order, start, (), free, NOT_ON_SALE)
    if days:
        return ExtensionOptions(order, start, days, free)
    return ExtensionOptions(order, start, (), free, BOOKED_AT_END if free <= start else TOO_SHORT)


def extensions_applied(order: Order):
    """The extensions paid and added to ``order``'s term, in term order."""
    return order.extensions.filter(state=S.COMPLETED.value).order_by("starts_at", "pk")


def refusal_text(found: ExtensionOptions) -> str:
    """The sentence the customer reads when ``found`` allows no extension (or not of the days asked for)."""
    order = found.order
    if found.refusal == NOT_EXTENDABLE:
        if order.extends_id:
            return _("This is an extension; extend order %(reference)s itself.") % {
                "reference": order.extends.reference}
        return _("Only a paid term that has not ended can be extended; this order is %(state)s.") % {
            "state": order.state_label}
    if found.refusal == PENDING:
        return _("Extension %(reference)s of this order is waiting for its payment; pay or cancel it first.") % {
            "reference": found.pending.reference}
    if found.refusal == NOT_ON_SALE:
        return _("%(product)s is no longer on sale, so the term cannot be extended.") % {
            "product": order.product.name}
    if found.refusal == BOOKED_AT_END:
        return _("This term cannot be extended: its cards are booked from %(time)s, when it ends.") % {
            "time": display.moment(found.start)}
    free = display.moment(found.free_until) if found.free_until else "?"
    if found.refusal == TOO_SHORT:
        return _("This term cannot be extended: its cards are free after it only until %(time)s, less than "
                 "the shortest term (%(days)d days).") % {"time": free, "days": min(TERM_DAYS)}
    return _("These cards are free after the term only until %(time)s: the term can be extended by "
             "%(days)s days.") % {"time": free, "days": ", ".join(map(str, found.days))}
