"""An exact cache for the live catalog's answers (the catalog page's offers table, the offers API's JSON).

Why it is exact
---------------

The offers are a pure function of three things: the committed data the database shows, the second they are
computed for (``offers.offers`` works with ``now.replace(microsecond=0)``) and the request's parameters
(the normalised query and the language it is rendered in). The key holds all three:

* **The data: PostgreSQL's current snapshot**, ``SELECT pg_current_snapshot()::text`` (PostgreSQL 13+),
  ``xmin:xmax:xip_list``. PostgreSQL's documentation (Functions, "Transaction ID and Snapshot Information";
  Table "Snapshot Components") describes it: ``xmin`` is the lowest transaction ID still active; ``xmax``
  is one past the highest *completed* transaction ID; ``xip_list`` the IDs active at the time of the
  snapshot, only those between ``xmin`` and ``xmax`` (there may be active IDs above ``xmax``). An ID below
  ``xmax`` that is not in the list had completed when the snapshot was taken, so it is visible or not
  according to its commit status; IDs at or above ``xmax`` and those in the list are not visible. The list
  holds no subtransactions, which become visible only with their top-level transaction. So a snapshot
  decides, for every transaction ID, whether its writes are visible, and a transaction's commit status
  never changes once it has completed: two equal snapshots make exactly the same committed rows visible.

  It is the *completion* of a transaction (commit or rollback) that changes the snapshot, not its start: a
  write transaction that has only begun may take an ID above ``xmax`` and stay out of the list, which is
  harmless, since it is invisible; a transaction that only reads takes no ID and changes nothing. When a
  transaction with an ID completes, either ``xmax`` moves past it or it leaves ``xip_list``; new IDs are
  never below ``xmax``, ``xmax`` never goes back, and so a snapshot, once it has changed, never comes back.
  A booking committed a moment ago therefore changes the key of every later request: the answer follows it
  at once, within the same second. Transaction IDs count across the whole PostgreSQL server (and are 64-bit
  here), so writes to other databases only make the key change more often.

  The answer is computed in a ``REPEATABLE READ, READ ONLY`` transaction whose first statement reads the
  snapshot: in that mode ``pg_current_snapshot()`` returns the transaction's own snapshot, the one every
  query of the computation reads with. The value is stored under *that* snapshot, so what sits in the cache
  under a key is exactly the answer for the data that key makes visible.
* **The second**: the ``now`` the offers are computed for, passed to them explicitly.
* **The request**: the validated, normalised parameters (the environment by the name and stack the
  computation uses), the active language (translations, and the language prefix of the links in the
  table), the time zone and the script prefix. Settings the computation reads (the booking horizon) are
  fixed per process; a change of settings (tests) empties the cache.

Nothing else goes in: a cached entry holds no per-user content and no CSRF token. The views decide what
they ask for and on what key (anchorgpu.web.catalog_cache): the offers API's JSON, the offers table, and the
whole catalog page of a visitor without a session, with a marker where each answer puts the visitor's own
CSRF token. A signed-in visitor's page is rendered for them around the cached table. Bad queries (400, with
their messages) are never kept: ``answer(..., keep=...)`` says which values are.

A cached answer costs one round trip to PostgreSQL, the snapshot query, which also serves as the
connection's health check (``_snapshot``), and is sent straight through libpq where queries are not
recorded. Both lean on Django's internals, and issue 22 measured why they stay: done with public APIs only
(a cursor, and Django's own health check before it) a cached answer cost 1.6–2.0 database transactions
instead of 0.7–1.0, and the catalog's throughput fell from 55–62 % of bench/load.py's ceiling to 31–43 % in
two rounds of runs side by side (docs/benchmarks.md, "Issue 22: load before and after"). Each thread reads
its own snapshot: sharing one read between the threads that ask at the same moment (``SharedReads``,
removed in issue 22) saved PostgreSQL queries but no throughput measurable side by side.

When it is off
--------------

* ``ANCHORGPU_CATALOG_CACHE=0``.
* On SQLite (the embedded default): it has no snapshot to key on, so every answer is computed.
* Inside a transaction that is already open (``atomic`` blocks, and Django's non-transactional tests): its
  own uncommitted writes are visible to it and not part of the snapshot.

The cache is per process, thread-safe and bounded (``SIZE`` entries, least recently used out first; entries
of a past second, which no later request can use, go first). A thread that asks for a key another thread
of the process is computing waits for that answer: each process computes a key once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from datetime import datetime
from typing import TypeVar

import psycopg
from django.conf import settings
from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections, transaction
from django.urls import get_script_prefix
from django.utils import timezone, translation
from psycopg import pq

T = TypeVar("T")

SIZE = 256
SNAPSHOT_SQL = "SELECT pg_current_snapshot()::text"
_SNAPSHOT_SQL_BYTES = SNAPSHOT_SQL.encode()
_WAIT_SECONDS = 10.0  # for another thread's computation of the same key; then compute without it


class AnswerCache:
    """A bounded LRU map, safe between threads, with one computation per key at a time."""

    def __init__(self, size: int = SIZE):
        self.size = size
        self._entries: OrderedDict[Hashable, object] = OrderedDict()
        self._computing: dict[Hashable, threading.Event] = {}
        self._lock = threading.Lock()
        self._second: datetime | None = None
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._second = None

    def get(self, key: Hashable, default=None):
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        return default

    def put(self, key: Hashable, value: object, second: datetime) -> None:
        with self._lock:
            if self._second is None or second > self._second:
                # A new second: the entries of past seconds cannot be asked for again.
                self._second = second
                for old in [k for k in self._entries if k[1] < second]:
                    del self._entries[old]
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def claim(self, key: Hashable) -> tuple[bool, object, _Computation | None]:
        """(found, value, event): the value if cached; else an event, set when the thread computing
        ``key`` is done (None when this thread is to compute it, and must call ``release``)."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return True, self._entries[key], None
            self.misses += 1
            event = self._computing.get(key)
            if event is None:
                self._computing[key] = _Computation()
            return False, None, event

    def release(self, key: Hashable, kept: bool = True) -> None:
        """The computation of ``key`` is over; ``kept``: its value was kept (under this key or a newer one)."""
        with self._lock:
            event = self._computing.pop(key, None)
        if event is not None:
            event.kept = kept
            event.set()


