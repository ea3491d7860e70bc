"""``bench/chain_watch.py --networks N``: USDT on N EVM networks at once, each its own anvil node.

Each network (Ethereum 1, Base 8453, Polygon 137, Arbitrum One 42161: chain ids of the EIP-155 registry,
chainid.network) gets an anvil node started with its chain id, the test ERC-20 as its USDT (6 decimals), the
same background traffic as the one-node bench, an asset ``usdt-<network>`` pointing at the node, and
``--orders`` open orders quoting USDT there. Every poll is ``watch_poll`` with a fresh watcher built as the
worker builds it (chain id, contract, decimals, finality), one network after the other in each cycle, as the
worker's sweep (``watch_poll_all``) does. A watcher reads its own orders' addresses and, for money sent on
the wrong network, the addresses of the same coin's orders on the other networks (``payments.strays``): each
poll's filters cover N x ``--orders`` addresses.

Steps: 1 first poll; 2 one empty block on every node; 3 ``--paid`` orders paid on each network, plus
``STRAYS`` transfers on each network to orders quoted on the next one (recorded, never credited); 4 one block;
5 ``--confirmations`` blocks. Per poll: wall time, node time, SQL time, statements, commits, RPC calls and
HTTP round trips.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from decimal import Decimal

import chain_watch as base

NETWORKS = (("ethereum", 1, "Ethereum"), ("base", 8453, "Base"), ("polygon", 137, "Polygon"),
            ("arbitrum", 42161, "Arbitrum One"))
STRAYS = 2  # transfers per network to orders quoted on the next network


@dataclass
class Net:
    slug: str
    chain_id: int
    name: str
    node: object
    chain: object = None

    @property
    def code(self) -> str:
        return f"usdt-{self.slug}"


def networks_main(args, paid: int) -> int:
    from tests.chains import evm_support as evm

    scratch = tempfile.mkdtemp(prefix="anchorgpu-bench-watch-nets-")
    nets: list[Net] = []
    try:
        try:
            binary = evm.find_anvil()
            began = time.perf_counter()
            for slug, chain_id, name in NETWORKS[:args.networks]:
                net = Net(slug, chain_id, name, evm.AnvilNode(binary, chain_id=chain_id))
                nets.append(net)
                net.node.start()
                net.chain = base.Chain(net.node.url)
                net.chain.history(args.history, args.noise)
            history_s = time.perf_counter() - began
            base._django_setup(base._database_url(args.url, scratch))
            _point_assets(nets, args.confirmations)
            to_pay, placed, orders_s = base._create_orders(args.orders, paid, tuple(n.code for n in nets))
        except (evm.AnvilMissing, base.SetupFailed) as exc:
            print(f"set-up failed: {exc}", file=sys.stderr)
            return 2
        except Exception:  # noqa: BLE001 - any other set-up failure, with its traceback
            traceback.print_exc()
            print("set-up failed", file=sys.stderr)
            return 2
        return _measure(args, nets, to_pay, placed, paid, orders_s, history_s)
    finally:
        for net in nets:
            net.node.stop()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: BLE001 - Django was perhaps never set up
            pass
        shutil.rmtree(scratch, ignore_errors=True)


def _point_assets(nets: list[Net], confirmations: int) -> None:
    from django.utils import timezone

    from anchorgpu.payments.models import Asset, Rate
    from tests import shop

    shop.load_shop()
    now = timezone.now().replace(microsecond=0)
    for position, net in enumerate(nets, start=10):
        asset, _ = Asset.objects.update_or_create(code=net.code, defaults=dict(
            symbol="USDT", name="Tether USD", network=net.slug, network_name=net.name, scheme="evm",
            chain_id=net.chain_id, decimals=6, quote_decimals=2, contract=net.chain.token,
            # Confirmations counted from the tip: anvil has no finality of its own (the demo's rows wait for
            # the "finalized" tag, which anvil puts 64 blocks down).
            confirmations_required=confirmations, finality="depth", watch_url=net.node.url, position=position,
            is_active=True))
        Rate.objects.create(asset=asset, currency="USD", price=Decimal("1.00"), observed_at=now,
                            source="bench figure", entered_by="bench")


@dataclass
class Poll:
    step: str
    network: str
    row: base.Row
    strays: int


def _poll(step: str, net: Net) -> Poll:
    from django.conf import settings
    from django.db import connection

    from anchorgpu.payments.models import Asset
    from anchorgpu.payments.watch import watch_poll

    asset = Asset.objects.get(code=net.code)
    watcher = base._timed_watcher_class().for_url(
        net.node.url, chain_id=asset.chain_id, contract=asset.contract, network=asset.network,
        timeout=settings.ANCHORGPU_WATCH_TIMEOUT, decimals=asset.decimals, finality=asset.finality)
    meter = base.SqlMeter()
    started = time.perf_counter()
    with meter.watching(connection):
        report = watch_poll(asset, watcher=watcher)
    wall = time.perf_counter() - started
    blocks = f"{report.scanned[0]}-{report.scanned[1]}" if report.scanned else "none"
    row = base.Row(step=step, asset=net.slug, blocks=blocks, watched=report.watched, found=report.found,
                   recorded=report.recorded, wall=wall, node=watcher.node_seconds, reads=dict(watcher.read_seconds),
                   sql=meter.seconds, statements=meter.statements, commits=meter.commits, calls=report.calls,
                   round_trips=report.round_trips, ok=report.ok and not report.failures,
                   problem=report.error or "; ".join(report.failures))
    return Poll(step, net.slug, row, report.strays)


def _cycle(step: str, nets: list[Net]) -> list[Poll]:
    return [_poll(step, net) for net in nets]


HEADER = (f"{'step':<34} {'network':<9} {'blocks':>9} {'watched':>7} {'found':>5} {'rec.':>4} {'stray':>5} "
          f"{'wall s':>7} {'node s':>7} {'db s':>6} {'stmts':>5} {'commits':>7} {'calls':>6} {'trips':>5}")


def _line(poll: Poll) -> str:
    r = poll.row
    return (f"{r.step:<34} {poll.network:<9} {r.blocks:>9} {r.watched:>7} {r.found:>5} {r.recorded:>4} "
            f"{poll.strays:>5} {r.wall:>7.3f} {r.node:>7.3f} {r.sql:>6.3f} {r.statements:>5} {r.commits:>7} "
            f"{r.calls:>6} {r.round_trips:>5}")


def _pay(nets: list[Net], to_pay: dict, pay_blocks: int) -> None:
    """Each network's payers paid there, and STRAYS orders of the next network paid on this one by mistake."""
    from anchorgpu.payments.models import Quote

    payers = [o.pk for orders in to_pay.values() for o in orders]
    for i, net in enumerate(nets):
        following = nets[(i + 1) % len(nets)]
        txs = [net.chain.token_tx(net.chain.token_payer, o.quote.address, o.quote.amount) for o in to_pay[net.code]]
        for quote in Quote.objects.filter(asset__code=following.code).exclude(order__in=payers).order_by("id")[:STRAYS]:
            txs.append(net.chain.token_tx(net.chain.token_payer, quote.address, quote.amount))
        net.chain.in_blocks(txs, pay_blocks)


