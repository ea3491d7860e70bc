"""The worker outlives a database that is not there, and picks up once it is (issue 8, faults).

A worker started before its PostgreSQL database exists (a restore in progress, a fail-over not yet
finished) logs every failed sweep and keeps its schedule; once the database is back, its next sweeps
succeed and are on record. And a page or API request that loses the database outside a view gets the
same 503 as one that loses it inside.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import psycopg
import pytest
from django.db import OperationalError
from django.test import RequestFactory

from anchorgpu.web.views import server_error
from tests.faults.workers import ROOT


def _admin() -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres", autocommit=True)


@pytest.mark.postgres_only
def test_a_worker_started_while_its_database_is_missing_keeps_going_and_recovers(db, tmp_path):
    # ``db``: so that the PostgreSQL pass, which runs only the tests that use a database, runs this one.
    name = f"ag_outage_{uuid.uuid4().hex[:10]}"
    url = f"postgres://postgres@127.0.0.1:5432/{name}"
    env = {**os.environ, "ANCHORGPU_DATABASE_URL": url, "DATABASE_URL": url}
    output = tmp_path / "worker.log"
    with output.open("wb") as sink:
        worker = subprocess.Popen([sys.executable, "-m", "anchorgpu.cli", "worker", "--interval", "0.2",
                                   "--no-simulations"], cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while output.read_text().count("sweep provision_due failed") < 3:  # three rounds of sweeps, all failed
            assert worker.poll() is None, output.read_text()[-3000:]
            assert time.monotonic() < deadline, output.read_text()[-3000:]
            time.sleep(0.1)
        assert worker.poll() is None, "the worker died with its database"

        with _admin() as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        migrated = subprocess.run([sys.executable, "-m", "anchorgpu.cli", "migrate", "--no-input"], cwd=ROOT,
                                  env=env, capture_output=True, text=True, timeout=300)
        assert migrated.returncode == 0, migrated.stderr[-3000:]

        deadline = time.monotonic() + 60
        runs = 0
        while runs < 2:
            assert worker.poll() is None, output.read_text()[-3000:]
            assert time.monotonic() < deadline, output.read_text()[-3000:]
            time.sleep(0.2)
            with psycopg.connect(url.replace("postgres://", "postgresql://")) as conn:
                row = conn.execute("SELECT runs, failures FROM ops_sweeprecord WHERE name = 'provision_due'"
                                   ).fetchone()
            runs = row[0] - row[1] if row else 0  # good sweeps, on record in the database now there
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, output.read_text()[-3000:]
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        with _admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_database_failure_outside_a_view_is_a_503_too():
    factory = RequestFactory()
    for path, kind in (("/en/catalog/", "text/html"), ("/api/v1/offers", "application/json")):
        request = factory.get(path)
        try:
            raise OperationalError("connection to server at 127.0.0.1 failed")
        except OperationalError:
            response = server_error(request)  # Django calls it inside its ``except`` block, like this
        assert response.status_code == 503 and response["Retry-After"] == "5"
        assert response["Content-Type"].startswith(kind)
    try:
        raise ValueError("a bug")
    except ValueError:
        assert server_error(factory.get("/api/v1/offers")).status_code == 500  # anything else stays a 500
