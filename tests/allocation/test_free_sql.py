"""``selectors.units_free`` on PostgreSQL (``allocation.free_sql``) answers as its ORM query does.

The statement is sent without the ORM; the ORM query is the reference (and the read on SQLite). Both are
compared on the random fleets of test_sweep_sql.py, for periods on the hour grid of their bookings and off
it, from before now to past the horizon.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from anchorgpu.allocation import search, selectors
from anchorgpu.allocation.periods import Period
from tests import factories as f
from tests.allocation.test_sweep_sql import _fleet

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]

DAY, HOUR = timedelta(days=1), timedelta(hours=1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_statement_frees_the_units_the_orm_query_frees(seed):
    now = f.now_minute()
    products = _fleet(seed, now)
    rng = random.Random(seed)
    compared = busy = 0
    for _ in range(40):
        start = now + rng.randint(-48, 24 * 40) * HOUR + rng.choice([timedelta(0), timedelta(minutes=30)])
        period = Period(start, start + rng.choice([HOUR, DAY, 3 * DAY, 30 * DAY]))
        for p in products:
            got = selectors.units_free(p, period, now=now)
            assert got == selectors._units_free_orm(p, period, now=now), (seed, p.slug, period)
            if p.cards_per_unit == 1:  # the units of the search, free by the Python reckoning
                units = selectors.product_units(p)
                free = search.free_units(units, selectors.busy_by_device(p, after=period.start, before=period.end,
                                                                         now=now), period)
                assert got == free
            compared += 1
            busy += len(got) < len(selectors.product_units(p))
    assert compared == 160 and busy > 20
