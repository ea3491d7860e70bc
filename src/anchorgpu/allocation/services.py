"""Allocation use cases. One transaction each, an audit row per state change.

The same code runs on SQLite and PostgreSQL:

* On SQLite every transaction starts with ``BEGIN IMMEDIATE`` (settings), so
  the availability check and the insert run under the database's single
  write lock; triggers reject an overlap anyway (migration 0002).
* On PostgreSQL every writer of a product's device slots (placement,
  maintenance) first locks the product's row, so they take turns per product
  and each reads availability after the previous one committed. Without
  that turn-taking, concurrent inserts of conflicting rows wait on each
  other inside the exclusion constraint check and deadlock; PostgreSQL
  breaks each deadlock only after ``deadlock_timeout`` (1 s) and a deadlock
  is no progress, so 30 customers at once livelock. The exclusion
  constraint stays the backstop: a violation (or deadlock) rolls back the
  savepoint and the attempt is retried on fresh data.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import IntegrityError, OperationalError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.audit.services import SYSTEM, audit_record
from anchorgpu.catalog.models import Product
from anchorgpu.catalog.rules import RuleError, check_quantity, check_term
from anchorgpu.fleet.models import Host
from anchorgpu.i18n import message
from anchorgpu.orders.states import KEEPS_ITS_BOOKING

from . import placement, rules, selectors
from .errors import BookingOfLiveOrder, HoldExpired, InvalidBookingState, InvalidRequest, NoLongerAvailable, NoStartFree
from .models import Booking, BookingDevice
from .periods import Period, PeriodError

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 64

_OVERLAP_MARKERS = ("booking_slot_no_overlap", "booking overlap")
_RETRYABLE_SQLSTATES = {"23P01", "40P01", "40001"}  # exclusion, deadlock, serialization


def _is_conflict(error: Exception) -> bool:
    cause = error.__cause__
    if getattr(cause, "sqlstate", None) in _RETRYABLE_SQLSTATES:
        return True
    text = str(error)
    return any(marker in text for marker in _OVERLAP_MARKERS)


def _period(start: datetime, end: datetime) -> Period:
    try:
        return Period(start, end)
    except PeriodError as exc:
        raise InvalidRequest(message(exc)) from None


def _expire_stale_holds(now: datetime, *, actor: str = SYSTEM, only: int | None = None) -> int:
    """Mark holds whose expiry has passed (all, or just the hold ``only``);
    reads already ignore them by time, but their rows must stop counting for
    the database constraint too."""
    due = Booking.objects.filter(kind=Booking.Kind.HOLD, state=Booking.State.LIVE, expires_at__lte=now)
    if only is not None:
        due = due.filter(pk=only)
    stale = list(due.select_for_update(skip_locked=True).only("id")[:500])
    if not stale:
        return 0
    ids = [b.id for b in stale]
    Booking.objects.filter(id__in=ids).update(state=Booking.State.EXPIRED)
    BookingDevice.objects.filter(booking_id__in=ids).update(live=False)
    for booking in stale:
        audit_record(actor=actor, action="hold_expire", obj=booking, from_state="live", to_state="expired",
                     reason="payment window ended")
    return len(ids)


def _take_turn(product_id: int) -> None:
    """Wait for other slot writers of this product (a row lock until commit;
    FOR NO KEY UPDATE, so it does not block rows that merely reference the
    product). On SQLite the IMMEDIATE transaction already holds the lock."""
    Product.objects.select_for_update(no_key=True).only("pk").get(pk=product_id)


def _retrying(attempt_once):
    last: Exception | None = None
    for number in range(MAX_ATTEMPTS):
        try:
            with transaction.atomic():
                return attempt_once(retry=number > 0)
        except (IntegrityError, OperationalError) as exc:
            if not _is_conflict(exc):
                raise
            last = exc
            log.debug("booking conflict, retrying: %s", exc)
    raise NoLongerAvailable("The cards were taken by others while we tried; please try again.") from last


def _hold_create(*, product: Product, quantity: int, device_ids: list[int], period: Period, expires_at: datetime,
                 reference: str, actor: str, same_cards: bool = False) -> Booking:
    """The hold's booking and one slot per device, with its audit row; the caller has checked the cards in the
    product's turn."""
    booking = Booking.objects.create(kind=Booking.Kind.HOLD, product=product, quantity=quantity,
                                     starts_at=period.start, ends_at=period.end, expires_at=expires_at,
                                     reference=reference)
    BookingDevice.objects.bulk_create([
        BookingDevice(booking=booking, device_id=d, starts_at=period.start, ends_at=period.end,
                      expires_at=expires_at) for d in device_ids])
    audit_record(actor=actor, action="hold_place", obj=booking, to_state="live",
                 data={"product": product.slug, "quantity": quantity, "devices": device_ids,
                       "start": period.start.isoformat(), "end": period.end.isoformat(),
                       **({"same_cards": True} if same_cards else {})})
    return booking