def _measure(args, nets: list[Net], to_pay: dict, placed: dict, paid: int, orders_s: float,
             history_s: float) -> int:
    from django.conf import settings
    from django.db import connection

    from anchorgpu.orders.models import Order
    from anchorgpu.payments.models import StrayTransfer

    polls: list[Poll] = []
    polls += _cycle("1 first poll (lookback)", nets)
    for net in nets:
        net.chain.mine(1)
    polls += _cycle("2 new empty block", nets)
    _pay(nets, to_pay, args.pay_blocks)
    polls += _cycle(f"3 {paid}/network paid, {STRAYS} strays", nets)
    for net in nets:
        net.chain.mine(1)
    polls += _cycle("4 new block, transfers confirming", nets)
    for net in nets:
        net.chain.mine(args.confirmations)
    polls += _cycle(f"5 +{args.confirmations} blocks, transfers final", nets)

    payers = [o.pk for orders in to_pay.values() for o in orders]
    now_paid = Order.objects.filter(pk__in=payers, state="paid").count()
    where = "PostgreSQL" if connection.vendor == "postgresql" else "SQLite (temporary file)"
    print(f"chain watch benchmark, {len(nets)} networks at once: "
          + ", ".join(f"{n.name} (chain id {n.chain_id}) at {n.node.url}" for n in nets))
    print(f"  {os.cpu_count()} CPUs, database {where}; per node {args.history} blocks of history with {args.noise} "
          f"background transactions each (all made in {history_s:.1f} s); confirmations required: "
          f"{args.confirmations}; lookback {settings.ANCHORGPU_WATCH_LOOKBACK} blocks")
    print(f"  open orders: {args.orders} per network ({len(nets) * args.orders} in all), made in {orders_s:.1f} s: "
          + ", ".join(f"{n.slug} {placed[n.code]} through order_place" for n in nets))
    print(f"  each poll's filters cover {len(nets) * args.orders} addresses: its own orders' and, for money sent on "
          f"the wrong network, the other networks' USDT orders'")
    print(f"  paid in step 3: {paid} per network; orders paid after step 5: {now_paid} of {len(payers)}; "
          f"transfers on the wrong network recorded: {StrayTransfer.objects.count()} (expected "
          f"{STRAYS * len(nets)}), credited: 0")
    print()
    print(HEADER)
    for poll in polls:
        print(_line(poll))
    print()
    print(f"{'sweep (every network, one after another)':<42} {'wall s':>7} {'node s':>7} {'db s':>6} {'calls':>6} "
          f"{'trips':>5}")
    cycles: dict[str, list[Poll]] = {}
    for poll in polls:
        cycles.setdefault(poll.step, []).append(poll)
    totals = {}
    for step, group in cycles.items():
        totals[step] = sum(p.row.wall for p in group)
        print(f"{step:<42} {totals[step]:>7.3f} {sum(p.row.node for p in group):>7.3f} "
              f"{sum(p.row.sql for p in group):>6.3f} {sum(p.row.calls for p in group):>6} "
              f"{sum(p.row.round_trips for p in group):>5}")
    slowest = max(polls, key=lambda p: p.row.wall)
    worst = max(totals, key=totals.get)
    print()
    verdict = "met" if slowest.row.wall < base.TARGET_SECONDS else "MISSED"
    print(f"target: one network's poll with {args.orders} open orders under {base.TARGET_SECONDS:.0f} s: {verdict} "
          f"(slowest: {slowest.network} in step {slowest.step.split()[0]}, {slowest.row.wall:.2f} s)")
    print(f"        the sweep of {len(nets)} networks: slowest step {worst.split()[0]}, {totals[worst]:.2f} s")

    problems = [f"{p.network} step {p.step.split()[0]}: {p.row.problem}" for p in polls if not p.row.ok]
    for p in polls:
        number, r = p.step.split()[0], p.row
        if number == "3" and (r.found != paid + STRAYS or r.recorded != paid or p.strays != STRAYS):
            problems.append(f"{p.network} step 3: found {r.found}, recorded {r.recorded}, strays {p.strays}; "
                            f"expected {paid + STRAYS}, {paid}, {STRAYS}")
        if number in ("4", "5") and r.recorded != paid:
            problems.append(f"{p.network} step {number}: recorded {r.recorded}, expected {paid}")
        if number in ("1", "2") and (r.found or r.recorded):
            problems.append(f"{p.network} step {number}: found {r.found} before anything was paid")
    if now_paid != len(payers):
        problems.append(f"{now_paid} of the {len(payers)} paid orders reached 'paid'")
    if StrayTransfer.objects.count() != STRAYS * len(nets):
        problems.append(f"{StrayTransfer.objects.count()} strays recorded, expected {STRAYS * len(nets)}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0
