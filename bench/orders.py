"""Order path benchmark against PostgreSQL.

Measures, one customer after another on the demo fleet (no concurrency; see
bench/allocation.py for contention):

1. ``order_place``: hold + order + SSH keys + quote with a derived address,
   one transaction (p50/p95 ms);
2. ``transfer_record`` that pays the order: evaluation, hold confirmation,
   invoice with its gap-free number (p50/p95 ms);
3. ``provision_due``: the five simulated access-preparation steps, each in
   its own transaction (orders made active per second);
4. the invoice PDF (p50/p95 ms).

It drops and recreates its own database (``anchorgpu_bench_orders``)::

    .venv/bin/python bench/orders.py [--orders 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from urllib.parse import urlsplit, urlunsplit

import psycopg

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/anchorgpu_bench_orders"


def _recreate(url: str) -> None:
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return f"p50 {statistics.median(ordered) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--orders", type=int, default=200)
    args = parser.parse_args()
    _recreate(args.url)
    os.environ["DATABASE_URL"] = args.url
    os.environ["ANCHORGPU_ALLOW_TEST_KEYS"] = "1"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anchorgpu.settings")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import logging

    import django
    import django.utils.timezone

    django.setup()
    logging.disable(logging.WARNING)
    from django.conf import settings

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"  # not 200 emails on the console
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from anchorgpu.billing.pdf import invoice_pdf
    from anchorgpu.orders.fulfilment import provision_due
    from anchorgpu.orders.models import Order
    from tests import shop

    shop.load_shop()
    user = shop.customer()
    products = ["a100-sxm-80gb", "h100-sxm-80gb", "h200-141gb", "mi300x-192gb", "b200-lot-2x180gb"]
    placed, paid = [], []
    orders = []
    for n in range(args.orders):
        started = time.perf_counter()
        order = shop.place(user, product=products[n % len(products)], asset=("btc", "eth", "usdc-ethereum")[n % 3])
        placed.append(time.perf_counter() - started)
        started = time.perf_counter()
        shop.pay(order, txid=(f"{n:064x}" if order.quote.asset.chain == "btc" else f"0x{n:064x}"),
                 confirmations=order.quote.confirmations_required)
        paid.append(time.perf_counter() - started)
        orders.append(order)
    states = {o.state for o in Order.objects.all()}
    started = time.perf_counter()
    activated = 0
    while True:
        changed = provision_due(limit=50)
        activated += changed
        if not changed:
            break
    provision_s = time.perf_counter() - started
    pdfs = []
    for order in Order.objects.filter(invoice__isnull=False).select_related("invoice")[:50]:
        started = time.perf_counter()
        invoice_pdf(order.invoice)
        pdfs.append(time.perf_counter() - started)
    active = Order.objects.filter(state="active").count()
    due = Order.objects.filter(starts_at__lte=django.utils.timezone.now()).count()
    print(f"orders placed: {len(orders)}  (states after payment: {sorted(states)})")
    print(f"order_place (hold + quote + address): {_ms(placed)}")
    print(f"transfer_record to paid (+ invoice): {_ms(paid)}")
    print(f"provision_due: {active} orders active in {provision_s:.2f} s = {active / provision_s:.1f} orders/s "
          f"({5 * active / provision_s:.0f} steps/s)")
    print(f"invoice PDF: {_ms(pdfs)}")
    print(f"  ({due} of the {len(orders)} terms had started; the others wait for their start)")
    return 0 if active == due else 1


if __name__ == "__main__":
    sys.exit(main())