def hold_place(*, product: Product, quantity: int, start: datetime | None, term_days: int, actor: str = SYSTEM,
               reference: str = "", hold_minutes: int | None = None, reach: timedelta = timedelta(0),
               now: datetime | None = None) -> Booking:
    """Reserve ``quantity`` units of ``product`` for ``[start, start + term)``
    until the hold expires (the payment window).

    ``start`` None is "as soon as possible": the earliest start with enough
    units free for the term, searched in the product's turn, on the data every
    earlier writer committed. An order for the earliest start then never loses
    to a concurrent one; it gets the next start (``NoStartFree`` when none is
    left within the horizon). A dated start that was taken in the meantime
    is refused with ``NoLongerAvailable``: that is the customer's choice to
    make again.

    ``reach`` holds the same cards past the term, as far as they are free up
    to that much longer: room for a term that slides to the moment access is
    ready (``allocation.slide``). The booking's period then runs from the
    start to that end; the term is the order's to place inside it."""
    now = now or timezone.now()
    try:
        check_quantity(quantity)
        check_term(term_days)
    except RuleError as exc:
        raise InvalidRequest(str(exc)) from None
    if not product.is_active:
        raise InvalidRequest(_("%(product)s is not on sale.") % {"product": product.name})
    if start is not None:
        _check_start(start, term_days, now)
    minutes = settings.ANCHORGPU_HOLD_MINUTES if hold_minutes is None else hold_minutes
    if minutes < 1:
        raise InvalidRequest("A hold must last at least one minute.")
    expires_at = now + timedelta(minutes=minutes)

    def attempt(retry: bool) -> Booking:
        _take_turn(product.pk)
        if retry:  # reads ignore stale holds by time; only the constraint still sees their rows
            _expire_stale_holds(now)
        if start is None:
            found = selectors.earliest_free(product, quantity=quantity, term_days=term_days, not_before=now, now=now)
            if found is None:
                raise NoStartFree(f"No start within the booking horizon has {quantity} unit(s) of {product.name} "
                                  f"free for {term_days} days.")
            period, free = Period(found.start, found.start + timedelta(days=term_days)), found.units
        else:
            period = Period(start, start + timedelta(days=term_days))
            free = selectors.units_free(product, period, now=now)
        try:
            chosen = placement.place(free, quantity)
        except placement.NotEnoughUnits as exc:
            raise NoLongerAvailable(
                f"No longer available: {exc.free} of the {quantity} unit(s) of {product.name} asked for "
                f"are free from {period.start:%Y-%m-%d %H:%M} UTC for {term_days} days.") from None
        device_ids = sorted(d for unit in chosen for d in unit.devices)  # one order everywhere: fewer deadlocks
        if reach > timedelta(0):
            period = Period(period.start, selectors.free_until(device_ids, after=period.end, until=period.end + reach,
                                                               now=now))
        return _hold_create(product=product, quantity=quantity, device_ids=device_ids, period=period,
                            expires_at=expires_at, reference=reference, actor=actor)

    return _retrying(attempt)


