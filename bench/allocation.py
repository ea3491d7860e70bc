"""Allocation benchmark against PostgreSQL.

What it measures, on a fleet of ``--devices`` GPUs (8 per host, spread over
the five products of the demo catalog; B200 hosts have NVLink pairs) with
``--bookings`` bookings laid out over roughly the next year:

1. availability reads: ``selectors.units_free`` latency (target p95 < 20 ms),
   ``selectors.earliest_start`` (target p95 < 50 ms), the catalog's
   ``catalog.offers.offers`` for all products, and the live catalog's work for
   a new second, ``offers.fleet_read`` then ``offers`` from it (target p95 <
   100 ms for both);
2. hold placement: ``services.hold_place`` calls per second from ``--workers``
   processes for ``--seconds`` each, successes and "no longer available"
   counted apart;
3. the raw rate of one-row INSERT transactions (autocommit) into a plain
   table of the same database with the same number of processes, and the
   ratio holds/s / inserts/s (target >= 0.5);
4. a final check that no device has two overlapping live booking rows.

``--fleet`` is the fleet scale of issue 22: 20,000 devices and 1,000,000
bookings, most of them over (a year of history) and the rest in the coming
months, loaded with COPY in about a minute; it times the reads only (targets:
``units_free`` p95 < 20 ms, ``earliest_start`` p95 < 50 ms, the catalog's
offers p95 < 100 ms) and checks the no-overlap invariant::

    .venv/bin/python bench/allocation.py --fleet --drop \\
        --url postgres://postgres@127.0.0.1:5432/anchorgpu_h5bench

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


def drop_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(_with_db(url, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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


def build_bookings(fleet, target: int, rng: random.Random, now: datetime, url: str, *,
                   past_days: int = 0) -> tuple[int, int, int]:
    """Lay bookings end to end (with gaps) on every unit of every host, so live
    rows never overlap; expired holds, whose rows are not live, go anywhere.

    Each unit's first booking starts up to 20 days before now, or ``past_days`` more than that: with a year
    of past, most bookings are over and the rest fill the coming months. The rows are written with COPY,
    some hosts at a time (the exclusion constraint still checks every live row). Returns the bookings, the
    device rows, and how many bookings were moved before a unit's first one because they would have started
    past the booking horizon."""
    n_expired = int(target * EXPIRED_HOLD_SHARE)
    laid_target = target - n_expired
    total_units = sum(len(units) for _h, _p, units in fleet)
    latest = now + HORIZON
    writer = _BookingWriter(url)
    units_before = left_out = 0
    for host, product, units in fleet:  # each host's share of the bookings, by its number of units
        budget = laid_target * (units_before + len(units)) // total_units - laid_target * units_before // total_units
        units_before += len(units)
        cursor = [hour(now - timedelta(days=past_days + rng.uniform(0, 20))) for _ in units]
        back = list(cursor)  # where each unit's history begins
        for _ in range(budget):
            expires = None
            if rng.random() < MAINTENANCE_SHARE:
                start = max(cursor) + timedelta(hours=rng.randint(1, 48))
                end = start + timedelta(hours=rng.choice((6, 12, 24, 48)))
                chosen = list(range(len(units)))
                row = ["maintenance", "live", None, host.pk, 0, start, end, None, "", "bench: planned maintenance"]
            else:
                q = min(len(units), rng.choices(list(UNITS_WEIGHTS), list(UNITS_WEIGHTS.values()))[0])
                chosen = sorted(range(len(units)), key=lambda u: cursor[u])[:q]
                mean_gap = LONG_GAP_DAYS if rng.random() < LONG_GAP_SHARE else SHORT_GAP_DAYS
                start = hour(max(cursor[u] for u in chosen) + timedelta(days=rng.expovariate(1 / mean_gap)))
                end = start + timedelta(days=rng.choices(TERMS, TERM_WEIGHTS)[0])
                kind = "confirmed"
                roll = rng.random()
                if start > now and roll < LIVE_HOLD_SHARE:
                    kind, expires = "hold", now + timedelta(minutes=rng.randint(20, 60))
                elif start > now and roll < LIVE_HOLD_SHARE + UNSWEPT_HOLD_SHARE:
                    kind, expires = "hold", now - timedelta(minutes=rng.randint(1, 30))
                row = [kind, "live", product.pk, None, q, start, end, expires, f"bench-{writer.count}", ""]
            if start > latest:  # nobody may book that far ahead: this one goes before the unit's history
                left_out += 1
                length = end - start
                end = min(back[u] for u in chosen) - timedelta(hours=rng.randint(1, 48))
                start = end - length
                row[5], row[6] = start, end
                if row[0] == "hold":  # long past: paid
                    row[0], row[7] = "confirmed", None
                for u in chosen:
                    back[u] = start
            else:
                for u in chosen:
                    cursor[u] = end
            writer.add(row, [d for u in chosen for d in units[u]], live=True)
    for n in range(n_expired):
        host, product, units = rng.choice(fleet)
        start = hour(now + timedelta(days=rng.uniform(0, 365)))
        row = ["hold", "expired", product.pk, None, 1, start, start + timedelta(days=rng.choice(TERMS)),
               now - timedelta(hours=rng.randint(1, 24 * 30)), f"bench-x{n}", ""]
        writer.add(row, list(rng.choice(units)), live=False)
    writer.close()
    return writer.count, writer.rows, left_out


class _BookingWriter:
    """Bookings and their device rows written with COPY in chunks, on a connection of its own; booking ids are
    given here (the database is new) and the id sequence is moved past them at the end."""

    BOOKING_COLUMNS = ("id, kind, state, product_id, host_id, quantity, starts_at, ends_at, expires_at, "
                       "reference, reason, created_at")
    SLOT_COLUMNS = "booking_id, device_id, starts_at, ends_at, expires_at, live"
    CHUNK = 50_000

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url)
        self.created = datetime.now(timezone.utc)
        self.count = self.rows = 0
        self.bookings: list[tuple] = []
        self.slots: list[tuple] = []

    def add(self, row: list, devices: list[int], *, live: bool) -> None:
        self.count += 1
        self.bookings.append((self.count, *row, self.created))
        start, end, expires = row[5], row[6], row[7]
        self.slots.extend((self.count, d, start, end, expires, live) for d in devices)
        if len(self.bookings) >= self.CHUNK:
            self.flush()

    def flush(self) -> None:
        with self.conn.cursor() as cur:
            with cur.copy(f"COPY allocation_booking ({self.BOOKING_COLUMNS}) FROM STDIN") as copy:
                for row in self.bookings:
                    copy.write_row(row)
            with cur.copy(f"COPY allocation_bookingdevice ({self.SLOT_COLUMNS}) FROM STDIN") as copy:
                for row in self.slots:
                    copy.write_row(row)
        self.conn.commit()
        self.rows += len(self.slots)
        self.bookings, self.slots = [], []

    def close(self) -> None:
        self.flush()
        self.conn.execute("SELECT setval(pg_get_serial_sequence('allocation_booking', 'id'), "
                          "(SELECT coalesce(max(id), 0) + 1 FROM allocation_booking), false)")
        self.conn.commit()
        self.conn.close()


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


def time_reads(catalog, rng: random.Random, calls: int, warmup: int, catalog_calls: int):
    """Latencies in ms: ``units_free``, ``earliest_start``, the catalog's ``offers`` read directly, and the live
    catalog's offers for a new second (``fleet_read`` of every product on sale, then ``offers`` from it: what
    ``web.catalog_cache.live_offers`` computes once per snapshot and second)."""
    from anchorgpu.allocation import selectors
    from anchorgpu.allocation.periods import Period
    from anchorgpu.catalog.offers import fleet_read, offers

    def timed(fn, n: int, skip: int) -> list[float]:
        samples = []
        for i in range(skip + n):
            product, start, term = random_request(rng, catalog, datetime.now(timezone.utc))
            t0 = time.perf_counter()
            fn(product, start, term)
            if i >= skip:
                samples.append((time.perf_counter() - t0) * 1000)
        return samples

    def catalog_query(start: datetime) -> dict:  # half the visitors ask from now, half from a date
        return {"term_days": rng.choice(TERMS), "quantity": rng.choice((1, 2, 4)),
                "not_before": start if rng.random() < 0.5 else None}

    def live_catalog(_p, start, _t) -> None:
        fleet = fleet_read(datetime.now(timezone.utc))
        offers(**catalog_query(start), now=fleet.now, fleet=fleet)

    free = timed(lambda p, s, t: selectors.units_free(p, Period.of_days(s, t)), calls, warmup)
    earliest = timed(lambda p, s, t: selectors.earliest_start(p, quantity=rng.choice((1, 2, 4)), term_days=t,
                                                               not_before=s), calls, warmup)
    direct = timed(lambda _p, s, _t: offers(**catalog_query(s)), catalog_calls, 3)
    live = timed(live_catalog, catalog_calls, 3)
    return free, earliest, direct, live


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
                raise SystemExit(f"a {target.__name__} process failed") from None
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

FLEET = {"devices": 20_000, "bookings": 1_000_000, "past_days": 400, "reads": 200, "catalog_reads": 40}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="database to (re)create and use (default %(default)s)")
    parser.add_argument("--workers", type=int, default=4, help="concurrent processes for the write phases")
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each write phase")
    parser.add_argument("--devices", type=int, default=2000, help="GPUs in the fleet (8 per host)")
    parser.add_argument("--bookings", type=int, default=50_000, help="bookings to generate")
    parser.add_argument("--past-days", type=int, default=0, help="days of booking history before now")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument("--reads", type=int, default=300, help="timed calls per availability read")
    parser.add_argument("--catalog-reads", type=int, default=20, help="timed calls per catalog read")
    parser.add_argument("--no-writes", action="store_true", help="skip the write phases (2 and 3)")
    parser.add_argument("--drop", action="store_true", help="drop the database at the end")
    parser.add_argument("--fleet", action="store_true",
                        help="fleet scale: 20,000 devices, 1,000,000 bookings over the past 13 months and the "
                             "coming ones, reads only (the other options still apply where given after it)")
    args = parser.parse_args()
    if args.fleet:
        parser.set_defaults(**FLEET, no_writes=True)
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
    n_bookings, n_rows, left_out = build_bookings(fleet, args.bookings, rng, now, args.url, past_days=args.past_days)
    load_s = time.perf_counter() - t
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
        cur.execute("SELECT version(), pg_size_pretty(pg_database_size(current_database()))")
        version, size = cur.fetchone()
        cur.execute("SELECT count(*) FILTER (WHERE live), max(ends_at), count(*) FILTER (WHERE ends_at <= %s) "
                    "FROM allocation_bookingdevice", [now])
        live_rows, last_end, past_rows = cur.fetchone()
        cur.execute("SELECT kind, state, count(*) FROM allocation_booking GROUP BY 1, 2 ORDER BY 1, 2")
        mix = ", ".join(f"{kind}/{state} {n}" for kind, state, n in cur.fetchall())
        cur.execute(BOOKED_SHARE_SQL, {"now": now, "until": now + HORIZON})
        booked = cur.fetchone()[0]
        cur.execute("CREATE TABLE bench_raw_insert (id bigserial PRIMARY KEY, worker int NOT NULL, "
                    "n int NOT NULL, note text NOT NULL, at timestamptz NOT NULL DEFAULT now())")
    n_devices = sum(len(unit) for _h, _p, units in fleet for unit in units)
    print(f"setup: {len(fleet)} hosts, {n_devices} devices, {n_bookings} bookings ({mix}; {left_out} moved before "
          f"the history, past the horizon), {n_rows} booking rows ({live_rows} live, {past_rows} ended), "
          f"{booked:.0%} of the next year's device-time booked, last booking ends {last_end:%Y-%m-%d}, "
          f"database {size}, loaded in {load_s:.1f} s", flush=True)

    free_ms, earliest_ms, direct_ms, live_ms = time_reads(catalog, rng, args.reads, max(10, args.reads // 10),
                                                          args.catalog_reads)

    def ms(samples: list[float], *quantiles: float) -> str:
        return "   ".join(f"p{round(q * 100)} {percentile(samples, q):.2f} ms" for q in quantiles)

    for name, samples in (("units_free", free_ms), ("earliest_start", earliest_ms), ("catalog offers", direct_ms),
                          ("live catalog", live_ms)):
        print(f"{name + ':':16}{ms(samples, .5, .95, 1)}  ({len(samples)} calls)", flush=True)

    holds = inserts = None
    if not args.no_writes:
        connection.close()  # the write phases run in their own processes
        ok, unavailable, hold_s, hold_ms = run_workers(hold_worker, args.url, args.workers, args.seconds,
                                                       args.seed * 1000)
        holds = ok / hold_s
        print(f"hold_place:     {ok} placed, {unavailable} no longer available in {hold_s:.1f} s -> {holds:.1f} "
              f"holds/s (call p50 {percentile(hold_ms, .5):.1f} ms, p95 {percentile(hold_ms, .95):.1f} ms)",
              flush=True)
        rows, _, raw_s, _ = run_workers(insert_worker, args.url, args.workers, args.seconds, args.seed * 2000)
        inserts = rows / raw_s
        print(f"raw INSERT:     {rows} rows in {raw_s:.1f} s -> {inserts:.1f} rows/s", flush=True)

    with connection.cursor() as cur:
        cur.execute(OVERLAP_SQL)
        overlaps = cur.fetchone()[0]

    def verdict(samples: list[float], target_ms: float) -> str:
        return f"[target p95 < {target_ms:g} ms: {'ok' if percentile(samples, .95) < target_ms else 'MISSED'}]"

    lines = [
        "",
        "== allocation benchmark ==",
        f"database          {version.split(',')[0]} ({os.cpu_count()} CPUs, shared with whatever else runs)",
        f"fleet             {len(fleet)} hosts, {n_devices} devices, {len(catalog)} products",
        f"bookings          {n_bookings} ({n_rows} device rows, {live_rows} live, {past_rows} ended, before any "
        f"write phase; {booked:.0%} of the next year booked)",
        f"units_free        {ms(free_ms, .5, .95, .99)}   {verdict(free_ms, 20)}",
        f"earliest_start    {ms(earliest_ms, .5, .95)}   {verdict(earliest_ms, 50)}",
        f"catalog offers    {ms(direct_ms, .5, .95)}   {verdict(direct_ms, 100)} (catalog.offers.offers, all "
        f"products)",
        f"live catalog      {ms(live_ms, .5, .95)}   {verdict(live_ms, 100)} (fleet_read + offers: a new second)",
    ]
    if holds is not None:
        ratio = holds / inserts
        lines += [
            f"workers           {args.workers} processes, {args.seconds:g} s per write phase, seed {args.seed}",
            f"hold_place        {holds:.1f} holds/s",
            f"raw INSERT        {inserts:.1f} rows/s",
            f"holds / inserts   {ratio:.3f}   [target >= 0.5: {'ok' if ratio >= 0.5 else 'MISSED'}]",
        ]
    lines.append(f"overlapping live  {overlaps}   [must be 0: {'ok' if overlaps == 0 else 'MISSED'}]")
    print("\n".join(lines))
    if args.drop:
        connection.close()
        drop_database(args.url)
    if overlaps:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
