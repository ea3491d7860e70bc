"""The backup drill: a busy shop is backed up while its connection is open, restored into a fresh database
by a new process, and the restored orders, bookings, payments, invoices and audit rows are identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.db import connection

from anchorgpu.audit.models import AuditEntry
from anchorgpu.billing.models import Invoice
from anchorgpu.payments.models import Transfer
from tests import shop
from tests.billing.conftest import paid_order

pytestmark = pytest.mark.django_db(transaction=True)  # committed rows: the backup reads them from outside
COMPARED = ["orders", "allocation", "payments", "billing", "audit"]


def _url(settings_dict: dict, name: str | None = None) -> str:
    if connection.vendor == "sqlite":
        return f"sqlite:///{name or settings_dict['NAME']}"
    user, host, port = settings_dict.get("USER") or "postgres", settings_dict.get("HOST") or "127.0.0.1", \
        settings_dict.get("PORT") or 5432
    return f"postgres://{user}@{host}:{port}/{name or settings_dict['NAME']}"


def _anchorgpu(*args: str, url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANCHORGPU_DATABASE_URL": url}
    return subprocess.run([sys.executable, "-m", "anchorgpu.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def _rows(url: str) -> list[dict]:
    done = _anchorgpu("dumpdata", *COMPARED, "--indent", "0", url=url)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_backup_and_restore_into_a_fresh_database_in_a_new_process(tmp_path):
    shop.load_shop()
    alice, bob = shop.customer(), shop.customer("bob@example.com")
    paid_order(alice)
    paid_order(bob)
    shop.place(alice)  # one still holding cards
    assert Invoice.objects.count() == 2 and Transfer.objects.count() == 2 and AuditEntry.objects.count() > 10
    source = _url(connection.settings_dict)

    archive = tmp_path / "shop.backup"
    made = _anchorgpu("backup", "--output", str(archive), url=source)
    assert made.returncode == 0, made.stderr
    assert str(archive) in made.stdout and archive.stat().st_size > 10_000

    fresh = str(tmp_path / "restored.sqlite3") if connection.vendor == "sqlite" else f"drill_{uuid.uuid4().hex[:10]}"
    target = _url(connection.settings_dict, fresh)
    try:
        restored = _anchorgpu("restore", str(archive), "--into", target, url=source)
        assert restored.returncode == 0, restored.stderr
        before, after = _rows(source), _rows(target)
        assert after == before
        models = {row["model"] for row in after}
        assert {"orders.order", "allocation.booking", "payments.transfer", "payments.quote", "billing.invoice",
                "audit.auditentry"} <= models
        again = _anchorgpu("restore", str(archive), "--into", target, url=source)
        assert again.returncode != 0 and "already holds" in again.stderr and "Traceback" not in again.stderr
    finally:
        if connection.vendor == "postgresql":
            import psycopg

            settings_dict = connection.settings_dict
            with psycopg.connect(dbname="postgres", user=settings_dict.get("USER") or "postgres",
                                 host=settings_dict.get("HOST") or "127.0.0.1", port=settings_dict.get("PORT") or 5432,
                                 autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{fresh}"')


def test_bad_backups_and_targets_are_refused_with_a_reason(tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a backup at all")
    url = _url(connection.settings_dict)
    done = _anchorgpu("restore", str(junk), "--into", "sqlite:///" + str(tmp_path / "x.sqlite3"), url=url)
    assert done.returncode != 0 and "neither a SQLite backup nor a pg_dump archive" in done.stderr
    assert "Traceback" not in done.stderr
    missing = _anchorgpu("restore", str(tmp_path / "nothing"), "--into", "sqlite:///x", url=url)
    assert missing.returncode != 0 and "is not a file" in missing.stderr
    exists = tmp_path / "exists.backup"
    exists.write_text("x")
    refused = _anchorgpu("backup", "--output", str(exists), url=url)
    assert refused.returncode != 0 and "never overwrites" in refused.stderr
    assert Path(exists).read_text() == "x"
