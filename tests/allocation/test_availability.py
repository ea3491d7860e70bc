"""``selectors.availability``: the live catalog's batched read gives, for every product at once, the answers of
``product_units``, ``units_free`` and ``earliest_start`` asked one product at a time, in a number of queries
that does not grow with the number of products."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from anchorgpu.allocation import search, selectors, services
from anchorgpu.allocation.models import Booking, BookingDevice
from anchorgpu.allocation.periods import Period
from anchorgpu.catalog import offers
from anchorgpu.fleet.models import Host
from tests import factories as f

pytestmark = pytest.mark.django_db

DAY, HOUR = timedelta(days=1), timedelta(hours=1)


def _write(devices, start, end, *, kind=Booking.Kind.CONFIRMED, expires_at=None, live=True, product=None):
    booking = Booking.objects.create(kind=kind, product=product, quantity=len(devices), starts_at=start, ends_at=end,
                                     expires_at=expires_at, state=Booking.State.LIVE if live else
                                     Booking.State.RELEASED)
    BookingDevice.objects.bulk_create([BookingDevice(booking=booking, device=d, starts_at=start, ends_at=end,
                                                     expires_at=expires_at, live=live) for d in devices])


def _busy_fleet(seed: int, now):
    """Three products (one sold in NVLink pairs), a host in maintenance status, a maintenance window, and
    random confirmed terms, live and expired holds and released bookings, some far into the year."""
    rng = random.Random(seed)
    single, other = f.product(), f.product()
    lots = f.product(cards_per_unit=2, stack="blackwell")
    hosts = [f.host(single, cards=4), f.host(single, cards=2), f.host(other, cards=3), f.host(lots, cards=4),
             f.host(lots, cards=4)]
    f.host(other, cards=2, status=Host.Status.MAINTENANCE)
    off_sale = f.host(single, cards=2)  # taken off sale by discovery: counted nowhere
    Host.objects.filter(pk=off_sale.pk).update(sale_block="discovery: cards not as sold")
    services.host_enter_maintenance(host=hosts[1], start=now + 5 * DAY, end=now + 9 * DAY, actor="ops",
                                    reason="cooling", now=now)
    for host in hosts:
        devices = list(host.devices.order_by("index"))
        for device in devices:
            cursor = now - 2 * DAY
            for _ in range(rng.randint(0, 6)):
                start = cursor + rng.choice([0, 1, 3, 20]) * DAY + rng.randint(0, 30) * HOUR
                end = start + rng.choice([3, 7, 30, 90]) * DAY
                cursor = end
                if host == hosts[1] and start < now + 9 * DAY and end > now + 5 * DAY:
                    continue  # the maintenance window holds these devices then
                kind = rng.choice(["confirmed", "confirmed", "hold", "expired hold", "released"])
                if kind == "hold":
                    _write([device], start, end, kind=Booking.Kind.HOLD, expires_at=now + HOUR)
                elif kind == "expired hold":
                    _write([device], start, end, kind=Booking.Kind.HOLD, expires_at=now - HOUR)
                elif kind == "released":
                    _write([device], start, end, live=False)
                else:
                    _write([device], start, end)
    return [single, other, lots]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_batched_read_answers_as_the_one_product_selectors_do(seed):
    now = f.now_minute()
    products = _busy_fleet(seed, now)
    for term in (3, 7, 30):
        for quantity in (1, 2, 5):
            for not_before in (now, now + 20 * DAY, now + 200 * DAY, now + 400 * DAY):
                found = selectors.availability(products, quantity=quantity, term_days=term,
                                               not_before=not_before, now=now)
                for p in products:
                    expected = (len(selectors.product_units(p)),
                                len(selectors.units_free(p, Period(now, now + term * DAY), now=now)),
                                selectors.earliest_start(p, quantity=quantity, term_days=term, not_before=not_before,
                                                         now=now))
                    got = found[p.pk]
                    assert (got.units_total, got.units_free_now, got.earliest_start) == expected, \
                        (seed, p.slug, term, quantity, not_before - now)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_units_found_with_the_earliest_start_are_those_free_for_its_term(seed):
    """What an order for "as soon as possible" places its hold on: the units ``earliest_free`` answers with
    its start are exactly those the database says are free for the whole term from it."""
    now = f.now_minute()
    products = _busy_fleet(seed, now)
    compared = 0
    for term in (3, 30):
        for quantity in (1, 2, 5):
            for not_before in (now, now + 20 * DAY, now + 200 * DAY):
                for p in products:
                    found = selectors.earliest_free(p, quantity=quantity, term_days=term, not_before=not_before,
                                                    now=now)
                    assert (found and found.start) == _full_read(p, quantity=quantity, term=term,
                                                                 not_before=not_before, now=now)
                    if found is None:
                        continue
                    free = selectors.units_free(p, Period(found.start, found.start + term * DAY), now=now)
                    assert sorted(u.key for u in found.units) == sorted(u.key for u in free)
                    assert len(found.units) >= quantity
                    compared += 1
    assert compared > 20


def test_the_earliest_free_units_skip_a_maintenance_window_that_has_no_device_rows():
    """A maintenance window is a booking of the host; a card added to the host after it was planned has no
    row of its own under it, and is still not free during it."""
    now = f.now_minute()
    p = f.product("h100", name="H100 SXM")
    host = f.host(p, cards=2)
    Booking.objects.create(kind=Booking.Kind.MAINTENANCE, state=Booking.State.LIVE, host=host, quantity=0,
                           starts_at=now, ends_at=now + 5 * DAY, reason="new cooling")
    other = f.host(p, cards=1)
    _write(list(other.devices.all()), now, now + 8 * DAY)
    found = selectors.earliest_free(p, quantity=1, term_days=3, not_before=now, now=now)
    assert found.start == now + 5 * DAY
    assert sorted(u.key for u in found.units) == sorted(
        u.key for u in selectors.units_free(p, Period(found.start, found.start + 3 * DAY), now=now))
    assert {d for u in found.units for d in u.devices} == set(host.devices.values_list("pk", flat=True))


def test_the_queries_do_not_grow_with_the_number_of_products():
    now = f.now_minute()
    products = _busy_fleet(7, now)

    def count(some) -> int:
        with CaptureQueriesContext(connection) as queries:
            selectors.availability(some, quantity=1, term_days=7, not_before=now, now=now)
        return len(queries.captured_queries)

    assert count(products) == count(products[:1]) <= 4  # devices; slots and maintenance windows (+ their hosts)
    assert selectors.availability([], quantity=1, term_days=7, not_before=now, now=now) == {}


def test_the_offers_are_those_of_one_product_at_a_time():
    now = f.now_minute()
    products = _busy_fleet(11, now)
    prices = f.price_list({p: "2.00" for p in products})
    together = offers.offers(term_days=7, quantity=2, now=now)
    assert sorted(o.product.pk for o in together) == sorted(p.pk for p in products)
    for offer in together:
        alone = offers.offer_for(offer.product, term_days=7, quantity=2, now=now)
        assert alone == offer
    assert prices.currency == together[0].currency


def _full_read(product, *, quantity, term, not_before, now):
    """The earliest start from every live booking of the product at once: no windows."""
    busy = selectors.busy_by_device(product, after=not_before, now=now)
    found = search.earliest_start(selectors.product_units(product), busy, quantity=quantity,
                                  length=term * DAY, not_before=not_before)
    latest = now + timedelta(days=365)
    return found if found is not None and found <= latest else None


@pytest.mark.parametrize("seed", [4, 5])
def test_widened_windows_read_each_booking_once_and_answer_as_one_full_read(seed, monkeypatch, settings):
    """A product busy for months makes the search widen its window. Each wider read takes only the bookings
    that start past the last one: what the reads gather is, row for row, one read of the widest window (none
    twice), and the answer is that of reading every booking at once."""
    settings.ANCHORGPU_BOOKING_HORIZON_DAYS = 365
    # The windows of the Python search (the one on SQLite; PostgreSQL's, in SQL, is compared with it in
    # test_sweep_sql.py).
    monkeypatch.setattr(selectors, "_searched_in_sql", lambda _products: False)
    now = f.now_minute()
    products = _busy_fleet(seed, now)
    calls: list[tuple[list, dict, dict]] = []
    real = selectors._busy_of

    def recording(products, **kwargs):
        answer = real(products, **kwargs)
        calls.append((list(products), kwargs, answer))
        return answer

    monkeypatch.setattr(selectors, "_busy_of", recording)
    widened = 0
    for term in (3, 30):
        for quantity in (1, 2, 4):
            for p in products:
                calls.clear()
                got = selectors.earliest_start(p, quantity=quantity, term_days=term, not_before=now, now=now)
                assert got == _full_read(p, quantity=quantity, term=term, not_before=now, now=now)
                widened += len(calls) > 1
                _products, last, gathered = calls[-1]
                once = real([p], after=now, before=last["before"], now=now)
                assert _sorted(gathered) == _sorted(once)
            calls.clear()
            selectors.availability(products, quantity=quantity, term_days=term, not_before=now, now=now)
            pending, last, gathered = calls[-1]
            once = real(pending, after=now, before=last["before"], now=now)
            devices = set(once)
            assert _sorted({d: gathered[d] for d in devices}) == _sorted(once)
    assert widened, "no search widened its window: the fleet is not busy enough for this test"


def _sorted(busy: dict) -> dict:
    return {device: sorted(periods) for device, periods in busy.items() if periods}
