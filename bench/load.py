"""Load test of the shop over real HTTP: gunicorn on PostgreSQL, 50 concurrent clients.

What it sets up:

* a PostgreSQL database of its own (``anchorgpu_bench_load``, or the one ``--url`` names), dropped and
  created again, migrated, with the demo shop that ``anchorgpu demo`` loads (catalog, prices, the fleet
  of 88 cards and a few confirmed terms);
* ``--clients`` customers, each with an API token;
* gunicorn serving ``anchorgpu.wsgi:application`` with ``--workers`` processes of ``--threads`` threads
  (gthread workers; by default one process per core, 8 threads each: the production set-up the README
  recommends), on a free port on 127.0.0.1. Rate limits are off for the run
  (``ANCHORGPU_RATE_LIMITS=0``): every client comes from 127.0.0.1, and the limits would refuse them
  as one visitor. ``ANCHORGPU_BENCH_CEILING=1`` mounts the ceiling: a bare Django view
  (anchorgpu.ops.bench_ceiling) that answers without reading the database, through the same
  middleware and server processes as the shop;
* ``anchorgpu worker`` beside it, at its default interval (15 s), as in production: it sends the
  customers' emails that the orders queue (to its log: the console email backend).

The clients (bench/load_client.py) speak HTTP/1.1 on keep-alive connections from one asyncio thread. Each
client keeps the cookies the server sets and sends them back, as a browser does, through every phase: the
same visitors browse throughout, and a visitor who has the CSRF cookie is not given a new one.

What it measures:

1. **Capacity of the reads**: for each of the ceiling, the catalog page (``/en/``, three query strings in turn)
   and the offers API (``GET /api/v1/offers``, the same three), ``--clients`` clients send requests back to
   back (no think time) for ``--seconds``, after a short warm-up. Throughput is answers per second; the
   catalog and offers are compared with the ceiling measured in the same run by the same server.
2. **Mixed load**: ``--mixed-clients`` clients with a think time (exponential, mean ``--think`` s)
   browse the catalog, query the offers and order (45 / 45 / 10 %), for ``--mixed-seconds``. Latency
   percentiles here are what a customer waits at that load.
3. **Capacity of order creation** (``POST /api/v1/orders`` with a bearer token and an Idempotency-Key,
   five configurations in turn, as soon as possible), measured like the reads, last: its hundreds of
   holds book the fleet months ahead, and every later catalog read would have to search past them. The
   live device bookings are printed at the start of each phase.

An order refused because the capacity is taken (409 ``unavailable``: no start within the booking horizon)
is counted apart, not as an error. Errors are 5xx, any other status (409 ``taken`` included: an order for
the earliest start is never refused because a concurrent one won a start), connection failures and
time-outs (30 s).

After the run, in the database: no device has two live booking rows whose periods overlap (the
double-bookings), every order a client saw created has its quote and a live hold of the right number of
cards, and the database holds no order the clients did not see created; once the worker has sent what was
queued, every order has had its "payment details" email sent.

The targets (issue 8): catalog and offers at >= 50 % of the ceiling's throughput; p95 under 100 ms (at
the mixed load); 0 errors; 0 double-bookings. The exit status is 0 when there were no errors, no
double-bookings and every created order is whole, whether or not the speed targets are met (they depend on
the machine); 1 otherwise; 2 when the set-up failed. Run it from the repository root::

    .venv/bin/python bench/load.py [--clients 50] [--seconds 15] [--workers 2 --threads 8]
    .venv/bin/python bench/load.py --quick      # a few seconds, 10 clients: does it still work
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from urllib.parse import urlsplit, urlunsplit

import load_client as lc
import psycopg

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/anchorgpu_bench_load"
RATIO_TARGET = 0.5
P95_TARGET = 0.100
CATALOG_PATHS = ["/en/", "/en/?term=3", "/en/?term=30&quantity=2"]
OFFERS_PATHS = ["/api/v1/offers", "/api/v1/offers?term=3", "/api/v1/offers?term=30&quantity=2"]
# product, environment, quantity, term days. Four B200 lots for 30 days: the fleet has 8 lots, so these sell
# out within the booking horizon during a full run, and the refusals are seen.
ORDER_MIX = [("h100-sxm-80gb", "pytorch-cuda124", 1, 7), ("a100-sxm-80gb", "pytorch-cuda124", 2, 3),
             ("h200-141gb", "pytorch-cuda124", 1, 30), ("mi300x-192gb", "pytorch-rocm63", 1, 7),
             ("b200-lot-2x180gb", "pytorch-cuda128", 4, 30)]
ASSETS = ["btc", "eth", "usdc-ethereum"]
MIX_WEIGHTS = {"catalog": 45, "offers": 45, "orders": 10}


class SetupFailed(Exception):
    pass


# --------------------------------------------------------------------------- database and customers

def _admin_url(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/postgres")), parts.path.lstrip("/")


def _recreate(url: str) -> None:
    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _drop(url: str) -> None:
    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _setup_shop(customers: int) -> list[dict]:
    """Migrate, load the demo, make the customers and their tokens (in this process, with Django)."""
    import django

    django.setup()
    import logging

    logging.disable(logging.WARNING)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from anchorgpu.accounts.api_tokens import api_token_create
    from anchorgpu.demo import load_demo
    from anchorgpu.i18n_catalogs import compile_catalogs

    compile_catalogs(only_stale=True)  # the pages in every language, as `anchorgpu serve` does
    call_command("migrate", verbosity=0)
    if not load_demo():
        raise SetupFailed("the new database was not empty")
    people = []
    for n in range(customers):
        email = f"load{n:03d}@example.com"
        user = get_user_model().objects.create_user(username=email, email=email, password=None)
        _token, secret = api_token_create(user=user, name="load test")
        key = Ed25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                                     serialization.PublicFormat.OpenSSH)
        people.append({"email": email, "token": secret, "ssh": key.decode() + f" load{n:03d}@bench"})
    connection.close()
    return people


# --------------------------------------------------------------------------- the server

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(args, env: dict, log_path: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "gunicorn", "-c", "python:anchorgpu.gunicorn_conf", "anchorgpu.wsgi:application", "--bind", f"127.0.0.1:{args.port}",
               "--worker-class", "gthread", "--workers", str(args.workers), "--threads", str(args.threads),
               "--keep-alive", "30", "--timeout", "60", "--graceful-timeout", "5", "--log-level", "warning"]
    log = open(log_path, "wb")
    server = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    log.close()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SetupFailed(f"gunicorn stopped with status {server.returncode}; see {log_path}")
        if len(lc._children(server.pid)) >= args.workers and _answers(args.port, "/healthz"):
            return server
        time.sleep(0.3)
    _stop_server(server)
    raise SetupFailed("gunicorn did not answer /healthz within 90 s")


def _start_worker(env: dict, log_path: str) -> subprocess.Popen:
    log = open(log_path, "wb")
    worker = subprocess.Popen([sys.executable, "-m", "anchorgpu.cli", "worker", "--no-simulations"], cwd=REPO,
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    return worker


UNSENT = "SELECT count(*) FROM orders_orderemail WHERE sent_at IS NULL AND failed_at IS NULL"


def _drain_emails(url: str, worker: subprocess.Popen, seconds: float = 60) -> int:
    """Wait for the worker to send what the orders queued; the number still unsent."""
    deadline = time.monotonic() + seconds
    while True:
        with psycopg.connect(url) as conn:
            unsent = conn.execute(UNSENT).fetchone()[0]
        if unsent == 0 or time.monotonic() > deadline or worker.poll() is not None:
            return unsent
        time.sleep(1)


def _answers(port: int, path: str) -> bool:
    import http.client

    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", path)
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False


def _stop_server(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=15)


# --------------------------------------------------------------------------- what the clients send

def _get_ok(status: int, body: bytes) -> str:
    return "ok" if status == 200 else f"error: HTTP {status}"


def _actions(host: str, people: list[dict], created: set[str]) -> dict[str, lc.Action]:
    def ceiling(_client, _n):
        return ceiling_raw

    ceiling_raw = lc.get("/bench/ceiling", host)
    catalog_raw = [lc.get(p, host, {"Accept": "text/html"}) for p in CATALOG_PATHS]
    offers_raw = [lc.get(p, host, {"Accept": "application/json"}) for p in OFFERS_PATHS]
    counter = iter(range(10**9))

    def order(client, _n):
        person = people[client % len(people)]
        k = next(counter)
        product, environment, quantity, term = ORDER_MIX[k % len(ORDER_MIX)]
        body = {"product": product, "quantity": quantity, "term": term, "start": None, "environment": environment,
                "options": [], "name": "Load Test", "email": person["email"], "company": "", "country": "PT",
                "billing_address": "", "vat_id": "", "ssh_keys": [person["ssh"]], "asset": ASSETS[k % len(ASSETS)],
                "accept": True}
        return lc.post_json("/api/v1/orders", host, json.dumps(body).encode(),
                            {"Authorization": f"Bearer {person['token']}", "Idempotency-Key": uuid.uuid4().hex,
                             "Accept": "application/json"})

    def judge_order(status: int, body: bytes) -> str:
        if status in (200, 201):  # 200: the same key replayed after a reopened connection
            reference = json.loads(body).get("reference")
            if not reference:
                return "error: created without a reference"
            created.add(reference)
            return "created"
        if status == 409:
            code = json.loads(body).get("error", {}).get("code")
            if code == "unavailable":
                return "refused: sold out"
            # Every order here asks for the earliest start, which is searched in the product's turn: a
            # concurrent order can move it later, never take it ("taken" is for a date the customer chose).
            return f"error: 409 {code}"
        return f"error: HTTP {status}"

    return {"ceiling": lc.Action("ceiling", ceiling, _get_ok),
            "catalog": lc.Action("catalog", lambda c, n: catalog_raw[(c + n) % len(catalog_raw)], _get_ok),
            "offers": lc.Action("offers", lambda c, n: offers_raw[(c + n) % len(offers_raw)], _get_ok),
            "orders": lc.Action("orders", order, judge_order)}


# --------------------------------------------------------------------------- phases and tables

def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _outcomes(f: lc.Figures) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(f.outcomes.items(), key=lambda kv: (-kv[1], kv[0])))


def _table(rows: list[tuple[str, lc.Figures, str]]) -> None:
    print(f"  {'endpoint':<10} {'requests':>8} {'req/s':>8} {'vs ceiling':>10} {'p50 ms':>8} {'p95 ms':>8} "
          f"{'p99 ms':>8}  outcomes")
    for name, f, ratio in rows:
        print(f"  {name:<10} {f.requests:>8} {f.per_second:>8.1f} {ratio:>10} {_ms(f.p50):>8} {_ms(f.p95):>8} "
              f"{_ms(f.p99):>8}  {_outcomes(f)}")


def _run_phase(phase: lc.Phase, port: int, server_pid: int, seed: int) -> str:
    before = lc.cpu_snapshot(server_pid)
    lc.run(phase, "127.0.0.1", port, seed=seed)
    return lc.cpu_line(before, lc.cpu_snapshot(server_pid))


def _transactions(url: str) -> int:
    """The database's transactions so far (PostgreSQL's statistics, which each server process sends within
    about a second): a cached answer costs one, its snapshot read, unless it shared another's."""
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database "
                            "WHERE datname = current_database()").fetchone()[0]


