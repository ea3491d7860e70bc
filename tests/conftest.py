"""Test set-up shared by the whole suite.

The suite runs twice (see the Makefile): on SQLite, and with DATABASE_URL
pointing at PostgreSQL. Tests that touch the database run in both passes.
When the PostgreSQL pass cannot reach its server, database tests are
skipped with the reason -- except under CI (CI=true), where that is an error.
"""

from __future__ import annotations

import os
import socket

import pytest
from django.conf import settings


def _vendor() -> str:
    return "postgresql" if "postgresql" in settings.DATABASES["default"]["ENGINE"] else "sqlite"


def _postgres_unreachable() -> str | None:
    db = settings.DATABASES["default"]
    host, port = db.get("HOST") or "127.0.0.1", int(db.get("PORT") or 5432)
    try:
        with socket.create_connection((host, port), timeout=2):
            return None
    except OSError as exc:
        return f"PostgreSQL is not reachable at {host}:{port} ({exc})"


def pytest_report_header(config):
    header = f"database: {_vendor()} ({settings.DATABASES['default']['NAME']})"
    if _vendor() == "postgresql" and os.environ.get("ANCHORGPU_TEST_ALL_TWICE", "") != "1":
        header += "; tests that use no database ran in the SQLite pass and are deselected here"
    return header


def pytest_collection_modifyitems(config, items):
    vendor = _vendor()
    problem = _postgres_unreachable() if vendor == "postgresql" else None
    if problem and os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        raise pytest.UsageError(f"{problem}: under CI the PostgreSQL tests must run, not skip.")
    if vendor == "postgresql" and os.environ.get("ANCHORGPU_TEST_ALL_TWICE", "") != "1":
        # Tests that never touch a database ran, identically, in the SQLite pass: the PostgreSQL pass
        # runs only those that do (set ANCHORGPU_TEST_ALL_TWICE=1 to run everything again).
        kept, dropped = [], []
        for item in items:
            (kept if _uses_database(item) else dropped).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
    for item in items:
        if item.get_closest_marker("postgres_only") and vendor != "postgresql":
            item.add_marker(pytest.mark.skip(reason="PostgreSQL-only test; this pass runs on SQLite"))
        if problem and ("django_db_setup" in item.fixturenames or item.get_closest_marker("django_db")):
            item.add_marker(pytest.mark.skip(reason=problem))


_DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server", "django_db_reset_sequences",
                      "django_db_serialized_rollback"}


def _uses_database(item) -> bool:
    return bool(item.get_closest_marker("django_db") or _DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


@pytest.fixture
def vendor() -> str:
    return _vendor()


@pytest.fixture(autouse=True)
def _demo_deposit_keys_allowed(settings):
    """Tests take orders to the demo's public test-vector deposit keys (never in production). Passwords are
    hashed cheaply here: Argon2 costs ~0.1 s and 100 MiB a hash, by design (tests/ops/test_security.py checks
    the real setting)."""
    settings.ANCHORGPU_ALLOW_TEST_KEYS = True
    settings.ANCHORGPU_RATE_LIMITS = False  # every test client is 127.0.0.1; tests/ops/test_rate_limits.py turns them on
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher",
                                 *settings.PASSWORD_HASHERS]


@pytest.fixture(autouse=True)
def _default_language_after_each_test():
    """A request in another language leaves that language active in the thread; the next test starts in
    the default again, whatever order the tests run in."""
    yield
    from django.utils import translation

    translation.activate(settings.LANGUAGE_CODE)


def _races_or_faults(item) -> bool:
    marker = item.get_closest_marker("django_db")
    transactional = bool(marker and marker.kwargs.get("transaction")) or "transactional_db" in item.fixturenames
    return transactional and (item.get_closest_marker("db_race") is not None or "/tests/faults/" in str(item.path))


@pytest.fixture(autouse=True)
def _invariants_hold_after_races_and_faults(request):
    """After every race and fault test, a scan of the whole database (``anchorgpu.orders.invariants``): no
    order paid, preparing access or active without its live booking, no card booked twice, no transaction
    credited to two orders without a statement. It runs before the test's data is flushed."""
    if not _races_or_faults(request.node):
        yield
        return
    request.getfixturevalue("transactional_db")  # set up first, so it is torn down after this check
    yield
    from django.db import connection

    from anchorgpu.orders.invariants import invariant_violations

    connection.close()  # a fault test may have cut the connection under the test's feet
    found = invariant_violations()
    connection.close()
    assert not found, f"the database breaks the shop's invariants after {request.node.name}: {found[:10]}"


_LOG_AUDIT = None


def pytest_sessionstart(session):
    """Keep every log line of the run (see tests/log_audit.py)."""
    import logging

    from tests.log_audit import KeepEverything

    global _LOG_AUDIT
    _LOG_AUDIT = KeepEverything()
    logging.getLogger().addHandler(_LOG_AUDIT)


def pytest_sessionfinish(session, exitstatus):
    from tests.log_audit import leaks

    if _LOG_AUDIT is None:
        return
    found = leaks(_LOG_AUDIT.lines)
    if found:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("=", f"secrets in log lines ({len(found)})", red=True)
            for line in found[:20]:
                reporter.write_line("  " + line, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
