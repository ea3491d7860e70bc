"""bench/load.py still runs: its quick mode (gunicorn, 10 clients, a few seconds per phase), in a subprocess,
on a PostgreSQL database of its own next to the test database, which it drops afterwards."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "load.py"


def _server_url(name: str) -> str:
    db = settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db.get('USER') or 'postgres'}{password}@{db.get('HOST') or '127.0.0.1'}:" \
           f"{db.get('PORT') or 5432}/{name}"


def test_the_quick_load_test_serves_every_endpoint_with_no_errors_and_no_double_bookings():
    name = f"{settings.DATABASES['default']['NAME']}_bench_load"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "ANCHORGPU_DATABASE_URL"}}
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--url", _server_url(name)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "gunicorn, 2 processes x 2 threads (gthread)" in out
    assert "rate limits OFF for this run (ANCHORGPU_RATE_LIMITS=0)" in out
    for endpoint in ("ceiling", "catalog", "offers", "orders"):  # the capacity table, then the mixed one
        rows = re.findall(rf"^  {endpoint}\s+(\d+)\s+([\d.]+)\s", out, re.M)
        assert len(rows) == (1 if endpoint == "ceiling" else 2), (endpoint, out)
        assert int(rows[0][0]) > 0 and float(rows[0][1]) > 0, (endpoint, out)
    assert re.search(r"^  ceiling\s+(\d+).*\sok \1$", out, re.M), out  # every answer of the bare view was a 200
    created = int(re.search(r"^orders created: (\d+);", out, re.M).group(1))
    assert created > 0
    assert "target: 0 errors: 0: PASS" in out
    assert re.search(r"^target: 0 double-bookings: 0 \(among \d+ live device bookings\): PASS$", out, re.M), out
    assert re.search(rf"^check: every created order has its quote and its hold: {created} of {created}; "
                     rf"orders in the database {created}, .*: PASS$", out, re.M), out
    assert re.search(r"^target: catalog throughput >= 50 % of the ceiling's: \d+ % .*: (PASS|FAIL)$", out, re.M)
    assert "PROBLEM" not in out
    with psycopg.connect(_server_url("postgres")) as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None
