"""Availability reads. Expired holds stop counting the moment they expire:
every read filters them out by time, whether or not the worker has marked
them yet.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from anchorgpu.catalog.models import Product
from anchorgpu.fleet.models import Device, Host

from . import rules, search
from .models import Booking, BookingDevice
from .periods import Period
from .units import Device as DeviceValue
from .units import Unit, units_from_devices


def _live_at(now: datetime) -> Q:
    return Q(live=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))


def _bookable_devices(product: Product):
    return Device.objects.filter(host__product=product, host__status=Host.Status.ACTIVE)


def _values(rows) -> list[DeviceValue]:
    return [DeviceValue(id=r[0], host=r[1], index=r[2], pair=r[3]) for r in rows]


def _maintenance_overlapping(period_start: datetime, period_end: datetime):
    return Booking.objects.filter(kind=Booking.Kind.MAINTENANCE, state=Booking.State.LIVE,
                                  starts_at__lt=period_end, ends_at__gt=period_start)


def product_units(product: Product) -> list[Unit]:
    rows = _bookable_devices(product).order_by().values_list("id", "host_id", "index", "nvlink_pair")
    return units_from_devices(_values(rows), product.cards_per_unit)


def units_free(product: Product, period: Period, *, now: datetime | None = None) -> list[Unit]:
    """Units of ``product`` free for all of ``period``: one query, done by the database."""
    now = now or timezone.now()
    busy = BookingDevice.objects.filter(_live_at(now), device=OuterRef("pk"),
                                        starts_at__lt=period.end, ends_at__gt=period.start)
    in_maintenance = _maintenance_overlapping(period.start, period.end).filter(host=OuterRef("host_id"))
    rows = (_bookable_devices(product)
            .filter(~Exists(busy), ~Exists(in_maintenance))
            .order_by()
            .values_list("id", "host_id", "index", "nvlink_pair"))
    return units_from_devices(_values(rows), product.cards_per_unit)


def busy_by_device(product: Product, *, after: datetime, before: datetime | None = None,
                   now: datetime | None = None) -> dict[int, list[Period]]:
    """Busy periods ending after ``after`` (and starting before ``before``,
    if given) of every bookable device of the product, including the
    maintenance windows of its hosts."""
    now = now or timezone.now()
    busy: dict[int, list[Period]] = defaultdict(list)
    until = Q() if before is None else Q(starts_at__lt=before)
    slots = (BookingDevice.objects.filter(_live_at(now), until, device__host__product=product,
                                          device__host__status=Host.Status.ACTIVE, ends_at__gt=after)
             .values_list("device_id", "starts_at", "ends_at"))
    for device_id, start, end in slots:
        busy[device_id].append(Period(start, end))
    windows = (Booking.objects.filter(until, kind=Booking.Kind.MAINTENANCE, state=Booking.State.LIVE,
                                      host__product=product, ends_at__gt=after)
               .order_by().values_list("host_id", "starts_at", "ends_at"))
    by_host: dict[int, list[Period]] = defaultdict(list)
    for host_id, start, end in windows:
        by_host[host_id].append(Period(start, end))
    if by_host:
        for device_id, host_id in _bookable_devices(product).filter(host_id__in=by_host).values_list("id", "host_id"):
            busy[device_id].extend(by_host[host_id])
    return busy


def earliest_start(product: Product, *, quantity: int, term_days: int, not_before: datetime,
                   now: datetime | None = None) -> datetime | None:
    """The first start from ``not_before`` on with ``quantity`` units free
    for the whole term, or None when there is none within the booking
    horizon (bookings may start at most that many days from now).

    Reads the bookings of a window after ``not_before`` only, and a wider one
    when the answer does not fit inside it: bookings past the window cannot
    move an answer whose term ends inside it."""
    now = now or timezone.now()
    latest = rules.latest_start(now, settings.ANCHORGPU_BOOKING_HORIZON_DAYS)
    if not_before > latest:
        return None
    units = product_units(product)
    length = timedelta(days=term_days)
    limit = latest + length  # bookings starting later cannot matter
    window = length + max(length, timedelta(days=7))
    while True:
        horizon = min(not_before + window, limit)
        busy = busy_by_device(product, after=not_before, before=horizon, now=now)
        found = search.earliest_start(units, busy, quantity=quantity, length=length, not_before=not_before)
        if found is None or found > latest:
            return None
        if found + length <= horizon:  # always true once horizon == limit
            return found
        window = max(4 * window, 2 * (found + length - not_before))


def live_slots_overlapping(device_ids, period: Period, *, now: datetime):
    return (BookingDevice.objects.filter(_live_at(now), device_id__in=device_ids,
                                         starts_at__lt=period.end, ends_at__gt=period.start)
            .select_related("booking"))


def live_customer_bookings(*, host_id: int | None = None, device_ids=None, now: datetime | None = None):
    """Holds and confirmed terms still to run (not ended, not expired) on a
    host or on some devices: what an inventory change would strand."""
    now = now or timezone.now()
    slots = BookingDevice.objects.filter(_live_at(now), ends_at__gt=now,
                                         booking__kind__in=[Booking.Kind.HOLD, Booking.Kind.CONFIRMED])
    if host_id is not None:
        slots = slots.filter(device__host_id=host_id)
    if device_ids is not None:
        slots = slots.filter(device_id__in=list(device_ids))
    return Booking.objects.filter(pk__in=slots.values("booking_id")).order_by("starts_at", "pk")