def hold_place_on(*, product: Product, device_ids, start: datetime, end: datetime, actor: str = SYSTEM,
                  reference: str = "", hold_minutes: int | None = None, now: datetime | None = None) -> Booking:
    """Hold exactly these devices of ``product`` for ``[start, end)`` until the hold expires: the same cards
    a term already has, for the days right after it (an extension, ``orders.extensions``). Checked in the
    product's turn with the selectors, the exclusion constraint (SQLite: the IMMEDIATE transaction and the
    triggers) as the backstop; a device busy for any of it is ``NoLongerAvailable``."""
    now = now or timezone.now()
    period = _period(start, end)
    ids = sorted(set(device_ids))
    if not ids:
        raise InvalidRequest("A hold needs at least one device.")
    minutes = settings.ANCHORGPU_HOLD_MINUTES if hold_minutes is None else hold_minutes
    if minutes < 1:
        raise InvalidRequest("A hold must last at least one minute.")
    expires_at = now + timedelta(minutes=minutes)
    units = len(ids) // max(1, product.cards_per_unit)

    def attempt(retry: bool) -> Booking:
        _take_turn(product.pk)
        if retry:
            _expire_stale_holds(now)
        free = selectors.free_until(ids, after=period.start, until=period.end, now=now)
        if free < period.end:
            raise NoLongerAvailable(f"No longer available: these cards are booked from {free:%Y-%m-%d %H:%M} UTC.")
        return _hold_create(product=product, quantity=units, device_ids=ids, period=period, expires_at=expires_at,
                            reference=reference, actor=actor, same_cards=True)

    return _retrying(attempt)


def _check_start(start: datetime, term_days: int, now: datetime) -> None:
    period = _period(start, start + timedelta(days=term_days))
    horizon = settings.ANCHORGPU_BOOKING_HORIZON_DAYS
    problem = rules.start_problem(period.start, now=now, horizon_days=horizon)
    if problem is rules.StartProblem.PAST:
        raise InvalidRequest(_("The start is in the past; choose now or a later date."))
    if problem is rules.StartProblem.BEYOND_HORIZON:
        raise InvalidRequest(_("Bookings can start at most %(days)d days ahead.") % {"days": horizon})


def _lock(booking: Booking) -> Booking:
    return Booking.objects.select_for_update().get(pk=booking.pk)


def hold_confirm(*, booking: Booking, actor: str = SYSTEM, now: datetime | None = None) -> Booking:
    """Turn a live hold into a confirmed booking (the order is paid)."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _lock(booking)
        if locked.kind == Booking.Kind.HOLD and locked.state == Booking.State.EXPIRED:
            # The same answer whether or not the worker's sweep got there first.
            raise HoldExpired("The hold expired before it was confirmed; its cards may have been taken since.")
        if locked.kind != Booking.Kind.HOLD or locked.state != Booking.State.LIVE:
            raise InvalidBookingState(f"Only a live hold can be confirmed; booking #{locked.pk} is a "
                                      f"{locked.kind} booking in state “{locked.state}”.")
        expired = locked.expires_at <= now
        if expired:
            # Record the expiry (it is a fact either way), commit, then refuse.
            _expire_stale_holds(now, actor=actor, only=locked.pk)
        else:
            locked.kind = Booking.Kind.CONFIRMED
            locked.expires_at = None
            locked.save(update_fields=["kind", "expires_at"])
            locked.slots.update(expires_at=None)
            audit_record(actor=actor, action="hold_confirm", obj=locked, from_state="hold", to_state="confirmed")
    if expired:
        raise HoldExpired("The hold expired before it was confirmed; its cards may have been taken since.")
    return locked


def hold_extend(*, booking: Booking, until: datetime, actor: str, reason: str,
                now: datetime | None = None) -> bool:
    """Keep a live hold longer (a payment is on its way). Only a hold that is
    still live can be extended: once it is marked expired its cards may have
    been taken, and the constraint would refuse them to us anyway. Returns
    whether the hold now lasts until at least ``until``; never shortens one."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _lock(booking)
        if locked.kind != Booking.Kind.HOLD or locked.state != Booking.State.LIVE:
            return False
        if locked.expires_at >= until:
            return True
        if locked.expires_at <= now and selectors.live_slots_overlapping(
                list(locked.slots.values_list("device_id", flat=True)), Period(locked.starts_at, locked.ends_at),
                now=now).exclude(booking=locked).exists():
            return False  # run out by time and its cards promised to someone else
        before = locked.expires_at
        locked.expires_at = until
        locked.save(update_fields=["expires_at"])
        locked.slots.update(expires_at=until)
        audit_record(actor=actor, action="hold_extend", obj=locked, reason=reason,
                     data={"from": before.isoformat(), "until": until.isoformat()})
    return True


