"""Allocation benchmark against PostgreSQL.

What it measures, on a fleet of ``--devices`` GPUs (8 per host, spread over
the five products of the demo catalog; B200 hosts have NVLink pairs) with
``--bookings`` bookings laid out over roughly the next year:

1. availability reads: ``selectors.units_free`` latency (p50/p95/p99, target
   p95 < 20 ms), ``selectors.earliest_start`` latency (p50/p95, reported) and,
   for context, the live catalog ``catalog.offers.offers`` (all products);
2. hold placement: ``services.hold_place`` calls per second from ``--workers``
   processes for ``--seconds`` each, successes and "no longer available"
   counted apart;
3. the raw rate of one-row INSERT transactions (autocommit) into a plain
   table of the same database with the same number of processes, and the
   ratio holds/s / inserts/s (target >= 0.5);
4. a final check that no device has two overlapping live booking rows.

The benchmark drops and recreates its own database (``anchorgpu_bench`` by
default) on the server given by ``--url``; nothing else is touched.

Run it from the repository root (``make bench`` does the same)::

    .venv/bin/python bench/allocation.py
    .venv/bin/python bench/allocation.py --workers 8 --seconds 20 \\
        --url postgres://postgres@127.0.0.1:5432/anchorgpu_bench
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import random
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit, urlunsplit

import psycopg

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/anchorgpu_bench"
CARDS_PER_HOST = 8
TERMS = (3, 7, 30)
HORIZON = timedelta(days=365)

# Shape of the generated bookings: mostly short terms, mostly single units,
# gaps between bookings on a unit mostly short with a long tail, so that the
# next year is about half booked and long terms still fit here and there.
TERM_WEIGHTS = (60, 30, 10)
UNITS_WEIGHTS = {1: 90, 2: 8, 4: 2}
SHORT_GAP_DAYS, LONG_GAP_DAYS, LONG_GAP_SHARE = 1.5, 10.0, 0.25
MAINTENANCE_SHARE = 0.01
LIVE_HOLD_SHARE = 0.05          # of future bookings: holds in their payment window
UNSWEPT_HOLD_SHARE = 0.002      # of future bookings: expired holds the worker has not marked yet
EXPIRED_HOLD_SHARE = 0.06       # of all bookings: holds already marked expired (rows not live)


# --------------------------------------------------------------------------- setup

def _with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def recreate_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(_with_db(url, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def django_setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.pop("ANCHORGPU_DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anchorgpu.settings")
    import django
    django.setup()


def hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def build_fleet(n_devices: int):
    """Hosts of 8 cards, products round-robin; returns [(host, product, units)],
    each unit a tuple of device ids (a pair for the B200 lot)."""
    from anchorgpu.demo import load_catalog, load_price_list
    from anchorgpu.fleet.models import Device, Host, Site

    products = load_catalog()
    load_price_list(products)
    sites = [Site.objects.create(code="fra1", name="Frankfurt", country="DE"),
             Site.objects.create(code="lis1", name="Lisbon", country="PT")]
    catalog = list(products.values())
    hosts = Host.objects.bulk_create([
        Host(site=sites[i % 2], name=f"bench-{catalog[i % len(catalog)].slug.split('-')[0]}-{i:04d}",
             product=catalog[i % len(catalog)])
        for i in range(max(1, n_devices // CARDS_PER_HOST))])
    devices = Device.objects.bulk_create([
        Device(host=h, index=i, uid=f"{h.name}-gpu{i}",
               nvlink_pair=(i // 2) if h.product.cards_per_unit == 2 else None)
        for h in hosts for i in range(CARDS_PER_HOST)])
    by_host: dict[int, list[int]] = {}
    for d in devices:
        by_host.setdefault(d.host_id, []).append(d.id)
    fleet = []
    for h in hosts:
        ids, per_unit = by_host[h.id], h.product.cards_per_unit
        fleet.append((h, h.product, [tuple(ids[i:i + per_unit]) for i in range(0, len(ids), per_unit)]))
    return catalog, fleet


def build_bookings(fleet, target: int, rng: random.Random, now: datetime) -> tuple[int, int]:
    """Lay bookings end to end (with gaps) on every unit of every host, so live
    rows never overlap; expired holds, whose rows are not live, go anywhere."""
    from anchorgpu.allocation.models import Booking, BookingDevice

    n_expired = int(target * EXPIRED_HOLD_SHARE)
    laid_target = target - n_expired
    total_units = sum(len(units) for _h, _p, units in fleet)
    plan: list[tuple[Booking, list[int]]] = []  # booking, device ids
    units_before = 0
    for host, product, units in fleet:  # each host's share of the bookings, by its number of units
        budget = laid_target * (units_before + len(units)) // total_units - laid_target * units_before // total_units
        units_before += len(units)
        cursor = [hour(now - timedelta(days=rng.uniform(0, 20))) for _ in units]
        for _ in range(budget):
            if rng.random() < MAINTENANCE_SHARE:
                start = max(cursor) + timedelta(hours=rng.randint(1, 48))
                end = start + timedelta(hours=rng.choice((6, 12, 24, 48)))
                chosen = list(range(len(units)))
                booking = Booking(kind="maintenance", host=host, starts_at=start, ends_at=end,
                                  reason="bench: planned maintenance")
            else:
                q = min(len(units), rng.choices(list(UNITS_WEIGHTS), list(UNITS_WEIGHTS.values()))[0])
                chosen = sorted(range(len(units)), key=lambda u: cursor[u])[:q]
                mean_gap = LONG_GAP_DAYS if rng.random() < LONG_GAP_SHARE else SHORT_GAP_DAYS
                start = hour(max(cursor[u] for u in chosen) + timedelta(days=rng.expovariate(1 / mean_gap)))
                end = start + timedelta(days=rng.choices(TERMS, TERM_WEIGHTS)[0])
                booking = Booking(kind="confirmed", product=product, quantity=q, starts_at=start, ends_at=end,
                                  reference=f"bench-{len(plan)}")
                roll = rng.random()
                if start > now and roll < LIVE_HOLD_SHARE:
                    booking.kind, booking.expires_at = "hold", now + timedelta(minutes=rng.randint(20, 60))
                elif start > now and roll < LIVE_HOLD_SHARE + UNSWEPT_HOLD_SHARE:
                    booking.kind, booking.expires_at = "hold", now - timedelta(minutes=rng.randint(1, 30))
            for u in chosen:
                cursor[u] = end
            plan.append((booking, [d for u in chosen for d in units[u]]))
    for n in range(n_expired):
        host, product, units = rng.choice(fleet)
        start = hour(now + timedelta(days=rng.uniform(0, 365)))
        booking = Booking(kind="hold", state="expired", product=product, quantity=1, starts_at=start,
                          ends_at=start + timedelta(days=rng.choice(TERMS)),
                          expires_at=now - timedelta(hours=rng.randint(1, 24 * 30)), reference=f"bench-x{n}")
        plan.append((booking, list(rng.choice(units))))

    Booking.objects.bulk_create([b for b, _ in plan], batch_size=5000)
    rows = [BookingDevice(booking_id=b.id, device_id=d, starts_at=b.starts_at, ends_at=b.ends_at,
                          expires_at=b.expires_at, live=b.state == "live")
            for b, devices in plan for d in devices]
    BookingDevice.objects.bulk_create(rows, batch_size=5000)
    return len(plan), len(rows)


# --------------------------------------------------------------------------- measuring

def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def random_request(rng: random.Random, catalog, now: datetime):
    """A product, a whole-hour start from the next hour to a day inside the booking horizon, a term."""
    start = hour(now) + timedelta(hours=rng.randint(1, HORIZON // timedelta(hours=1) - 24))
    return rng.choice(catalog), start, rng.choice(TERMS)


def time_reads(catalog, rng: random.Random, calls: int, warmup: int):
    from anchorgpu.allocation import selectors
    from anchorgpu.allocation.periods import Period
    from anchorgpu.catalog.offers import offers

    def timed(fn) -> list[float]:
        samples = []
        for i in range(warmup + calls):
            product, start, term = random_request(rng, catalog, datetime.now(timezone.utc))
            t0 = time.perf_counter()
            fn(product, start, term)
            if i >= warmup:
                samples.append((time.perf_counter() - t0) * 1000)
        return samples

    free = timed(lambda p, s, t: selectors.units_free(p, Period.of_days(s, t)))
    earliest = timed(lambda p, s, t: selectors.earliest_start(p, quantity=rng.choice((1, 2, 4)), term_days=t,
                                                               not_before=s))
    catalog_ms = []
    for i in range(3 + max(10, calls // 15)):
        t0 = time.perf_counter()
        offers(term_days=rng.choice(TERMS), quantity=rng.choice((1, 2, 4)))
        if i >= 3:
            catalog_ms.append((time.perf_counter() - t0) * 1000)
    return free, earliest, catalog_ms


def hold_worker(url: str, seed: int, seconds: float, ready, results) -> None:
    django_setup(url)
    from django.db import connection

    from anchorgpu.allocation.errors import NoLongerAvailable
    from anchorgpu.allocation.services import hold_place
    from anchorgpu.catalog.models import Product

    rng = random.Random(seed)
    catalog = list(Product.objects.all())
    ready.wait(timeout=300)
    ok = unavailable = 0
    latencies = []
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        product, start, term = random_request(rng, catalog, datetime.now(timezone.utc))
        t = time.perf_counter()
        try:
            hold_place(product=product, quantity=rng.choice((1, 2)), start=start, term_days=term,
                       actor="bench", reference="bench-hold")
            ok += 1
        except NoLongerAvailable:
            unavailable += 1
        latencies.append((time.perf_counter() - t) * 1000)
    results.put((ok, unavailable, time.perf_counter() - t0, latencies))
    connection.close()


def insert_worker(url: str, seed: int, seconds: float, ready, results) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        ready.wait(timeout=300)
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while time.perf_counter() < deadline:
            conn.execute("INSERT INTO bench_raw_insert (worker, n, note) VALUES (%s, %s, %s)",
                         (seed, n, "bench row"))
            n += 1
        results.put((n, 0, time.perf_counter() - t0, []))


def run_workers(target, url: str, workers: int, seconds: float, seed: int):
    """Start the processes, release them together, return summed counts per second of wall time."""
    ctx = mp.get_context("spawn")
    ready, results = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=target, args=(url, seed + i, seconds, ready, results)) for i in range(workers)]
    for p in procs:
        p.start()
    out = []
    while len(out) < workers:
        try:
            out.append(results.get(timeout=1))
        except queue.Empty:
            if any(p.exitcode for p in procs):  # a worker died (its traceback is on stderr)
                for p in procs:
                    p.terminate()
                raise SystemExit(f"a {target.__name__} process failed")
    for p in procs:
        p.join()
    elapsed = max(o[2] for o in out)
    return sum(o[0] for o in out), sum(o[1] for o in out), elapsed, [x for o in out for x in o[3]]


BOOKED_SHARE_SQL = """
    SELECT coalesce(sum(extract(epoch FROM least(ends_at, %(until)s) - greatest(starts_at, %(now)s))), 0)
           / extract(epoch FROM %(until)s - %(now)s) / (SELECT count(*) FROM fleet_device)
      FROM allocation_bookingdevice
     WHERE live AND starts_at < %(until)s AND ends_at > %(now)s