def _live_rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM allocation_bookingdevice WHERE live").fetchone()[0]


def _capacity(args, actions, server_pid: int, names: tuple[str, ...], title: str,
              ceiling: float | None = None) -> tuple[dict[str, lc.Figures], int]:
    print(f"{title}: {args.clients} clients per endpoint, back to back (no think time), {args.seconds:g} s each "
          f"after {args.warmup:g} s of warm-up; {_live_rows(args.url)} live device bookings at the start")
    results, warm_errors = {}, 0
    for name in names:
        action = actions[name]
        if args.warmup:
            warm = lc.run(lc.Phase(args.clients, args.warmup, lambda rng, a=action: a, cookies=args.cookies),
                          "127.0.0.1", args.port, seed=1000 + len(name))
            warm_errors += sum(1 for s in warm.samples if s[3].startswith("error"))
        phase = lc.Phase(args.clients, args.seconds, lambda rng, a=action: a, cookies=args.cookies)
        transactions = _transactions(args.url)
        cpu = _run_phase(phase, args.port, server_pid, seed=len(name))
        time.sleep(1.5)  # the server processes' statistics of the phase's last second
        transactions = _transactions(args.url) - transactions
        results[name] = lc.figures(phase, name)
        print(f"   {name}: {cpu}; database transactions per answer {transactions / max(1, results[name].requests):.2f}")
    ceiling = results["ceiling"].per_second if "ceiling" in results else ceiling
    _table([(name, f, "-" if name == "ceiling" else f"{100 * f.per_second / ceiling:.0f} %")
            for name, f in results.items()])
    return results, warm_errors


