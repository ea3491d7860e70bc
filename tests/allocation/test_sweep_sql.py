"""The search done by PostgreSQL (``allocation.sweep_sql``) answers as the Python search does.

On PostgreSQL ``selectors.earliest_start`` and ``selectors.availability`` (the live catalog) search in one
statement per window. The reference is the Python search over every live booking read at once
(``search.earliest_start`` and ``search.free_units`` on ``busy_by_device``, no windows), on random fleets
whose bookings lie on an hour grid so that ends touch starts, gaps are exactly one term long and holds
expire at the very second asked about.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from anchorgpu.allocation import search, selectors, sweep_sql
from anchorgpu.allocation.models import Booking
from anchorgpu.allocation.periods import Period
from anchorgpu.fleet.models import Device, Host
from tests import factories as f
from tests.allocation.test_availability import _write

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]

DAY, HOUR = timedelta(days=1), timedelta(hours=1)
TERMS = (1, 3, 30)


def _fleet(seed: int, now):
    """Four products: single cards, NVLink lots (with a pair missing a partner and a pair of three cards,
    neither sellable), one with no host on sale; hosts in maintenance status; maintenance windows with and
    without device rows; confirmed terms, live, expired and just-expiring holds, released rows."""
    rng = random.Random(seed)
    single, other = f.product(), f.product()
    lots = f.product(cards_per_unit=2, stack="blackwell")
    empty = f.product()
    hosts = [f.host(single, cards=4), f.host(single, cards=3), f.host(other, cards=2), f.host(lots, cards=4),
             f.host(lots, cards=2)]
    f.host(other, cards=2, status=Host.Status.MAINTENANCE)
    off_sale = f.host(single, cards=2)  # taken off sale by discovery: counted nowhere
    Host.objects.filter(pk=off_sale.pk).update(sale_block="discovery: cards not as sold")
    f.host(empty, cards=2, status=Host.Status.RETIRED)
    odd = f.host(lots, cards=2)
    Device.objects.create(host=odd, index=2, uid=f"{odd.name}-gpu2", nvlink_pair=0)  # a pair of three
    Device.objects.create(host=odd, index=3, uid=f"{odd.name}-gpu3", nvlink_pair=7)  # no partner
    hosts.append(odd)
    for host in rng.sample(hosts, 2):  # a window with no device rows: cards the window holds anyway
        start = now + rng.randint(-30, 400) * HOUR
        Booking.objects.create(kind=Booking.Kind.MAINTENANCE, state=Booking.State.LIVE, host=host, quantity=0,
                               starts_at=start, ends_at=start + rng.randint(1, 100) * HOUR, reason="cooling")
    for host in hosts:
        for device in host.devices.order_by("index"):
            cursor = now - rng.randint(0, 100) * HOUR
            for _ in range(rng.randint(0, 8)):
                start = cursor + rng.choice([0, 0, 1, 24, 72, 24 * 30, 24 * 31]) * HOUR
                end = start + rng.choice([1, 24, 72, 24 * 7, 24 * 30]) * HOUR
                kind = rng.choice(["confirmed", "confirmed", "hold", "expired hold", "expiring now", "released"])
                if kind != "released":  # live rows of a device never overlap, expired or not
                    cursor = end
                if kind == "hold":
                    _write([device], start, end, kind=Booking.Kind.HOLD, expires_at=now + HOUR)
                elif kind == "expired hold":
                    _write([device], start, end, kind=Booking.Kind.HOLD, expires_at=now - HOUR)
                elif kind == "expiring now":  # expires at ``now``: no longer counts
                    _write([device], start, end, kind=Booking.Kind.HOLD, expires_at=now)
                elif kind == "released":
                    _write([device], start, end, live=False)
                else:
                    _write([device], start, end)
    return [single, other, lots, empty]


def _reference(product, *, quantity, term_days, not_before, now):
    """Units, units free for the term from now, earliest start: the Python search over every booking."""
    length = term_days * DAY
    units = selectors.product_units(product)
    free = search.free_units(units, selectors.busy_by_device(product, after=now, before=now + length, now=now),
                             Period(now, now + length))
    found = search.earliest_start(units, selectors.busy_by_device(product, after=not_before, now=now),
                                  quantity=quantity, length=length, not_before=not_before)
    latest = now + 365 * DAY
    if not_before > latest or (found is not None and found > latest):
        found = None
    return len(units), len(free), found


def _starts(rng: random.Random, now) -> list:
    return [now, now + HOUR, now + rng.randint(2, 300) * HOUR, now + 20 * DAY, now + 365 * DAY,
            now + 365 * DAY + HOUR]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_sql_search_answers_as_the_python_search_on_random_fleets(seed, settings):
    settings.ANCHORGPU_BOOKING_HORIZON_DAYS = 365
    now = f.now_minute()
    products = _fleet(seed, now)
    rng = random.Random(seed)
    compared = later = 0
    for term in TERMS:
        for quantity in (1, 2, 3, 6):
            for not_before in _starts(rng, now):
                found = selectors.availability(products, quantity=quantity, term_days=term, not_before=not_before,
                                               now=now)
                for p in products:
                    expected = _reference(p, quantity=quantity, term_days=term, not_before=not_before, now=now)
                    got = found[p.pk]
                    assert (got.units_total, got.units_free_now, got.earliest_start) == expected, \
                        (seed, p.slug, term, quantity, not_before - now)
                    assert selectors.earliest_start(p, quantity=quantity, term_days=term, not_before=not_before,
                                                    now=now) == expected[2]
                    alone = selectors.availability([p], quantity=quantity, term_days=term, not_before=not_before,
                                                   now=now)[p.pk]  # one product: its devices probed
                    assert alone == got
                    compared += expected[2] is not None
                    later += expected[2] is not None and expected[2] > max(now, not_before)
    assert compared > 100
    assert later > 20, "too few answers came from the sweep rather than the units free from the start"


def test_the_sql_search_is_the_one_used_here_and_python_stays_for_other_lots(monkeypatch):
    """On PostgreSQL the selectors search in SQL (so the test above compares two searches, not one with
    itself), for products of one or two cards per unit."""
    now = f.now_minute()
    products = _fleet(5, now)
    statements = []
    real = sweep_sql.sweep
    monkeypatch.setattr(sweep_sql, "sweep", lambda *a, **k: statements.append(k) or real(*a, **k))
    selectors.availability(products, quantity=1, term_days=3, not_before=now, now=now)
    selectors.earliest_start(products[0], quantity=1, term_days=3, not_before=now, now=now)
    assert len(statements) >= 2
    assert not selectors._searched_in_sql([f.product(cards_per_unit=4)])


def test_a_gap_of_exactly_one_term_fits_and_one_hour_less_does_not():
    now = f.now_minute()
    p = f.product()
    device = f.host(p, cards=1).devices.get()
    _write([device], now, now + DAY)
    _write([device], now + 4 * DAY, now + 5 * DAY)  # a gap of 3 days exactly
    _write([device], now + 7 * DAY - HOUR, now + 8 * DAY)  # then one of 2 days less an hour
    assert selectors.earliest_start(p, quantity=1, term_days=3, not_before=now, now=now) == now + DAY
    assert selectors.earliest_start(p, quantity=1, term_days=2, not_before=now + 2 * DAY, now=now) == now + 2 * DAY
    assert selectors.earliest_start(p, quantity=1, term_days=2, not_before=now + 3 * DAY, now=now) == now + 8 * DAY
    found = selectors.availability([p], quantity=1, term_days=1, not_before=now, now=now)[p.pk]
    assert (found.units_total, found.units_free_now, found.earliest_start) == (1, 0, now + DAY)


def test_the_statement_refuses_a_window_shorter_than_the_term():
    now = f.now_minute()
    with pytest.raises(ValueError):
        sweep_sql.sweep([1], now=now, after=now, before=now + DAY, length=2 * DAY, quantity=1)
    with pytest.raises(ValueError):
        sweep_sql.sweep([1], now=now, after=now - HOUR, before=now + 9 * DAY, length=DAY, quantity=1)
    with pytest.raises(ValueError):
        sweep_sql.sweep([1], now=now, after=now, before=now + 9 * DAY, length=DAY, quantity=0)