"""

OVERLAP_SQL = """
    SELECT count(*) FROM allocation_bookingdevice a
    JOIN allocation_bookingdevice b
      ON a.device_id = b.device_id AND a.id < b.id AND a.live AND b.live
     AND a.starts_at < b.ends_at AND b.starts_at < a.ends_at
"""


# --------------------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="database to (re)create and use (default %(default)s)")
    parser.add_argument("--workers", type=int, default=4, help="concurrent processes for the write phases")
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each write phase")
    parser.add_argument("--devices", type=int, default=2000, help="GPUs in the fleet (8 per host)")
    parser.add_argument("--bookings", type=int, default=50_000, help="bookings to generate")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument("--reads", type=int, default=300, help="timed calls per availability read")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    t = time.perf_counter()
    recreate_database(args.url)
    django_setup(args.url)
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    now = datetime.now(timezone.utc)
    catalog, fleet = build_fleet(args.devices)
    n_bookings, n_rows = build_bookings(fleet, args.bookings, rng, now)
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
        cur.execute("SELECT version(), pg_size_pretty(pg_database_size(current_database()))")
        version, size = cur.fetchone()
        cur.execute("SELECT count(*) FILTER (WHERE live), max(ends_at) FROM allocation_bookingdevice")
        live_rows, last_end = cur.fetchone()
        cur.execute(BOOKED_SHARE_SQL, {"now": now, "until": now + HORIZON})
        booked = cur.fetchone()[0]
        cur.execute("CREATE TABLE bench_raw_insert (id bigserial PRIMARY KEY, worker int NOT NULL, "
                    "n int NOT NULL, note text NOT NULL, at timestamptz NOT NULL DEFAULT now())")
    n_devices = sum(len(unit) for _h, _p, units in fleet for unit in units)
    print(f"setup: {len(fleet)} hosts, {n_devices} devices, {n_bookings} bookings, {n_rows} booking rows "
          f"({live_rows} live), {booked:.0%} of the next year's device-time booked, last booking ends "
          f"{last_end:%Y-%m-%d}, database {size}, {time.perf_counter() - t:.1f} s", flush=True)

    free_ms, earliest_ms, catalog_ms = time_reads(catalog, rng, args.reads, warmup=max(10, args.reads // 10))
    print(f"units_free:     p50 {percentile(free_ms, .5):.2f} ms  p95 {percentile(free_ms, .95):.2f} ms  "
          f"p99 {percentile(free_ms, .99):.2f} ms  ({len(free_ms)} calls)", flush=True)
    print(f"earliest_start: p50 {percentile(earliest_ms, .5):.2f} ms  p95 {percentile(earliest_ms, .95):.2f} ms  "
          f"({len(earliest_ms)} calls)", flush=True)
    print(f"catalog offers: p50 {percentile(catalog_ms, .5):.1f} ms  p95 {percentile(catalog_ms, .95):.1f} ms  "
          f"({len(catalog_ms)} calls, {len(catalog)} products each)", flush=True)

    connection.close()  # the write phases run in their own processes
    ok, unavailable, hold_s, hold_ms = run_workers(hold_worker, args.url, args.workers, args.seconds, args.seed * 1000)
    holds = ok / hold_s
    print(f"hold_place:     {ok} placed, {unavailable} no longer available in {hold_s:.1f} s -> {holds:.1f} holds/s "
          f"(call p50 {percentile(hold_ms, .5):.1f} ms, p95 {percentile(hold_ms, .95):.1f} ms)", flush=True)
    rows, _, raw_s, _ = run_workers(insert_worker, args.url, args.workers, args.seconds, args.seed * 2000)
    inserts = rows / raw_s
    print(f"raw INSERT:     {rows} rows in {raw_s:.1f} s -> {inserts:.1f} rows/s", flush=True)

    with connection.cursor() as cur:
        cur.execute(OVERLAP_SQL)
        overlaps = cur.fetchone()[0]

    def verdict(good: bool) -> str:
        return "ok" if good else "MISSED"

    def ms(samples: list[float], *quantiles: float) -> str:
        return "   ".join(f"p{round(q * 100)} {percentile(samples, q):.2f} ms" for q in quantiles)

    p95, ratio = percentile(free_ms, .95), holds / inserts
    print("\n".join([
        "",
        "== allocation benchmark ==",
        f"database          {version.split(',')[0]}",
        f"fleet             {len(fleet)} hosts, {n_devices} devices, {len(catalog)} products",
        f"bookings          {n_bookings} ({n_rows} device rows, {live_rows} live before the write phases; "
        f"{booked:.0%} of the next year booked)",
        f"workers           {args.workers} processes, {args.seconds:g} s per write phase, seed {args.seed}",
        f"units_free        {ms(free_ms, .5, .95, .99)}   [target p95 < 20 ms: {verdict(p95 < 20)}]",
        f"earliest_start    {ms(earliest_ms, .5, .95)}",
        f"catalog offers    {ms(catalog_ms, .5, .95)}   (live catalog, all products)",
        f"hold_place        {holds:.1f} holds/s ({ok} placed, {unavailable} no longer available)",
        f"raw INSERT        {inserts:.1f} rows/s",
        f"holds / inserts   {ratio:.3f}   [target >= 0.5: {verdict(ratio >= 0.5)}]",
        f"overlapping live  {overlaps}   [must be 0: {verdict(overlaps == 0)}]",
    ]))
    if overlaps:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