def _mixed(args, actions, server_pid: int) -> tuple[dict[str, lc.Figures], int]:
    names = list(MIX_WEIGHTS)
    weights = [MIX_WEIGHTS[n] for n in names]

    def pick(rng: random.Random) -> lc.Action:
        return actions[rng.choices(names, weights)[0]]

    print(f"2. mixed load: {args.mixed_clients} clients, think time exponential with mean {args.think:g} s, "
          f"{'/'.join(f'{MIX_WEIGHTS[n]} % {n}' for n in names)}, {args.mixed_seconds:g} s after "
          f"{args.warmup:g} s of warm-up; {_live_rows(args.url)} live device bookings at the start")
    warm_errors = 0
    if args.warmup:  # as the other phases: the first orders of each server thread are not measured
        warm = lc.Phase(args.mixed_clients, args.warmup, pick, think=args.think, cookies=args.cookies)
        lc.run(warm, "127.0.0.1", args.port, seed=98)
        warm_errors = sum(1 for s in warm.samples if s[3].startswith("error"))
    phase = lc.Phase(args.mixed_clients, args.mixed_seconds, pick, think=args.think, cookies=args.cookies)
    cpu = _run_phase(phase, args.port, server_pid, seed=99)
    results = {name: lc.figures(phase, name) for name in names}
    total = sum(f.per_second for f in results.values())
    print(f"   {cpu}")
    print(f"   offered: {total:.1f} req/s in all")
    _table([(name, f, "") for name, f in results.items()])
    return results, warm_errors