def booking_stretch(*, booking: Booking, until: datetime, actor: str, reason: str,
                    now: datetime | None = None) -> Booking:
    """Keep a live hold's or term's cards until ``until``, or as far towards it as they are free (a term
    that slides later needs them longer). Never shortens; returns the booking with its new end. Runs in the
    product's turn like every writer of its slots, the exclusion constraint as the backstop."""
    now = now or timezone.now()

    def attempt(retry: bool) -> Booking:
        _take_turn(booking.product_id)
        if retry:
            _expire_stale_holds(now)
        locked = _lock(booking)
        if locked.state != Booking.State.LIVE or locked.kind not in (Booking.Kind.HOLD, Booking.Kind.CONFIRMED):
            raise InvalidBookingState(f"Booking #{locked.pk} is a {locked.kind} booking in state “{locked.state}”; "
                                      "only a live hold or term can be stretched.")
        if until <= locked.ends_at:
            return locked
        devices = list(selectors.current_slots(locked.pk).values_list("device_id", flat=True))
        end = selectors.free_until(devices, after=locked.ends_at, until=until, now=now, besides=locked.pk)
        if end > locked.ends_at:
            before = locked.ends_at
            locked.slots.filter(ends_at=before).update(ends_at=end)
            locked.ends_at = end
            locked.save(update_fields=["ends_at"])
            audit_record(actor=actor, action="booking_stretch", obj=locked, reason=reason,
                         data={"from": before.isoformat(), "to": end.isoformat(), "wanted": until.isoformat()})
        return locked

    return _retrying(attempt)


def booking_trim(*, booking: Booking, end: datetime, actor: str, reason: str) -> Booking:
    """Let a live booking's cards go from ``end`` on (the rest of a held period a term did not need).
    Never lengthens; a shorter period cannot conflict with anyone."""
    with transaction.atomic():
        locked = _lock(booking)
        if locked.state != Booking.State.LIVE:
            raise InvalidBookingState(f"Booking #{locked.pk} is {locked.state}; only a live booking can be trimmed.")
        if end >= locked.ends_at:
            return locked
        _period(locked.starts_at, end)  # refuses an empty period
        before = locked.ends_at
        locked.slots.filter(ends_at__gt=end).update(ends_at=end)
        locked.ends_at = end
        locked.save(update_fields=["ends_at"])
        audit_record(actor=actor, action="booking_trim", obj=locked, reason=reason,
                     data={"from": before.isoformat(), "to": end.isoformat()})
    return locked


def _order_counting_on(booking: Booking):
    """The order whose cards ``booking`` holds while that order still counts on them, else None. The order
    model lives above this layer; its reverse accessor is read without importing it."""
    try:
        order = booking.order
    except ObjectDoesNotExist:
        return None
    return order if order.state in {state.value for state in KEEPS_ITS_BOOKING} else None


def _release(booking: Booking, *, kinds: set[str], actor: str, reason: str, action: str,
             for_order: bool = False) -> Booking:
    with transaction.atomic():
        locked = _lock(booking)
        if locked.kind not in kinds or locked.state != Booking.State.LIVE:
            raise InvalidBookingState(f"Booking #{locked.pk} is a {locked.kind} booking in state “{locked.state}”; "
                                      f"it cannot be released here.")
        order = None if for_order else _order_counting_on(locked)
        if order is not None:
            raise BookingOfLiveOrder(
                f"Booking #{locked.pk} holds the cards of order {order.reference}, which is {order.state}. "
                "Releasing the booking alone would give those cards to another customer while the order keeps "
                "them: cancel, end or refund the order instead (its admin page has the tools), and the booking is "
                "released with it.")
        locked.state = Booking.State.RELEASED
        locked.reason = reason
        locked.save(update_fields=["state", "reason"])
        locked.slots.update(live=False)
        audit_record(actor=actor, action=action, obj=locked, from_state="live", to_state="released", reason=reason)
    return locked


