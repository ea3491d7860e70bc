"""Reading ``timestamp with time zone`` columns from PostgreSQL at C speed.

Django (``backends/postgresql/psycopg_any.py``) loads every timestamptz value through a Python subclass of
psycopg's pure-Python loader, which parses the text and then sets ``tzinfo`` to the connection's time zone.
It exists because Django may run a connection in a time zone other than UTC. That costs about 6 µs a value,
against 0.7 µs for the loader in psycopg's C extension (psycopg-binary), and the availability reads load
thousands of them: every live booking's start and end.

Where the two give the same result we use the C one. That is when Django's zone for the connection is UTC
and PostgreSQL's session ``TimeZone`` is ``UTC`` as well: the C loader then returns datetimes whose
``tzinfo`` is ``datetime.timezone.utc`` (psycopg's ``_tz.get_tzinfo``), which is what Django's gives. The
shop always runs so (``USE_TZ = True``, ``TIME_ZONE = "UTC"``, and Django sets the session's zone when it
connects); anything else keeps Django's loader. ``tests/ops/test_pg_times.py`` compares the two on the same
rows.
"""

from __future__ import annotations

from datetime import UTC

from psycopg import adapters, pq
from psycopg.adapt import Loader
from psycopg.postgres import types

TIMESTAMPTZ = types["timestamptz"].oid


def c_loader():
    """psycopg's own text loader for timestamptz: the C one when psycopg-binary (or -c) is installed."""
    return adapters.get_loader(TIMESTAMPTZ, pq.Format.TEXT)


class UtcTimestamptzLoader(Loader):
    """psycopg's C loader, wearing the ``timezone`` attribute Django reads off the connection's loader each
    time it opens a cursor (it registers its own on the cursor when they differ). The C class can be neither
    subclassed nor given attributes, so this one holds an instance of it and takes its bound ``load`` as its
    own: psycopg's row loop fetches ``loader.load`` once per result and calls it with no Python frame."""

    timezone = UTC

    def __init__(self, oid, context=None):
        super().__init__(oid, context)
        self._inner = c_loader()(oid, context)
        self.load = self._inner.load

    def load(self, data):  # replaced per instance in __init__; kept for the abstract method
        return self._inner.load(data)


def use_c_loader(sender, connection, **kwargs) -> bool:
    """``connection_created`` receiver: put psycopg's loader back on a new PostgreSQL connection where it
    answers exactly as Django's would. Returns whether it did."""
    if connection.vendor != "postgresql":
        return False
    raw = connection.connection
    loader = c_loader()
    if loader is None or loader.__module__.startswith("psycopg.types"):  # no C extension: nothing to gain
        return False
    if connection.timezone is not UTC or raw.info.parameter_status("TimeZone") != "UTC":
        return False
    raw.adapters.register_loader(TIMESTAMPTZ, UtcTimestamptzLoader)
    return True