# --------------------------------------------------------------------------- checks in the database

DOUBLE_BOOKINGS = """
    SELECT count(*) FROM allocation_bookingdevice a
    JOIN allocation_bookingdevice b ON a.device_id = b.device_id AND a.id < b.id
         AND a.starts_at < b.ends_at AND b.starts_at < a.ends_at
    WHERE a.live AND b.live"""
ORDERS_WHOLE = """
    SELECT o.reference, q.id IS NOT NULL, b.kind, b.state,
           -- the hold covers the term (an as-soon-as-possible one holds past it, for the term to slide)
           b.starts_at = o.starts_at AND b.ends_at >= o.ends_at,
           (SELECT count(*) FROM allocation_bookingdevice s WHERE s.booking_id = b.id AND s.live),
           o.quantity * p.cards_per_unit
    FROM orders_order o
    JOIN catalog_product p ON p.id = o.product_id
    LEFT JOIN payments_quote q ON q.order_id = o.id
    LEFT JOIN allocation_booking b ON b.id = o.booking_id
    JOIN auth_user u ON u.id = o.user_id
    WHERE u.username LIKE 'load%@example.com'"""


ORDERS_WITHOUT_EMAIL = """
    SELECT count(*) FROM orders_order o JOIN auth_user u ON u.id = o.user_id
    WHERE u.username LIKE 'load%@example.com' AND NOT EXISTS (
        SELECT 1 FROM orders_orderemail e WHERE e.order_id = o.id AND e.kind = 'order_placed'
        AND e.sent_at IS NOT NULL)"""


