"""Real access preparation benchmark: test hosts made here (network namespaces, OpenSSH, podman with runc, fake
cards through CDI; see tests/hosts/harness.py), the real provisioner, PostgreSQL.

For 1 order, then for 20 orders of one card each over 4 test hosts of 8 cards, it prints:

1. seconds from the payment recorded to a working login: the worker's sweep (``provision_due``, in this process;
   ``--workers N``: N threads sweeping at once) prepares every paid order, then a real SSH login with each
   customer's key runs a command;
   per order: payment → access delivered, and payment → that login done;
2. seconds from the term's end to the wipe proven: ``terms_end_due`` ends the terms and ``wipes_due`` stops and removes each container and volume
   and proves it (neither exists, the port refuses); per order: sweep start → its wipe proven; then each login is
   tried again and must be refused.

Needs root and the tools .ci/run installs. It drops and recreates its own database
(``anchorgpu_bench_provision``)::

    .venv/bin/python bench/provision.py [--orders 1,20] [--hosts 4] [--workers 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/anchorgpu_bench_provision"
ROOT = Path(__file__).resolve().parents[1]


def _recreate(url: str) -> None:
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _figures(label: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    return (f"{label}: median {statistics.median(ordered):.2f} s, max {ordered[-1]:.2f} s, "
            f"min {ordered[0]:.2f} s (n={len(ordered)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--orders", default="1,20")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--workers", type=int, default=1,
                        help="sweeping threads, each with its own database connection, as that many workers (1)")
    args = parser.parse_args()
    rounds = [min(32, max(1, int(n))) for n in args.orders.split(",")]
    _recreate(args.url)
    os.environ.update({"DATABASE_URL": args.url, "ANCHORGPU_ALLOW_TEST_KEYS": "1",
                       "ANCHORGPU_PROVISIONER": "anchorgpu.access.provisioner.SSHProvisioner",
                       "ANCHORGPU_HOST_SSH_TIMEOUT": "10", "ANCHORGPU_WORKSPACE_GIB_PER_CARD": "1"})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anchorgpu.settings")
    sys.path.insert(0, str(ROOT))
    import logging

    import django

    django.setup()
    logging.disable(logging.WARNING)
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    call_command("migrate", verbosity=0)
    from anchorgpu.access.provisioner import SSHProvisioner
    from anchorgpu.orders.fulfilment import provision_due
    from anchorgpu.orders.lifecycle import terms_end_due
    from anchorgpu.orders.wipes import wipes_due
    from anchorgpu.orders.models import Order
    from tests import shop
    from tests.hosts.harness import Fleet
    from tests.hosts.shop_hosts import Login, bind_fleet, key_pair, login_refused, place

    class Timed(SSHProvisioner):
        """Notes when each order's access was delivered and its wipe proven."""

        done: dict[tuple[str, int], float] = {}

        def deliver_access(self, order):
            detail = super().deliver_access(order)
            self.done[("access", order.pk)] = time.monotonic()
            return detail

        def wipe(self, order):
            detail = super().wipe(order)
            self.done[("wipe", order.pk)] = time.monotonic()
            return detail

    started = time.monotonic()
    fleet = Fleet(args.hosts, cards=8)
    print(f"{args.hosts} test hosts of 8 fake cards made in {time.monotonic() - started:.1f} s")
    folder = Path(tempfile.mkdtemp(prefix="anchorgpu-bench-"))
    try:
        shop.load_shop()
        bind_fleet(fleet, settings)
        keys = key_pair(folder, "bench")
        user = shop.customer()
        txn = 0
        for count in rounds:
            provisioner = Timed()
            orders, paid_at = [], {}
            for _ in range(count):
                order = place(user, keys)
                shop.pay(order, txid=shop.txid("btc", txn))
                txn += 1
                paid_at[order.pk] = time.monotonic()
                orders.append(order)
            def sweep_until_done(provisioner=provisioner, pks=tuple(paid_at), count=count):
                try:
                    while Order.objects.filter(pk__in=pks, state__in=("paid", "provisioning")).exists():
                        provision_due(provisioner=provisioner, limit=count)
                finally:
                    connections.close_all()

            threads = [threading.Thread(target=sweep_until_done) for _ in range(max(1, args.workers))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            failed = list(Order.objects.filter(pk__in=paid_at, state="failed").values_list("reference", "last_error"))
            if failed:
                raise SystemExit(f"provisioning failed: {failed}")
            logged_in = {}
            for order in Order.objects.filter(pk__in=paid_at).order_by("pk"):
                with Login(order.access_host, order.access_port, order.access_user, keys) as login:
                    status, _out = login.run("nvidia-smi --query-gpu=uuid --format=csv,noheader")
                    assert status == 0
                logged_in[order.pk] = time.monotonic()
            hosts_used = len({o.access_host for o in Order.objects.filter(pk__in=paid_at)})
            print(f"\n{count} order(s) of 1 card over {hosts_used} host(s), {args.workers} worker(s):")
            print("  " + _figures("payment -> access delivered",
                                  [provisioner.done[("access", pk)] - paid_at[pk] for pk in paid_at]))
            print("  " + _figures("payment -> working login", [logged_in[pk] - paid_at[pk] for pk in paid_at]))
            print(f"  all {count} active and logged into {max(logged_in.values()) - min(paid_at.values()):.2f} s "
                  "after the first payment")
            ends = max(Order.objects.filter(pk__in=paid_at).values_list("ends_at", flat=True))
            sweep = time.monotonic()
            terms_end_due(now=ends + timedelta(seconds=1))
            wipes_due(now=ends + timedelta(seconds=1), provisioner=provisioner, limit=count)
            states = set(Order.objects.filter(pk__in=paid_at).values_list("state", flat=True))
            assert states == {"completed"}, states
            for order in Order.objects.filter(pk__in=paid_at):
                assert login_refused(order.access_host, order.access_port, order.access_user, keys) == \
                    "connection refused"
            wiped = [provisioner.done[("wipe", pk)] - sweep for pk in paid_at]
            print("  " + _figures("term end -> wipe proven", wiped))
            print(f"  every login refused afterwards; {sum(len(h.containers()) for h in fleet.hosts)} container(s) "
                  f"and {sum(len(h.volumes()) for h in fleet.hosts)} volume(s) left on the hosts")
    finally:
        fleet.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