class _Computation(threading.Event):
    """Set when a thread's computation of a key is over. ``kept`` False: its value was not kept (an error),
    and the threads that waited for it compute their own at once, side by side, rather than in turn."""

    kept = True


_CACHE = AnswerCache()
_MISSING = object()
_LOCAL = threading.local()  # .inside: (alias, snapshot, now) while this thread computes an answer


def clear() -> None:
    _CACHE.clear()


def _on_setting_changed(**_kwargs) -> None:
    clear()  # answers computed under other settings (tests change them)


setting_changed.connect(_on_setting_changed, dispatch_uid="anchorgpu.catalog.answer_cache")


def enabled(using: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether answers are cached now: the setting on, PostgreSQL, and no transaction open."""
    connection = connections[using]
    return (bool(getattr(settings, "ANCHORGPU_CATALOG_CACHE", True)) and connection.vendor == "postgresql"
            and not connection.in_atomic_block and connection.get_autocommit())


def _read_snapshot(connection) -> str:
    """One round trip. Where queries are recorded (tests, ``DEBUG``) it goes through the ORM's cursor like any
    other query. Otherwise it is sent straight through libpq: it is the only query of a cached answer, and the
    cursor's layers cost more than PostgreSQL takes to answer it (38 µs of client CPU against 95 µs). Errors
    are Django's, as from a cursor.

    ``connection.connection.pgconn`` is psycopg's public low-level interface to libpq, reached through Django's
    driver connection; Django has no public call for a query without its cursor. Issue 22 measured the public
    path (the cursor, with Django's health check, below): see the module's docstring."""
    if connection.queries_logged:
        with connection.cursor() as cursor:
            cursor.execute(SNAPSHOT_SQL)
            return cursor.fetchone()[0]
    connection.ensure_connection()
    with connection.wrap_database_errors:
        pgconn = connection.connection.pgconn
        result = pgconn.exec_(_SNAPSHOT_SQL_BYTES)
        if result.status == pq.ExecStatus.TUPLES_OK and result.ntuples == 1:
            return result.get_value(0, 0).decode("ascii")
        if pgconn.status == pq.ConnStatus.BAD:  # the server is gone: as a cursor says it
            raise psycopg.OperationalError(pgconn.get_error_message() or "the connection to the server was lost")
        raise psycopg.errors.error_from_result(result)


def _snapshot(connection) -> str:
    """The current snapshot. It is also the connection's health check.

    With ``CONN_HEALTH_CHECKS`` on, Django checks a connection kept from an earlier request with a query of its
    own before the request's first query: one more round trip to PostgreSQL. The snapshot query proves as much
    about the connection, so it takes that check's place and a cached answer costs one round trip, not two.
    When it fails on a connection that was due its check, the connection is closed and the query is sent
    once more on a new one: what Django does after a failed check. An error on a connection already checked
    in this request propagates, as any query's would.

    ``health_check_done`` is Django's own flag (``BaseDatabaseWrapper``, since Django 4.1; reset at each request by
    ``close_old_connections``). No public API skips the check for one query, and the check costs a round trip
    to PostgreSQL and a transaction per request: the module's docstring gives the figures that keep this.
    tests/catalog/test_whole_answers.py checks the behaviour against the Django version installed."""
    if connection.connection is not None and connection.health_check_enabled and not connection.health_check_done:
        connection.health_check_done = True
        try:
            return _read_snapshot(connection)
        except (OperationalError, InterfaceError):  # the connection is gone; an error of the query is not
            connection.close()  # enabled() said no transaction is open: nothing is lost with it
    return _read_snapshot(connection)


def _now() -> datetime:
    return timezone.now().replace(microsecond=0)


def _always(_value) -> bool:
    return True


def answer(kind: str, params: Hashable, compute: Callable[[datetime], T], *, using: str = DEFAULT_DB_ALIAS,
           keep: Callable[[T], bool] = _always) -> T:
    """``compute(now)``'s value for this database state, second, request and language: from the cache when
    the same key was computed before in this process, else computed (and kept when ``keep(value)``: a view
    that validates inside ``compute`` keeps its good answers and not its errors). ``kind`` names the
    answer (a view's rendering), ``params`` the request's parameters; ``compute`` must depend on nothing
    else than those, ``now`` and the database.

    Asked while this thread computes another answer (a page asking for its offers table), it is looked up
    under that computation's snapshot and second: its read-only transaction sees exactly that snapshot."""
    context = (translation.get_language(), timezone.get_current_timezone_name(), get_script_prefix())
    inside = getattr(_LOCAL, "inside", None)
    if inside is not None and inside[0] == using:
        return _answer_inside(kind, params, compute, keep, inside[1], inside[2], context)
    if not enabled(using):
        return compute(_now())
    connection = connections[using]
    for _look in range(3):
        now = _now()
        key = (kind, now, _snapshot(connection), context, params)
        found, value, event = _CACHE.claim(key)
        if found:
            return value
        if event is None:  # this thread computes it
            kept = False
            try:
                value, kept = _compute(connection, kind, now, context, params, compute, keep)
                return value
            finally:
                _CACHE.release(key, kept)
        event.wait(_WAIT_SECONDS)  # another thread computes this key: its answer, once it is there
        value = _CACHE.get(key, _MISSING)
        if value is not _MISSING:
            return value
        if not event.kept:
            break  # an answer that is not kept (an error): this thread computes its own now
        # It came under a newer snapshot (a commit in between) or a new second: look again.
    return _compute(connection, kind, _now(), context, params, compute, keep)[0]


def _compute(connection, kind, now, context, params, compute: Callable[[datetime], T],
             keep: Callable[[T], bool]) -> tuple[T, bool]:
    """(value, kept)."""
    with transaction.atomic(using=connection.alias):
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        snapshot = _snapshot(connection)  # the first read: the snapshot every query below reads with
        _LOCAL.inside = (connection.alias, snapshot, now)
        try:
            value = compute(now)
        finally:
            _LOCAL.inside = None
    # Under the snapshot it was computed with: that may be newer than the one looked up (a commit in
    # between), and then it answers later requests, not the earlier key.
    kept = keep(value)
    if kept:
        _CACHE.put((kind, now, snapshot, context, params), value, now)
    return value, kept


def _answer_inside(kind, params, compute: Callable[[datetime], T], keep: Callable[[T], bool], snapshot: str,
                   now: datetime, context: tuple) -> T:
    """An answer asked for during another's computation, in its transaction: same snapshot, same second."""
    key = (kind, now, snapshot, context, params)
    value = _CACHE.get(key, _MISSING)
    if value is _MISSING:
        value = compute(now)
        if keep(value):
            _CACHE.put(key, value, now)
    return value
