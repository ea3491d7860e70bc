"""Availability reads. Expired holds stop counting the moment they expire:
every read filters them out by time, whether or not the worker has marked
them yet.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from anchorgpu.catalog.models import Product
from anchorgpu.fleet.models import Device, Host

from . import free_sql, rules, search, sweep_sql
from .models import Booking, BookingDevice
from .periods import Period
from .units import Unit, units_from_rows


def _live_at(now: datetime) -> Q:
    return Q(live=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))


def _bookable_devices(product: Product):
    return Device.objects.filter(host__product=product, host__status=Host.Status.ACTIVE, host__sale_block="")


def _maintenance_overlapping(period_start: datetime, period_end: datetime):
    return Booking.objects.filter(kind=Booking.Kind.MAINTENANCE, state=Booking.State.LIVE,
                                  starts_at__lt=period_end, ends_at__gt=period_start)


def _searched_in_sql(products) -> bool:
    """Whether the search runs in PostgreSQL (``sweep_sql``): there, for products of one or two cards per
    unit. The Python search is the reference, and the one on SQLite; the tests compare the two."""
    return connection.vendor == "postgresql" and all(p.cards_per_unit in (1, 2) for p in products)


def _first_window(length: timedelta) -> timedelta:
    return length + max(length, timedelta(days=7))


def product_units(product: Product) -> list[Unit]:
    rows = _bookable_devices(product).order_by().values_list("id", "host_id", "index", "nvlink_pair")
    return units_from_rows(rows, product.cards_per_unit)


def units_free(product: Product, period: Period, *, now: datetime | None = None) -> list[Unit]:
    """Units of ``product`` free for all of ``period``: one query, done by the database (on PostgreSQL the
    same statement sent without the ORM, ``free_sql``)."""
    now = now or timezone.now()
    if connection.vendor == "postgresql":
        rows = free_sql.free_devices(product.pk, start=period.start, end=period.end, now=now)
        return units_from_rows(rows, product.cards_per_unit)
    return _units_free_orm(product, period, now=now)


def _units_free_orm(product: Product, period: Period, *, now: datetime) -> list[Unit]:
    busy = BookingDevice.objects.filter(_live_at(now), device=OuterRef("pk"),
                                        starts_at__lt=period.end, ends_at__gt=period.start)
    in_maintenance = _maintenance_overlapping(period.start, period.end).filter(host=OuterRef("host_id"))
    rows = (_bookable_devices(product)
            .filter(~Exists(busy), ~Exists(in_maintenance))
            .order_by()
            .values_list("id", "host_id", "index", "nvlink_pair"))
    return units_from_rows(rows, product.cards_per_unit)


def busy_by_device(product: Product, *, after: datetime, before: datetime | None = None,
                   now: datetime | None = None) -> dict[int, list[Period]]:
    """Busy periods ending after ``after`` (and starting before ``before``,
    if given) of every bookable device of the product, including the
    maintenance windows of its hosts."""
    return _busy_of([product], after=after, before=before, now=now or timezone.now())


def _busy_of(products, *, after: datetime, before: datetime | None, now: datetime, since: datetime | None = None,
             into: dict[int, list[Period]] | None = None,
             devices: Mapping[int, Hashable] | None = None) -> dict[int, list[Period]]:
    """``busy_by_device`` for several products at once: the same rows, in two or three queries in all.

    A wider read after a narrower one passes ``since``, the narrower read's ``before`` (with the same
    ``after``), and its answer as ``into``: only the rows starting from ``since`` on are read, and added.

    ``devices`` (device id to host id) reads the busy periods of those devices, and of their hosts'
    maintenance windows, whatever their hosts' status now: a search that read its units first then reads the
    bookings of exactly those units, even when a host leaves sale between the two statements (in the
    writers' READ COMMITTED transactions each statement sees what had committed when it began)."""
    busy: dict[int, list[Period]] = defaultdict(list) if into is None else into
    until = Q() if before is None else Q(starts_at__lt=before)
    if since is not None:
        until &= Q(starts_at__gte=since)  # the rest ended after ``after`` and started before ``since``: read
    if devices is None:
        of_devices = Q(device__host__product__in=products, device__host__status=Host.Status.ACTIVE,
                       device__host__sale_block="")
        of_hosts = Q(host__product__in=products)
    else:
        of_devices, of_hosts = Q(device_id__in=list(devices)), Q(host_id__in=set(devices.values()))
    slots = (BookingDevice.objects.filter(_live_at(now), until, of_devices, ends_at__gt=after)
             .values_list("device_id", "starts_at", "ends_at"))
    for device_id, start, end in slots:
        busy[device_id].append(Period(start, end))
    windows = (Booking.objects.filter(until, of_hosts, kind=Booking.Kind.MAINTENANCE, state=Booking.State.LIVE,
                                      ends_at__gt=after)
               .order_by().values_list("host_id", "starts_at", "ends_at"))
    by_host: dict[int, list[Period]] = defaultdict(list)
    for host_id, start, end in windows:
        by_host[host_id].append(Period(start, end))
    if by_host:
        if devices is None:
            pairs = Device.objects.filter(host__product__in=products, host__status=Host.Status.ACTIVE,
                                          host__sale_block="",
                                          host_id__in=by_host).values_list("id", "host_id")
        else:
            pairs = devices.items()
        for device_id, host_id in pairs:
            if host_id in by_host:
                busy[device_id].extend(by_host[host_id])
    return busy


@dataclass(frozen=True)
class FreeStart:
    """The earliest start ``earliest_free`` found, and the units free for the whole term from it."""

    start: datetime
    units: list[Unit]


def earliest_start(product: Product, *, quantity: int, term_days: int, not_before: datetime,
                   now: datetime | None = None) -> datetime | None:
    """The first start from ``not_before`` on with ``quantity`` units free
    for the whole term, or None when there is none within the booking
    horizon (bookings may start at most that many days from now)."""
    if not _searched_in_sql([product]):
        found = earliest_free(product, quantity=quantity, term_days=term_days, not_before=not_before, now=now)
        return None if found is None else found.start
    now = now or timezone.now()
    latest = rules.latest_start(now, settings.ANCHORGPU_BOOKING_HORIZON_DAYS)
    if not_before > latest:
        return None
    length = timedelta(days=term_days)
    limit = latest + length  # bookings starting later cannot matter
    window = _first_window(length)
    while True:  # the windows of ``earliest_free``, each searched by one statement
        horizon = min(not_before + window, limit)
        found = sweep_sql.sweep([product.pk], now=now, after=not_before, before=horizon, length=length,
                                quantity=quantity, free_now=False)[product.pk].found
        if found is None or found > latest:
            return None
        if found + length <= horizon:  # always true once horizon == limit
            return found
        window = max(4 * window, 2 * (found + length - not_before))


def earliest_free(product: Product, *, quantity: int, term_days: int, not_before: datetime,
                  now: datetime | None = None) -> FreeStart | None:
    """``earliest_start``, with the units free for the term from it, from the same reads: what an order for
    "as soon as possible" places its hold on, under the product's turn (``services.hold_place``).

    Reads the bookings of a window after ``not_before`` only, and then the
    rest of a wider one when the answer does not fit inside it: bookings past
    the window cannot move an answer whose term ends inside it, nor free or
    take a unit for that term."""
    now = now or timezone.now()
    latest = rules.latest_start(now, settings.ANCHORGPU_BOOKING_HORIZON_DAYS)
    if not_before > latest:
        return None
    units = product_units(product)
    devices = {device: unit.host for unit in units for device in unit.devices}
    length = timedelta(days=term_days)
    limit = latest + length  # bookings starting later cannot matter
    window = _first_window(length)
    busy, read_to = None, None
    while True:
        horizon = min(not_before + window, limit)
        busy = _busy_of([product], after=not_before, before=horizon, now=now, since=read_to, into=busy,
                        devices=devices)
        read_to = horizon
        found = search.earliest_start(units, busy, quantity=quantity, length=length, not_before=not_before)
        if found is None or found > latest:
            return None
        if found + length <= horizon:  # always true once horizon == limit
            return FreeStart(found, search.free_units(units, busy, Period(found, found + length)))
        window = max(4 * window, 2 * (found + length - not_before))


@dataclass(frozen=True)
class Availability:
    units_total: int
    units_free_now: int  # units free for all of [now, now + term)
    earliest_start: datetime | None  # as ``earliest_start`` answers it


def _units_of(by_id: dict[int, Product]) -> dict[int, list[Unit]]:
    rows = (Device.objects.filter(host__product__in=list(by_id), host__status=Host.Status.ACTIVE, host__sale_block="")
            .order_by()
            .values_list("host__product_id", "id", "host_id", "index", "nvlink_pair"))
    devices: dict[int, list[tuple]] = defaultdict(list)
    for product_id, *device in rows:
        devices[product_id].append(device)
    return {pk: units_from_rows(devices[pk], product.cards_per_unit) for pk, product in by_id.items()}


def availability(products, *, quantity: int, term_days: int, not_before: datetime,
                 now: datetime) -> dict[int, Availability]:
    """For each product (by primary key): ``len(product_units)``, ``len(units_free)`` for the term from
    ``now``, and ``earliest_start`` from ``not_before`` (not before ``now``): the same answers, read for all
    the products together. The live catalog asks this for every product on sale. Like ``earliest_start``, it
    reads the bookings of a window from ``not_before`` and widens it for the products whose answer does not
    fit. On PostgreSQL each window is one statement that answers for every product (``sweep_sql``); elsewhere
    one query reads the devices, then two per window (a third when hosts are in maintenance), however many
    products there are, and two more for "free now" when the search starts later than now."""
    by_id = {product.pk: product for product in products}
    if not by_id:
        return {}
    not_before = max(not_before, now)
    latest = rules.latest_start(now, settings.ANCHORGPU_BOOKING_HORIZON_DAYS)
    length = timedelta(days=term_days)
    if _searched_in_sql(by_id.values()):
        return _availability_in_sql(by_id, quantity=quantity, length=length, not_before=not_before, now=now,
                                    latest=latest)
    limit = latest + length  # bookings starting later cannot matter
    units = _units_of(by_id)
    window = _first_window(length)
    first_term = Period(now, now + length)
    free_now: dict[int, int] | None = None
    if not_before > now:  # a dated search reads from its start; "free now" needs a read of its own
        busy = _busy_of(list(by_id.values()), after=now, before=first_term.end, now=now)
        free_now = {pk: len(search.free_units(units[pk], busy, first_term)) for pk in by_id}
    found_at: dict[int, datetime | None] = {pk: None for pk in by_id}
    pending = list(by_id) if not_before <= latest else []  # past the horizon nothing may start (free_now is read)
    busy, read_to = None, None
    while pending:
        horizon = min(not_before + window, limit)  # past now + term: the first read also answers "free now"
        busy = _busy_of([by_id[pk] for pk in pending], after=not_before, before=horizon, now=now, since=read_to,
                        into=busy)
        read_to = horizon
        if free_now is None:
            free_now = {pk: len(search.free_units(units[pk], busy, first_term)) for pk in by_id}
        wider, widen_to = [], window * 4
        for pk in pending:
            found = search.earliest_start(units[pk], busy, quantity=quantity, length=length, not_before=not_before)
            if found is not None and found <= latest and found + length > horizon:
                wider.append(pk)  # bookings past the window may move it: read a wider one
                widen_to = max(widen_to, 2 * (found + length - not_before))
            else:
                found_at[pk] = found if found is not None and found <= latest else None
        pending, window = wider, widen_to
    return {pk: Availability(units_total=len(units[pk]), units_free_now=free_now[pk], earliest_start=found_at[pk])
            for pk in by_id}


def _availability_in_sql(by_id: dict[int, Product], *, quantity: int, length: timedelta, not_before: datetime,
                         now: datetime, latest: datetime) -> dict[int, Availability]:
    """``availability`` on PostgreSQL: its windows, each searched for all the pending products at once by one
    statement; the first also counts the units, and those free now."""
    limit = latest + length
    window = _first_window(length)
    counted: dict[int, sweep_sql.Swept] = {}
    found_at: dict[int, datetime | None] = {pk: None for pk in by_id}
    pending = list(by_id)
    while pending:
        # Past the horizon nothing may start: one read, for the counts.
        horizon = max(min(not_before + window, limit), not_before + length)
        swept = sweep_sql.sweep(pending, now=now, after=not_before, before=horizon, length=length,
                                quantity=quantity, free_now=not counted)
        counted = counted or swept
        wider, widen_to = [], window * 4
        for pk in pending:
            found = swept[pk].found
            if not_before > latest or found is None or found > latest:
                continue
            if found + length > horizon:
                wider.append(pk)  # bookings past the window may move it: read a wider one
                widen_to = max(widen_to, 2 * (found + length - not_before))
            else:
                found_at[pk] = found
        pending, window = wider, widen_to
    return {pk: Availability(units_total=counted[pk].units_total, units_free_now=counted[pk].units_free_now,
                             earliest_start=found_at[pk]) for pk in by_id}


def live_slots_overlapping(device_ids, period: Period, *, now: datetime):
    return (BookingDevice.objects.filter(_live_at(now), device_id__in=device_ids,
                                         starts_at__lt=period.end, ends_at__gt=period.start)
            .select_related("booking"))


def maintenance_from(device_ids, *, after: datetime, until: datetime) -> datetime:
    """When the first live maintenance window of these devices' hosts that overlaps ``[after, until)``
    begins (``after`` if one is under way), else ``until``. A window counts as a whole: its device slots
    leave out what was booked when it was entered, and those bookings may end or shrink since."""
    first = (_maintenance_overlapping(after, until).filter(host__devices__in=list(device_ids))
             .order_by("starts_at").values_list("starts_at", flat=True).first())
    return until if first is None else max(after, min(first, until))


def free_until(device_ids, *, after: datetime, until: datetime, now: datetime, besides: int | None = None) -> datetime:
    """How far from ``after`` (up to ``until``) all of these devices stay free: the start of the first live
    booking of any of them after ``after`` (``besides`` one, the booking asking), or of a maintenance window
    of their hosts, else ``until``. A device whose host is not on sale is free for nothing more."""
    ids = list(device_ids)
    if until <= after:
        return after
    if Device.objects.filter(pk__in=ids).filter(~Q(host__status=Host.Status.ACTIVE) | ~Q(host__sale_block="")).exists():
        return after
    until = maintenance_from(ids, after=after, until=until)
    slots = BookingDevice.objects.filter(_live_at(now), device_id__in=ids, starts_at__lt=until, ends_at__gt=after)
    if besides is not None:
        slots = slots.exclude(booking_id=besides)
    first = slots.order_by("starts_at").values_list("starts_at", flat=True).first()
    return until if first is None else max(after, min(first, until))


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


def current_slots(booking_id: int):
    """The slots of a booking that run to its end: the cards it holds now and for the rest of its period. A
    move (``allocation.moves``) trims the slots of the cards it left to the moment of the move; those stay as
    history (and for the wipe of those cards), but are not the booking's cards any more."""
    return BookingDevice.objects.filter(booking_id=booking_id, ends_at=F("booking__ends_at"))