def _check(url: str, created: set[str]) -> dict:
    with psycopg.connect(url) as conn:
        double = conn.execute(DOUBLE_BOOKINGS).fetchone()[0]
        live_rows = conn.execute("SELECT count(*) FROM allocation_bookingdevice WHERE live").fetchone()[0]
        rows = conn.execute(ORDERS_WHOLE).fetchall()
        no_email = conn.execute(ORDERS_WITHOUT_EMAIL).fetchone()[0]
    in_db = {r[0] for r in rows}
    broken = [r[0] for r in rows if not (r[1] and r[2] == "hold" and r[3] == "live" and r[4] and r[5] == r[6])]
    return {"double": double, "live_rows": live_rows, "in_db": len(in_db), "broken": broken,
            "missing": sorted(created - in_db), "unseen": sorted(in_db - created), "no_email": no_email}


# --------------------------------------------------------------------------- main

def _verdicts(capacity, mixed, errors: int, checks: dict, created: int) -> bool:
    ceiling = capacity["ceiling"].per_second
    for name in ("catalog", "offers"):
        ratio = capacity[name].per_second / ceiling if ceiling else 0.0
        verdict = "PASS" if ratio >= RATIO_TARGET else "FAIL"
        print(f"target: {name} throughput >= {RATIO_TARGET * 100:.0f} % of the ceiling's: {ratio * 100:.0f} % "
              f"({capacity[name].per_second:.1f} of {ceiling:.1f} req/s): {verdict}")
    for name, f in mixed.items():
        print(f"target: {name} p95 under {P95_TARGET * 1000:.0f} ms at the mixed load: {_ms(f.p95)} ms: "
              f"{'PASS' if f.p95 < P95_TARGET else 'FAIL'}")
    print(f"target: 0 errors: {errors}: {'PASS' if errors == 0 else 'FAIL'}")
    print(f"target: 0 double-bookings: {checks['double']} (among {checks['live_rows']} live device bookings): "
          f"{'PASS' if checks['double'] == 0 else 'FAIL'}")
    whole = not checks["broken"] and not checks["missing"] and not checks["unseen"]
    print(f"check: every created order has its quote and its hold: {created - len(checks['broken'])} of {created}; "
          f"orders in the database {checks['in_db']}, not seen created by a client {len(checks['unseen'])}, "
          f"seen created but missing {len(checks['missing'])}: {'PASS' if whole else 'FAIL'}")
    emailed = checks["no_email"] == 0
    print(f"check: every order's payment details sent by the worker: {checks['in_db'] - checks['no_email']} of "
          f"{checks['in_db']}: {'PASS' if emailed else 'FAIL'}")
    return errors == 0 and checks["double"] == 0 and whole and emailed


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="the PostgreSQL database to create, use and drop")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="gunicorn processes (one per core)")
    parser.add_argument("--threads", type=int, default=8, help="threads per gunicorn process")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients in the capacity phase")
    parser.add_argument("--seconds", type=float, default=15, help="measured seconds per endpoint (capacity)")
    parser.add_argument("--warmup", type=float, default=2, help="unmeasured seconds before each endpoint")
    parser.add_argument("--mixed-clients", type=int, default=50)
    parser.add_argument("--mixed-seconds", type=float, default=30)
    parser.add_argument("--think", type=float, default=1.0, help="mean think time of a mixed-load client (s)")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--quick", action="store_true", help="10 clients, a few seconds per phase")
    args = parser.parse_args()
    if args.quick:
        args.clients, args.seconds, args.warmup = 10, 2, 0.5
        args.mixed_clients, args.mixed_seconds, args.think = 10, 3, 0.2
        args.workers, args.threads = 2, 2
    if min(args.workers, args.threads, args.clients, args.mixed_clients) < 1 or args.seconds <= 0:
        parser.error("workers, threads and clients must be at least 1, and seconds above 0")
    return args