def hold_release(*, booking: Booking, actor: str = SYSTEM, reason: str = "", for_order: bool = False) -> Booking:
    return _release(booking, kinds={Booking.Kind.HOLD}, actor=actor, reason=reason, action="hold_release",
                    for_order=for_order)


def booking_release(*, booking: Booking, actor: str, reason: str, for_order: bool = False) -> Booking:
    """Release any live booking (a cancelled or refunded term, an ended maintenance window).

    A booking whose order still counts on it (awaiting payment, paid, active…) is refused unless the caller is
    the order service that ends that order in the same transaction (``for_order=True``): the order and its
    cards are let go together, or not at all (DESIGN §4)."""
    if not reason.strip():
        raise InvalidRequest("Say why the booking is released.")
    return _release(booking, kinds=set(Booking.Kind.values), actor=actor, reason=reason, action="booking_release",
                    for_order=for_order)


def hold_expire_due(*, now: datetime | None = None) -> int:
    """The worker's sweep: mark every hold whose payment window has ended."""
    now = now or timezone.now()
    total = 0
    while True:
        with transaction.atomic():
            count = _expire_stale_holds(now)
        total += count
        if count == 0:
            return total


@dataclass(frozen=True)
class MaintenanceResult:
    booking: Booking
    hits: list[Booking]  # live bookings inside the window, for the operator to move


def host_enter_maintenance(*, host: Host, start: datetime, end: datetime, actor: str, reason: str,
                           now: datetime | None = None) -> MaintenanceResult:
    """Block ``host`` for ``[start, end)``. New bookings are refused for the
    window; live bookings already inside it are not touched but returned, so
    the operator can move them. The host's devices are booked for every part
    of the window that those bookings leave free."""
    now = now or timezone.now()
    if not reason.strip():
        raise InvalidRequest("Say why the host goes into maintenance.")
    window = _period(start, end)
    if window.end <= now:
        raise InvalidRequest("The maintenance window has already ended.")
    if window.start > now + rules.MAINTENANCE_AHEAD:
        raise InvalidRequest(f"A maintenance window starts at most {rules.MAINTENANCE_AHEAD.days} days from now.")
    if window.end - max(window.start, now) > rules.MAX_MAINTENANCE:
        raise InvalidRequest(f"A maintenance window lasts at most {rules.MAX_MAINTENANCE.days} days; "
                             "retire a host that is out for longer.")

    def attempt(retry: bool) -> MaintenanceResult:
        _take_turn(host.product_id)
        Host.objects.select_for_update().get(pk=host.pk)
        _expire_stale_holds(now)
        device_ids = list(host.devices.values_list("id", flat=True))
        busy: dict[int, list[Period]] = {d: [] for d in device_ids}
        hits: dict[int, Booking] = {}
        for slot in selectors.live_slots_overlapping(device_ids, window, now=now):
            busy[slot.device_id].append(Period(slot.starts_at, slot.ends_at))
            if slot.booking.kind != Booking.Kind.MAINTENANCE:
                hits[slot.booking_id] = slot.booking
        booking = Booking.objects.create(kind=Booking.Kind.MAINTENANCE, host=host, starts_at=window.start,
                                         ends_at=window.end, reason=reason)
        BookingDevice.objects.bulk_create([
            BookingDevice(booking=booking, device_id=d, starts_at=piece.start, ends_at=piece.end)
            for d in sorted(device_ids) for piece in window.minus(busy[d])])
        audit_record(actor=actor, action="host_enter_maintenance", obj=booking, to_state="live", reason=reason,
                     data={"host": host.name, "start": window.start.isoformat(), "end": window.end.isoformat(),
                           "hits": sorted(hits)})
        return MaintenanceResult(booking, sorted(hits.values(), key=lambda b: (b.starts_at, b.pk)))

    return _retrying(attempt)
