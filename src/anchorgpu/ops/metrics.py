"""Prometheus metrics at ``/metrics``.

Request latency is measured in the server process that answered (one histogram
per view, method and status class), and so are the requests in flight and the
garbage collector's pauses (``gc_pauses``). Under gunicorn, with several
processes, prometheus-client's multiprocess mode adds them up over every
process: ``PROMETHEUS_MULTIPROC_DIR`` names a folder where each process writes
its figures (``anchorgpu.gunicorn_conf`` sets and empties it, see
``metrics_dir``), and a scrape, whichever process answers it, reads them all.
Without the variable (``anchorgpu serve``, tests) one process counts in memory.
Everything else is read from the database at scrape time, so every server
process and the worker tell the same story: orders by state, customer emails
not sent yet or given up, live holds and bookings, each chain watcher's lag
and errors, and the worker's sweeps (written by the worker after each run).

The page is for the operators' monitoring, not the public: it answers only
with the bearer token ``ANCHORGPU_METRICS_TOKEN``. Without one set it answers
403 to everyone: a TLS proxy on the same machine makes every visitor's request
come from 127.0.0.1, so the address proves nothing. Only with DEBUG on (a
developer's machine) does a request from the machine itself get through.
"""

from __future__ import annotations

import hmac
import time

import prometheus_client.values
from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count, Q
from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, Histogram, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

# Whether prometheus-client chose its multiprocess storage (it decides once, when first imported, from
# PROMETHEUS_MULTIPROC_DIR): asked of the library itself, so the view and the storage always agree.
MULTIPROCESS = bool(getattr(prometheus_client.values.ValueClass, "_multiprocess", False))

