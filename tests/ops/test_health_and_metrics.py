"""/healthz, /readyz and /metrics."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from django.db import OperationalError, transaction
from django.utils import timezone

from anchorgpu import worker
from anchorgpu.orders import notify
from anchorgpu.orders.models import OrderEmail
from anchorgpu.ops.logs import JsonFormatter
from anchorgpu.ops.models import SweepRecord
from anchorgpu.payments.models import Asset, WatchState
from tests import shop


def test_healthz_answers_without_the_database(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert response["Cache-Control"].startswith("max-age=0")


@pytest.mark.django_db
def test_readyz_checks_the_database_the_migrations_and_the_watchers(client, monkeypatch):
    shop.load_shop()
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.content
    assert ready.json()["checks"] == {"database": {"ok": True, "detail": "reachable"},
                                      "migrations": {"ok": True, "detail": "all applied"},
                                      "chain_watchers": {"ok": True, "detail": "0 watched, none stalled"}}

    eth = Asset.objects.get(code="eth")
    Asset.objects.filter(pk=eth.pk).update(watch_url="http://127.0.0.1:9/")
    WatchState.objects.create(asset=eth, last_poll_at=timezone.now(), errors_in_row=40,
                              last_success_at=timezone.now() - timedelta(hours=3))
    stalled = client.get("/readyz")
    assert stalled.status_code == 503 and stalled.json()["status"] == "not ready"
    assert stalled.json()["checks"]["chain_watchers"] == {"ok": False, "detail": "stalled: eth"}

    class Pending:
        def __init__(self, connection):
            self.loader = type("L", (), {"graph": type("G", (), {"leaf_nodes": lambda self: []})()})()

        def migration_plan(self, targets):
            return [(type("M", (), {"app_label": "payments", "name": "0099_future"})(), False)]

    monkeypatch.setattr("anchorgpu.ops.health.MigrationExecutor", Pending)
    behind = client.get("/readyz").json()
    assert behind["checks"]["migrations"] == {"ok": False, "detail": "1 not applied (payments.0099_future)"}
    assert "chain_watchers" not in behind["checks"]  # not asked before the schema is right

    def down(*args, **kwargs):
        raise OperationalError("could not connect to server")

    monkeypatch.setattr("anchorgpu.ops.health.connection.cursor", down)
    gone = client.get("/readyz")
    assert gone.status_code == 503
    assert gone.json()["checks"] == {"database": {"ok": False, "detail": "unreachable: OperationalError"}}


@pytest.mark.django_db(transaction=True)
def test_metrics_tell_orders_bookings_watchers_sweeps_and_request_times(client, settings):
    shop.load_shop()
    order = shop.place(shop.customer())
    Asset.objects.filter(code="eth").update(watch_url="http://127.0.0.1:9/")
    worker.run_once()  # records every sweep; the eth watcher's poll fails (nothing listens on port 9)
    with transaction.atomic():  # after the run: one email queued, one given up after its last attempt
        notify.term_ending(order.pk)
        OrderEmail.objects.create(order=order, kind="term_ending", due_at=timezone.now(), attempts=6,
                                  failed_at=timezone.now(), last_error="SMTPServerDisconnected")
    client.get("/en/")  # one request to the catalog, timed
    settings.ANCHORGPU_METRICS_TOKEN = "s3cret-token-for-tests"
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token-for-tests").content.decode()
    assert 'anchorgpu_orders{state="awaiting_payment"} 1.0' in text and 'anchorgpu_orders{state="paid"} 0.0' in text
    assert "anchorgpu_holds_live 1.0" in text and 'anchorgpu_bookings_live{kind="hold"} 1.0' in text
    assert 'anchorgpu_chain_watcher_ok{asset="eth"} 0.0' in text
    assert 'anchorgpu_customer_emails_unsent{status="queued"} 1.0' in text  # the order's own was sent by the run
    assert 'anchorgpu_customer_emails_unsent{status="given_up"} 1.0' in text
    assert 'anchorgpu_chain_watcher_errors_in_row{asset="eth"} 1.0' in text
    assert 'anchorgpu_worker_sweep_runs_total{sweep="chains_poll"} 1.0' in text
    assert 'anchorgpu_worker_sweep_failures_total{sweep="chains_poll"} 0.0' in text
    assert 'anchorgpu_request_seconds_count{method="GET",status="2xx",view="catalog"}' in text
    assert "anchorgpu_database_up 1.0" in text
    assert SweepRecord.objects.get(name="provision_due").runs == 1
    assert order.reference not in text  # counts, never customers' data

    assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403  # a token, once set, is required
    wrong = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer s3cret-token-for-test")
    assert wrong.status_code == 403
    ok = client.get("/metrics", REMOTE_ADDR="203.0.113.9", HTTP_AUTHORIZATION="Bearer s3cret-token-for-tests")
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain; version=")


@pytest.mark.django_db
def test_metrics_without_a_token_answer_nobody_not_even_the_machine_itself(client, settings):
    """A TLS proxy on the same machine makes every visitor's request come from 127.0.0.1."""
    settings.ANCHORGPU_METRICS_TOKEN, settings.DEBUG = "", False
    for address in ("127.0.0.1", "::1", "203.0.113.9"):
        refused = client.get("/metrics", REMOTE_ADDR=address)
        assert refused.status_code == 403 and b"ANCHORGPU_METRICS_TOKEN" in refused.content, address
        assert b"anchorgpu_" not in refused.content
    settings.DEBUG = True  # a developer's machine
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 403


@pytest.mark.django_db(transaction=True)
def test_a_failing_sweep_is_counted(monkeypatch):
    def broken():
        raise RuntimeError("disk full")

    monkeypatch.setattr("anchorgpu.orders.lifecycle.terms_warn_due", broken)
    worker.run_once()
    record = SweepRecord.objects.get(name="terms_warn_due")
    assert (record.runs, record.failures, record.last_error) == (1, 1, "RuntimeError: disk full")


@pytest.mark.django_db
def test_log_lines_are_json_with_the_request_id(client, caplog):
    given = "req-1234-abcd"
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get("/en/no-such-page/", HTTP_X_REQUEST_ID=given)
    assert response.status_code == 404 and response["X-Request-ID"] == given
    record = next(r for r in caplog.records if r.name == "django.request")
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == given
    assert line["level"] == "WARNING" and line["logger"] == "django.request" and "Not Found" in line["message"]
    assert line["time"].endswith("+00:00")
    made = client.get("/healthz", HTTP_X_REQUEST_ID="bad id with spaces\n")["X-Request-ID"]
    assert made != "bad id with spaces\n" and len(made) == 32  # an ill-formed id is replaced, never echoed
