"""``ops.pg_times``: timestamptz values read through psycopg's C loader are those Django's own loader gives,
and the C loader is only put on a connection whose time zones make that so."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import psycopg
import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import register_tzloader
from psycopg import pq

from anchorgpu.allocation.models import Booking
from anchorgpu.ops import pg_times

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]

MOMENTS = """SELECT x FROM (VALUES
    ('2026-11-30 21:04:05.123456+00'::timestamptz), ('2026-03-29 00:59:59.999999+00'), ('2026-03-29 01:00:00+00'),
    ('2026-10-25 01:30:00+01'), ('1970-01-01 00:00:00+00'), ('0001-01-01 00:00:00+00'), ('9999-12-31 23:59:59+00'),
    ('2024-02-29 12:00:00-09:30'), (NULL)) AS v(x)"""


def _loader_of(cursor):
    return cursor.adapters.get_loader(pg_times.TIMESTAMPTZ, pq.Format.TEXT)


def test_the_shops_connections_read_timestamptz_with_the_c_loader():
    connection.ensure_connection()
    assert connection.connection.adapters.get_loader(pg_times.TIMESTAMPTZ, pq.Format.TEXT) \
        is pg_times.UtcTimestamptzLoader
    assert not pg_times.c_loader().__module__.startswith("psycopg.types")  # the C extension, not pure Python
    with connection.cursor() as cursor:  # Django keeps the connection's loader (it agrees on the zone)
        assert _loader_of(cursor.cursor) is pg_times.UtcTimestamptzLoader


def test_it_reads_what_djangos_loader_reads():
    with connection.cursor() as ours:
        fast = ours.execute(MOMENTS).fetchall()
    with connection.cursor() as theirs:
        register_tzloader(timezone.utc, theirs.cursor)  # what Django puts on a connection in UTC
        assert _loader_of(theirs.cursor) is not pg_times.UtcTimestamptzLoader
        slow = theirs.execute(MOMENTS).fetchall()
    assert fast == slow and len(fast) == 9
    for (a,), (b,) in zip(fast, slow):
        if a is not None:
            assert a.tzinfo is timezone.utc and b.tzinfo is timezone.utc
            assert a.isoformat() == b.isoformat()
    assert fast[0][0] == datetime(2026, 11, 30, 21, 4, 5, 123456, tzinfo=timezone.utc)
    assert fast[3][0] == datetime(2026, 10, 25, 0, 30, tzinfo=timezone.utc)


def test_the_orm_round_trips_a_moment():
    moment = datetime(2026, 12, 1, 9, 30, 15, 250000, tzinfo=ZoneInfo("Asia/Seoul"))
    booking = Booking.objects.create(kind=Booking.Kind.MAINTENANCE, quantity=1, starts_at=moment,
                                     ends_at=moment + timedelta(days=3), state=Booking.State.LIVE)
    back = Booking.objects.values_list("starts_at", "ends_at").get(pk=booking.pk)
    assert back == (moment, moment + timedelta(days=3))
    assert back[0].tzinfo is timezone.utc and back[0].hour == 0


def _raw(zone: str):
    """A new psycopg connection to the test database, with psycopg's own adapters, in ``zone``."""
    params = connection.get_connection_params()
    raw = psycopg.connect(autocommit=True, **{k: params[k] for k in ("dbname", "user", "password", "host", "port") if k in params})
    raw.execute(f"SET TIME ZONE '{zone}'")
    return raw


@pytest.mark.parametrize("django_zone, session_zone, used", [
    (timezone.utc, "UTC", True),
    (timezone.utc, "Europe/Lisbon", False),  # the session is not in UTC: the C loader would keep its zone
    (ZoneInfo("Europe/Lisbon"), "UTC", False),  # Django wants another zone on the values
])
def test_the_c_loader_is_used_only_where_both_zones_are_utc(django_zone, session_zone, used):
    raw = _raw(session_zone)
    try:
        before = raw.adapters.get_loader(pg_times.TIMESTAMPTZ, pq.Format.TEXT)
        conn = SimpleNamespace(vendor="postgresql", connection=raw, timezone=django_zone)
        assert pg_times.use_c_loader(None, conn) is used
        after = raw.adapters.get_loader(pg_times.TIMESTAMPTZ, pq.Format.TEXT)
        assert (after is pg_times.UtcTimestamptzLoader) is used
        if not used:
            assert after is before
    finally:
        raw.close()
    assert pg_times.use_c_loader(None, SimpleNamespace(vendor="sqlite")) is False