def main() -> int:
    args = _arguments()
    if not args.url.startswith(("postgres://", "postgresql://")):
        print("--url must name a PostgreSQL database", file=sys.stderr)
        return 2
    args.port = _free_port()
    args.cookies = {}  # each client's cookie jar, kept through every phase: the same 50 visitors throughout
    data_dir = tempfile.mkdtemp(prefix="anchorgpu-load-")
    env = {**os.environ, "DATABASE_URL": args.url, "ANCHORGPU_DATA_DIR": data_dir, "ANCHORGPU_RATE_LIMITS": "0",
           "ANCHORGPU_ALLOW_TEST_KEYS": "1", "ANCHORGPU_BENCH_CEILING": "1", "DJANGO_SETTINGS_MODULE":
           "anchorgpu.settings", "ANCHORGPU_ENV": "development", "ANCHORGPU_DEBUG": "0"}
    env.pop("ANCHORGPU_DATABASE_URL", None)
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "ANCHORGPU_DATA_DIR", "ANCHORGPU_ALLOW_TEST_KEYS",
                                           "DJANGO_SETTINGS_MODULE", "ANCHORGPU_ENV", "ANCHORGPU_DEBUG")})
    os.environ.pop("ANCHORGPU_DATABASE_URL", None)
    log_path = os.path.join(data_dir, "server.log")
    server = worker = None
    try:
        _recreate(args.url)
        people = _setup_shop(max(args.clients, args.mixed_clients))
        server = _start_server(args, env, log_path)
        worker = _start_worker(env, os.path.join(data_dir, "worker.log"))
    except Exception as exc:  # noqa: BLE001 - any set-up failure ends the run with its reason
        traceback.print_exc()
        print(f"PROBLEM: set-up failed: {exc} (server log: {log_path})")
        for process in (server, worker):
            if process is not None:
                _stop_server(process)
        return 2
    print(f"server: gunicorn, {args.workers} processes x {args.threads} threads (gthread), keep-alive; "
          f"PostgreSQL database {urlsplit(args.url).path.lstrip('/')}; machine: {os.cpu_count()} cores, "
          f"the load generator on the same machine")
    print("rate limits OFF for this run (ANCHORGPU_RATE_LIMITS=0): every client is 127.0.0.1")
    created: set[str] = set()
    actions = _actions(f"127.0.0.1:{args.port}", people, created)
    try:
        capacity, warm_errors = _capacity(args, actions, server.pid, ("ceiling", "catalog", "offers"),
                                          "1. capacity of the reads")
        mixed, mixed_warm_errors = _mixed(args, actions, server.pid)
        warm_errors += mixed_warm_errors
        ordering, more_warm_errors = _capacity(args, actions, server.pid, ("orders",), "3. capacity of order creation",
                                               ceiling=capacity["ceiling"].per_second)
        capacity["orders"] = ordering["orders"]
        warm_errors += more_warm_errors
        print(f"   {_live_rows(args.url)} live device bookings at the end")
    finally:
        _stop_server(server)
        unsent = _drain_emails(args.url, worker)
        _stop_server(worker)
    print(f"   the worker's emails: {unsent} still unsent after the run (it sends every 15 s)")
    errors = warm_errors + sum(f.errors for f in capacity.values()) + sum(f.errors for f in mixed.values())
    checks = _check(args.url, created)
    print(f"orders created: {len(created)}; errors in the warm-ups: {warm_errors}")
    ok = _verdicts(capacity, mixed, errors, checks, len(created))
    if errors:
        with open(log_path, errors="replace") as log:
            tail = [line for line in log.read().splitlines() if "Error" in line or "Traceback" in line][-20:]
        print(f"PROBLEM: errors; the server log is kept in {log_path}; its last error lines:\n" + "\n".join(tail))
    else:
        shutil.rmtree(data_dir, ignore_errors=True)
    if not args.keep:
        _drop(args.url)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
