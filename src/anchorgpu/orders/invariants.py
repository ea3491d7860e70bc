"""A scan of the whole database for the promises the shop exists to keep (DESIGN §4–6):

* one card, one customer: no order is paid, preparing access or active without a live, confirmed booking of
  its own, and no device has two live bookings whose periods overlap;
* no paid time lost: such an order's term is as long as bought and lies inside its booking;
* one transfer, one credit: no transaction is credited to two orders unless the chain proved which output pays
  which order (the watcher read it) or an operator stated it.

The database refuses most of this by itself (orders migration 0008, allocation migration 0002); the scan is
the check that nothing got past, run by the test suite after its race and fault tests and by operators with
``anchorgpu invariants``. Each finding is a sentence an operator can act on.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.db.models import Count, Q

from anchorgpu.allocation.models import Booking, BookingDevice
from anchorgpu.payments.models import Transfer

from .models import Order
from .states import NEEDS_CONFIRMED_BOOKING


def orders_without_their_booking() -> list[str]:
    live = Q(booking__state=Booking.State.LIVE, booking__kind=Booking.Kind.CONFIRMED)
    rows = (Order.objects.filter(state__in=[s.value for s in NEEDS_CONFIRMED_BOOKING]).exclude(live)
            .values_list("reference", "state", "booking_id"))
    return [f"order {ref} is {state} without a live confirmed booking (booking {booking or 'none'})"
            for ref, state, booking in rows]


def bookings_without_their_cards() -> list[str]:
    """A live booking of an order that needs it, holding no live device slot: the cards would look free."""
    rows = (Order.objects.filter(state__in=[s.value for s in NEEDS_CONFIRMED_BOOKING],
                                 booking__state=Booking.State.LIVE)
            .exclude(booking__slots__live=True).values_list("reference", "booking_id"))
    return [f"booking {booking} of order {ref} holds no live card" for ref, booking in rows]


def terms_outside_their_booking() -> list[str]:
    """A term must be as long as bought and lie inside the cards booked for it (an as-soon-as-possible term
    slides inside a longer held period, never out of it: ``orders.term_slide``)."""
    found = []
    rows = (Order.objects.filter(state__in=[s.value for s in NEEDS_CONFIRMED_BOOKING],
                                 booking__state=Booking.State.LIVE)
            .values_list("reference", "term_days", "extended_days", "starts_at", "ends_at", "booking__starts_at",
                         "booking__ends_at"))
    for ref, bought, added, start, end, booked_from, booked_to in rows.iterator():
        days = bought + added  # the term as bought, plus the days its paid extensions added
        if end - start != timedelta(days=days):
            found.append(f"order {ref}: its term runs {end - start}, not the {days} days bought")
        if start < booked_from or end > booked_to:
            found.append(f"order {ref}: its term [{start:%Y-%m-%d %H:%M}, {end:%Y-%m-%d %H:%M}) is not inside "
                         f"its booking [{booked_from:%Y-%m-%d %H:%M}, {booked_to:%Y-%m-%d %H:%M})")
    return found


def overlapping_live_slots() -> list[str]:
    found = []
    slots = (BookingDevice.objects.filter(live=True).order_by("device_id", "starts_at", "id")
             .values_list("device_id", "booking_id", "starts_at", "ends_at"))
    last: dict[int, tuple[int, object]] = {}
    for device, booking, start, end in slots.iterator():
        before = last.get(device)
        if before is not None and start < before[1]:
            found.append(f"device {device}: live bookings {before[0]} and {booking} overlap")
        if before is None or end > before[1]:
            last[device] = (booking, end)
    return found


def transactions_credited_twice() -> list[str]:
    """A transaction may credit several orders only when every order but one got it by proof (read from the
    chain, each output to its own address) or by an operator's statement."""
    shared = (Transfer.objects.values("chain", "txid").order_by().annotate(orders=Count("order", distinct=True))
              .filter(orders__gt=1).values_list("chain", "txid"))
    found = []
    for chain, txid in shared:
        explained: dict[str, bool] = {}
        for ref, source, statement in (Transfer.objects.filter(chain=chain, txid=txid)
                                       .values_list("order__reference", "source", "shared_statement")):
            ok = source == Transfer.Source.WATCHER or bool(statement)
            explained[ref] = explained.get(ref, True) and ok
        unexplained = [ref for ref, ok in explained.items() if not ok]
        if len(unexplained) > 1:
            found.append(f"transaction {chain}:{txid} credits {', '.join(sorted(explained))} with no statement "
                         "of which output pays which order")
    return found


# The database's own checks (allocation migration 0002, orders migration 0008), by the name each database
# knows them under. A table rebuilt by a later SQLite migration would drop its triggers silently.
_CHECKS = {
    "postgresql": ("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgenabled <> 'D' "
                   "UNION SELECT conname FROM pg_constraint WHERE contype = 'x'",
                   {"order_needs_live_booking", "booking_keeps_its_order", "booking_slot_no_overlap"}),
    "sqlite": ("SELECT name FROM sqlite_master WHERE type = 'trigger'",
               {"order_needs_live_booking_insert", "order_needs_live_booking_update", "booking_keeps_its_order",
                "booking_slot_no_overlap_insert", "booking_slot_no_overlap_update"}),
}


def database_checks_missing() -> list[str]:
    query, wanted = _CHECKS.get(connection.vendor, ("", set()))
    if not query:
        return []
    with connection.cursor() as cursor:
        cursor.execute(query)
        present = {row[0] for row in cursor.fetchall()}
    return [f"the database's check {name} is missing: run the migrations again, or restore it"
            for name in sorted(wanted - present)]


def invariant_violations() -> list[str]:
    return [*database_checks_missing(), *orders_without_their_booking(), *bookings_without_their_cards(),
            *terms_outside_their_booking(), *overlapping_live_slots(), *transactions_credited_twice()]