REGISTRY = CollectorRegistry(auto_describe=True)  # this process's figures (all of them with one process)
REQUEST_SECONDS = Histogram(
    "anchorgpu_request_seconds", "Time to answer an HTTP request, by view.", ["view", "method", "status"],
    registry=REGISTRY, buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
REQUESTS_IN_FLIGHT = Gauge(
    "anchorgpu_requests_in_flight", "Requests being answered now, over every server process alive.",
    registry=REGISTRY, multiprocess_mode="livesum")  # a process that exits stops counting (child_exit)


class RequestMetricsMiddleware:
    """Times every request (outermost, so the whole stack counts)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        with REQUESTS_IN_FLIGHT.track_inprogress():
            response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = (match.view_name or match._func_path) if match is not None else "unresolved"
        REQUEST_SECONDS.labels(view=view, method=request.method if request.method in _METHODS else "other",
                               status=f"{response.status_code // 100}xx").observe(time.perf_counter() - started)
        return response


_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}


class ShopCollector:
    """Gauges read from the database when Prometheus scrapes."""

    def describe(self):
        return []  # nothing is read when the collector is registered (at import, before the database is ready)

    def collect(self):
        try:
            yield from self._orders()
            yield from self._emails()
            yield from self._bookings()
            yield from self._watchers()
            yield from self._sweeps()
        except DatabaseError:
            up = GaugeMetricFamily("anchorgpu_database_up", "1 when the database answered this scrape.")
            up.add_metric([], 0)
            yield up
            return
        up = GaugeMetricFamily("anchorgpu_database_up", "1 when the database answered this scrape.")
        up.add_metric([], 1)
        yield up

    def _orders(self):
        from anchorgpu.orders.models import Order
        from anchorgpu.orders.states import OrderState

        counts = dict(Order.objects.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
        family = GaugeMetricFamily("anchorgpu_orders", "Orders by state.", labels=["state"])
        for state in OrderState:
            family.add_metric([state.value], counts.get(state.value, 0))
        yield family
        flagged = GaugeMetricFamily("anchorgpu_orders_chain_alert",
                                    "Orders flagged because money the watcher had counted is no longer on chain.")
        flagged.add_metric([], Order.objects.exclude(chain_alert="").count())
        yield flagged

    def _emails(self):
        from anchorgpu.orders.models import OrderEmail, WebhookDelivery

        yield _outbox_gauge("anchorgpu_customer_emails_unsent",
                            "Customer emails not sent: still to be tried, or given up after the last attempt.",
                            OrderEmail.objects.filter(sent_at__isnull=True))
        yield _outbox_gauge("anchorgpu_operator_webhooks_undelivered",
                            "Operator webhook deliveries not delivered: still to be tried, or given up after the "
                            "last attempt.", WebhookDelivery.objects.filter(sent_at__isnull=True))

    def _bookings(self):
        from anchorgpu.allocation.models import Booking

        now = timezone.now()
        live = Booking.objects.filter(state=Booking.State.LIVE).filter(
            ~Q(kind=Booking.Kind.HOLD) | Q(expires_at__gt=now))  # an expired hold no longer counts
        counts = dict(live.values_list("kind").annotate(n=Count("id")).values_list("kind", "n"))
        holds = GaugeMetricFamily("anchorgpu_holds_live", "Holds on cards during a payment window, not expired.")
        holds.add_metric([], counts.get(Booking.Kind.HOLD, 0))
        yield holds
        family = GaugeMetricFamily("anchorgpu_bookings_live", "Live bookings by kind.", labels=["kind"])
        for kind in Booking.Kind:
            family.add_metric([kind.value], counts.get(kind.value, 0))
        yield family

    def _watchers(self):
        from anchorgpu.payments.watch_status import watch_rows

        lag = GaugeMetricFamily("anchorgpu_chain_watcher_lag_blocks", "Blocks at the tip not yet read.",
                                labels=["asset"])
        since = GaugeMetricFamily("anchorgpu_chain_watcher_seconds_since_success",
                                  "Seconds since the last good poll.", labels=["asset"])
        errors = GaugeMetricFamily("anchorgpu_chain_watcher_errors_in_row", "Failed polls in a row.",
                                   labels=["asset"])
        healthy = GaugeMetricFamily("anchorgpu_chain_watcher_ok", "1 when the watcher is neither failing nor "
                                    "stalled.", labels=["asset"])
        tip = GaugeMetricFamily("anchorgpu_chain_watcher_tip", "The last block height seen.", labels=["asset"])
        rows = watch_rows()
        for row in rows:
            if row.status == "off":
                continue
            code, state = row.asset.code, row.state
            healthy.add_metric([code], 1 if row.status == "ok" else 0)
            errors.add_metric([code], state.errors_in_row if state else 0)
            if state is not None and state.lag_blocks is not None:
                lag.add_metric([code], state.lag_blocks)
            if state is not None and state.tip is not None:
                tip.add_metric([code], state.tip)
            if row.seconds_since_success is not None:
                since.add_metric([code], row.seconds_since_success)
        yield from (lag, since, errors, healthy, tip)
        yield from self._networks(rows)

    def _networks(self, rows):
        """Per network (its assets share a node): whether all its watchers are fine, its largest lag, and 1 when
        the node answered with another chain id."""
        from anchorgpu.payments.watch_status import watch_networks

        labels = ["network", "chain_id"]
        ok = GaugeMetricFamily("anchorgpu_chain_network_ok", "1 when every watcher of the network is neither "
                               "failing nor stalled.", labels=labels)
        lag = GaugeMetricFamily("anchorgpu_chain_network_lag_blocks", "The largest lag among the network's "
                                "watchers.", labels=labels)
        other = GaugeMetricFamily("anchorgpu_chain_network_node_on_other_chain", "1 when the network's node "
                                  "answered with another chain id.", labels=labels)
        for group in watch_networks(rows=rows):
            if group.status == "off":
                continue
            key = [group.network, ",".join(str(c) for c in group.chain_ids)]
            ok.add_metric(key, 1 if group.status == "ok" else 0)
            other.add_metric(key, 1 if group.other_chain_ids else 0)
            if group.max_lag is not None:
                lag.add_metric(key, group.max_lag)
        yield from (ok, lag, other)

    def _sweeps(self):
        from .models import SweepRecord

        runs = CounterMetricFamily("anchorgpu_worker_sweep_runs", "Runs of each worker sweep.", labels=["sweep"])
        failures = CounterMetricFamily("anchorgpu_worker_sweep_failures", "Failed runs of each worker sweep.",
                                       labels=["sweep"])
        spent = CounterMetricFamily("anchorgpu_worker_sweep_seconds", "Time spent in each sweep.", labels=["sweep"])
        last = GaugeMetricFamily("anchorgpu_worker_sweep_last_seconds", "How long the last run took.",
                                 labels=["sweep"])
        when = GaugeMetricFamily("anchorgpu_worker_sweep_last_run_timestamp_seconds",
                                 "When the last run started (Unix time).", labels=["sweep"])
        for record in SweepRecord.objects.all():
            runs.add_metric([record.name], record.runs)
            failures.add_metric([record.name], record.failures)
            spent.add_metric([record.name], record.total_seconds)
            last.add_metric([record.name], record.last_seconds)
            if record.last_started_at:
                when.add_metric([record.name], record.last_started_at.timestamp())
        yield from (runs, failures, spent, last, when)


SHOP = ShopCollector()
REGISTRY.register(SHOP)


def scrape_registry() -> CollectorRegistry:
    """What a scrape reports. One process: its own registry. Several: every process's files, added up by
    prometheus-client (counters and histograms summed, dead processes included; the in-flight gauge over
    live processes only), and the database's figures once."""
    if not MULTIPROCESS:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(SHOP)
    return registry


def _allowed(request) -> bool:
    token = getattr(settings, "ANCHORGPU_METRICS_TOKEN", "")
    if token:
        given = request.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())
    return bool(settings.DEBUG) and request.META.get("REMOTE_ADDR") in ("127.0.0.1", "::1")


@never_cache
@require_GET
def metrics(request):
    if not _allowed(request):
        return HttpResponse("Metrics are for the operators' monitoring: set ANCHORGPU_METRICS_TOKEN on the shop "
                            "and send it as 'Authorization: Bearer <token>'.\n",
                            status=403, content_type="text/plain; charset=utf-8")
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)


def _outbox_gauge(name: str, documentation: str, unsent) -> GaugeMetricFamily:
    """An outbox's rows not sent yet, by status: queued (still to be tried) or given up after the last attempt."""
    gauge = GaugeMetricFamily(name, documentation, labels=["status"])
    gauge.add_metric(["queued"], unsent.filter(failed_at__isnull=True).count())
    gauge.add_metric(["given_up"], unsent.filter(failed_at__isnull=False).count())
    return gauge
