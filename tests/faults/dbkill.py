"""Dropping the database connection in the middle of a service, for real.

``kill_connection()`` asks PostgreSQL, from a second connection, to terminate
the backend that serves Django's connection in this thread
(``pg_terminate_backend``): what a server restart, a fail-over or a cut
network look like to the client. The next statement on the dropped
connection fails with ``OperationalError``; whatever the open transaction
had written is gone, rolled back by the server.

``drop_before(monkeypatch, module, name)`` wraps a function so that the
connection is dropped when it is called the first time: the service then
fails at that exact point, half-way through its transaction.
"""

from __future__ import annotations

import psycopg
from django.db import connection


def _admin_connection() -> psycopg.Connection:
    conf = connection.settings_dict
    return psycopg.connect(host=conf.get("HOST") or "127.0.0.1", port=conf.get("PORT") or 5432,
                           user=conf.get("USER") or "postgres", password=conf.get("PASSWORD") or None,
                           dbname=conf["NAME"], autocommit=True)


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def kill_connection() -> int:
    """Terminate the server process behind this thread's connection; returns its pid."""
    assert connection.vendor == "postgresql", "only PostgreSQL has a connection to drop"
    pid = backend_pid()
    with _admin_connection() as admin:
        terminated = admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid]).fetchone()[0]
    assert terminated, f"backend {pid} was not terminated"
    return pid


class DropBefore:
    """Replaces ``module.name``: the first call drops the connection, then calls the original
    (which then fails on the dead connection, as the real code would). Later calls pass through."""

    def __init__(self, original):
        self.original = original
        self.dropped: list[int] = []

    def __call__(self, *args, **kwargs):
        if not self.dropped:
            self.dropped.append(kill_connection())
        return self.original(*args, **kwargs)


def drop_before(monkeypatch, module, name: str) -> DropBefore:
    wrapper = DropBefore(getattr(module, name))
    monkeypatch.setattr(module, name, wrapper)
    return wrapper
