"""Many customers at once: the database keeps the no-overlap invariant (both passes).

Each worker is a thread with its own Django connection; a barrier starts them together. Demand
is far above capacity, so most of them must lose, cleanly, with NoLongerAvailable.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection

from anchorgpu.allocation import services
from anchorgpu.allocation.errors import NoLongerAvailable, NoStartFree
from anchorgpu.allocation.models import Booking, BookingDevice
from anchorgpu.audit.models import AuditEntry
from anchorgpu.fleet.models import Device
from tests import factories as f

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db_race]

WORKERS = 32
HOUR, DAY = timedelta(hours=1), timedelta(days=1)

OVERLAPS = """
    SELECT a.id, b.id FROM allocation_bookingdevice a
    JOIN allocation_bookingdevice b
      ON a.device_id = b.device_id AND a.id < b.id
     AND a.starts_at < b.ends_at AND b.starts_at < a.ends_at
"""


def overlapping_live_rows(*, live_only: bool = True) -> list[tuple[int, int]]:
    """Every pair of live rows of one device whose periods overlap: one query over the whole table."""
    with connection.cursor() as cursor:
        cursor.execute(OVERLAPS + (" WHERE a.live AND b.live" if live_only else ""))
        return cursor.fetchall()


def run_together(jobs) -> list[tuple[str, object]]:
    """Run each job in its own thread and connection, all released by one barrier."""
    barrier = threading.Barrier(len(jobs))
    results: list[tuple[str, object] | None] = [None] * len(jobs)

    def worker(i: int, job) -> None:
        try:
            connection.ensure_connection()  # connect before the barrier, so the requests really collide
            barrier.wait(timeout=60)
            results[i] = ("granted", job())
        except BaseException as exc:  # noqa: BLE001 - every outcome is checked by the test
            results[i] = ("refused", exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, job), name=f"race-{i}", daemon=True)
               for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60  # the race takes about a second; this only guards against a hang
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    hung = [thread.name for thread in threads if thread.is_alive()]
    assert not hung, f"workers still running after 60 s (livelock?): {hung}"
    return results


def hold_job(product, quantity: int, start):
    def job():
        booking = services.hold_place(product=product, quantity=quantity, start=start, term_days=3,
                                      reference=f"race-{quantity}")
        return booking.pk
    return job


def check_outcome(jobs_spec, results, capacity: int) -> dict[int, int]:
    """Common assertions; returns {booking id: quantity} of the winners."""
    granted: dict[int, int] = {}
    losers: list[tuple[int, NoLongerAvailable]] = []
    for (quantity, _start), (outcome, value) in zip(jobs_spec, results):
        if outcome == "granted":
            granted[value] = quantity
        else:
            assert isinstance(value, NoLongerAvailable), f"unexpected {type(value).__name__}: {value!r}"
            losers.append((quantity, value))
    for quantity, error in losers:
        message = str(error)
        assert message.startswith("No longer available: "), message
        assert f"of the {quantity} unit(s)" in message, message
        assert error.code == "no_longer_available"
    units_granted = sum(granted.values())
    assert units_granted <= capacity
    # Grants only shrink what is free, so each loser must have wanted more than was left at the end.
    for quantity, _ in losers:
        assert quantity > capacity - units_granted
    assert losers, "demand exceeded capacity, someone must have lost"
    assert overlapping_live_rows() == []
    for booking_id, quantity in granted.items():
        booking = Booking.objects.get(pk=booking_id)
        assert (booking.kind, booking.state, booking.quantity) == ("hold", "live", quantity)
    assert AuditEntry.objects.filter(action="hold_place").count() == len(granted)
    return granted


def test_single_cards_many_workers_exactly_capacity_is_granted():
    p = f.product("h100", name="H100 SXM")
    big = f.host(p, cards=8)
    small = f.host(p, cards=4)
    base = f.now_minute() + HOUR
    small_devices = list(small.devices.order_by("index"))
    big_devices = list(big.devices.order_by("index"))
    # Two cards are paid for over the whole race; two more sit under a hold whose payment window
    # has passed but that no sweep has marked yet: those count as free.
    paid = Booking.objects.create(kind="confirmed", product=p, quantity=2, starts_at=base - DAY, ends_at=base + 10 * DAY)
    BookingDevice.objects.bulk_create([BookingDevice(booking=paid, device=d, starts_at=paid.starts_at,
                                                     ends_at=paid.ends_at) for d in small_devices[:2]])
    expired_at = f.now_minute() - timedelta(minutes=5)
    stale = Booking.objects.create(kind="hold", product=p, quantity=2, starts_at=base, ends_at=base + 3 * DAY,
                                   expires_at=expired_at)
    BookingDevice.objects.bulk_create([BookingDevice(booking=stale, device=d, starts_at=stale.starts_at,
                                                     ends_at=stale.ends_at, expires_at=expired_at)
                                       for d in big_devices[:2]])
    capacity = 10

    # 32 workers want 1, 2 or 3 cards for 3-day terms starting an hour apart: every two terms
    # overlap (all share [base + 31 h, base + 72 h)), so at most one term per card can win.
    spec = [(1 + i % 3, base + i * HOUR) for i in range(WORKERS)]
    assert sum(1 for q, _ in spec if q == 1) > capacity  # a one-card request must lose, so nothing is left over
    results = run_together([hold_job(p, q, start) for q, start in spec])

    granted = check_outcome(spec, results, capacity)
    assert sum(granted.values()) == capacity
    assert BookingDevice.objects.filter(booking__pk__in=granted, live=True).count() == capacity
    taken = set(BookingDevice.objects.filter(booking__pk__in=granted).values_list("device_id", flat=True))
    assert taken == {d.pk for d in big_devices + small_devices[2:]}
    assert set(BookingDevice.objects.filter(booking=paid, live=True).values_list("device_id", flat=True)) == {
        d.pk for d in small_devices[:2]}
    # Its cards were sold again for overlapping terms: the same self-join, dead rows included, sees
    # exactly those overlaps -- so the live-only query above had real rows to look at.
    stale_rows = set(BookingDevice.objects.filter(booking=stale).values_list("pk", flat=True))
    overlaps = overlapping_live_rows(live_only=False)
    assert overlaps and all(a in stale_rows or b in stale_rows for a, b in overlaps)
    # The stale hold is marked expired exactly once, by a winner during the race or by the sweep now.
    services.hold_expire_due()
    assert Booking.objects.get(pk=stale.pk).state == "expired"
    assert AuditEntry.objects.filter(action="hold_expire", object_id=str(stale.pk)).count() == 1


def test_lots_many_workers_take_whole_pairs_only():
    b200 = f.product("b200", cards_per_unit=2, stack="blackwell", name="B200 lot")
    f.host(b200, cards=8)    # 4 whole pairs
    partly = f.host(b200, cards=4)  # 2 pairs, one of them missing a card for the whole race
    base = f.now_minute() + HOUR
    lone_busy = partly.devices.get(index=0)
    other = Booking.objects.create(kind="confirmed", quantity=1, starts_at=base - DAY, ends_at=base + 10 * DAY)
    BookingDevice.objects.create(booking=other, device=lone_busy, starts_at=other.starts_at, ends_at=other.ends_at)
    capacity = 5

    spec = [(1 + i % 2, base + (i % 8) * HOUR) for i in range(WORKERS)]
    assert sum(1 for q, _ in spec if q == 1) > capacity
    results = run_together([hold_job(b200, q, start) for q, start in spec])

    granted = check_outcome(spec, results, capacity)
    assert sum(granted.values()) == capacity
    for booking_id, quantity in granted.items():
        pairs = Counter(Device.objects.filter(slots__booking_id=booking_id).values_list("host_id", "nvlink_pair"))
        assert len(pairs) == quantity and set(pairs.values()) == {2}, pairs  # both cards of each pair, or neither
    partner = partly.devices.get(index=1)
    assert not BookingDevice.objects.filter(device=partner).exists()  # a broken pair is never sold as a lot
    assert BookingDevice.objects.filter(booking__pk__in=granted).count() == 2 * capacity


def test_maintenance_during_a_rush_lists_every_booking_it_hits():
    p = f.product("h200", name="H200")
    down = f.host(p, cards=4)
    up = f.host(p, cards=4)
    base = f.now_minute() + HOUR
    window = (base - HOUR, base + 10 * DAY)  # covers every term in the race

    def maintenance():
        return services.host_enter_maintenance(host=down, start=window[0], end=window[1], actor="ops",
                                               reason="swap a failing card")

    spec = [(1 + i % 3, base + i * HOUR) for i in range(WORKERS - 1)]
    results = run_together([maintenance] + [hold_job(p, q, start) for q, start in spec])

    outcome, result = results[0]
    assert outcome == "granted", result
    granted = {}
    for (quantity, _), (outcome, value) in zip(spec, results[1:]):
        if outcome == "granted":
            granted[value] = quantity
        else:
            assert isinstance(value, NoLongerAvailable), f"unexpected {type(value).__name__}: {value!r}"
            assert str(value).startswith("No longer available: ") and f"of the {quantity} unit(s)" in str(value)
    assert overlapping_live_rows() == []
    on_down = set(BookingDevice.objects.filter(booking__pk__in=granted, device__host=down)
                  .values_list("booking_id", flat=True))
    # Holds placed before the window landed (even those only partly on the host) are listed for the
    # operator, untouched; none was placed on it after.
    assert {b.pk for b in result.hits} == on_down
    assert all(Booking.objects.get(pk=b).state == "live" for b in on_down)
    # A one-card request lost (there are more of them than cards), so the healthy host is full.
    assert BookingDevice.objects.filter(booking__pk__in=granted, device__host=up).count() == 4
    # The window blocks every card of the failing host for all the time the hits leave free.
    window_rows = BookingDevice.objects.filter(booking=result.booking)
    assert set(window_rows.values_list("device__host_id", flat=True)) == {down.pk}
    blocked = sum((r.ends_at - r.starts_at for r in window_rows), timedelta())
    held = sum((r.ends_at - r.starts_at for r in BookingDevice.objects.filter(booking__pk__in=on_down, device__host=down)),
               timedelta())
    assert blocked + held == 4 * (window[1] - window[0])


def test_as_soon_as_possible_never_loses_to_a_concurrent_order(settings):
    """Holds for the earliest start search it in the product's turn: each worker gets the earliest start
    left when its turn comes, so the terms stack up on the cards, and only what does not fit before the
    horizon is refused (NoStartFree, not "no longer available")."""
    settings.ANCHORGPU_BOOKING_HORIZON_DAYS = 10  # starts at now, +3, +6 and +9 days; +12 is past it
    p = f.product("h100", name="H100 SXM")
    f.host(p, cards=2)
    f.host(p, cards=1)
    now = f.now_minute()

    def asap():
        return services.hold_place(product=p, quantity=1, start=None, term_days=3, reference="asap", now=now).pk

    results = run_together([asap for _ in range(WORKERS)])

    granted = [value for outcome, value in results if outcome == "granted"]
    refused = [value for outcome, value in results if outcome == "refused"]
    assert all(isinstance(error, NoStartFree) for error in refused), refused
    assert len(granted) == 3 * 4 and len(refused) == WORKERS - 12  # 3 cards, 4 starts each
    starts = Counter(Booking.objects.filter(pk__in=granted).values_list("starts_at", flat=True))
    assert starts == {now + k * 3 * DAY: 3 for k in range(4)}
    assert overlapping_live_rows() == []
    assert AuditEntry.objects.filter(action="hold_place").count() == 12
