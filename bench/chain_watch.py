"""Chain watcher benchmark: poll cycles with many open orders on a local anvil node.

What it sets up:

* an anvil node (``tests.chains.evm_support.find_anvil``) with the test ERC-20
  deployed, and ``--history`` blocks of background traffic (``--noise``
  transactions per block: ether and token transfers to addresses nobody
  watches), so that reading blocks costs what reading full blocks costs;
* a fresh database, migrated, with the demo shop, whose ``eth`` and
  ``usdc-ethereum`` assets point at the node (its chain id, the token's
  contract, ``--confirmations``, the node's URL);
* ``--orders`` open orders in EACH of the two assets, every one with its own
  deposit address derived from the demo key. The orders that will be paid
  (``--paid`` of them) are placed through ``order_place`` (hold, order,
  quote), so paying them runs the real path to "paid"; the others, which are
  only watched, are copies of a placed order written with ``bulk_create``
  (an order row and a quote row each, no hold). The watcher reads quotes
  whose ``monitor_until`` lies ahead, joined to their order: both kinds look
  the same to it.

What it measures, step by step; after each chain step it polls ETH (blocks,
receipts, balances) and then the token (``eth_getLogs``), each with
``watch_poll`` and a fresh watcher, as the worker does:

1. the first poll, which scans from ``ANCHORGPU_WATCH_LOOKBACK`` blocks below the tip;
2. one new empty block, nothing paid (the steady state);
3. ``--paid`` orders per asset paid, the transactions mined with automine off
   into ``--pay-blocks`` blocks: transfers found and recorded;
4. one more block: each of those transfers gains a confirmation;
5. ``--confirmations`` more blocks: the transfers become final, the orders paid.

For each poll: wall time, time spent in the watcher's reads from the node
(JSON decoding included), time spent executing SQL statements and commits,
statements and commits counted, RPC calls, HTTP round trips and calls per watched order. The target from
issue 7 is a poll cycle under 5 s with 1,000 open orders, in batched calls.
The exit status is 0 whether or not the target is met, 1 when a poll failed
or did not see what was sent, 2 when the set-up failed.

The database: a SQLite file in a temporary directory, deleted afterwards; with
``--url`` (or DATABASE_URL / ANCHORGPU_DATABASE_URL set to PostgreSQL) the
database ``anchorgpu_bench_chain_watch`` on that server, dropped and recreated.
With ``--networks N`` (2 to 4) it measures USDT on N EVM networks at once instead, each on its own anvil
node with the network's chain id, ``--orders`` open orders on each, polled one network after the other as
the worker's sweep does (``bench/chain_watch_networks.py`` says what it sets up).

Run it from the repository root::

    .venv/bin/python bench/chain_watch.py [--orders 1000]
    .venv/bin/python bench/chain_watch.py --networks 3
    .venv/bin/python bench/chain_watch.py --url postgres://postgres@127.0.0.1:5432/anchorgpu_bench_chain_watch
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DATABASE = "anchorgpu_bench_chain_watch"
TARGET_SECONDS = 5.0
PRODUCTS = ["a100-sxm-80gb", "h100-sxm-80gb", "h200-141gb", "mi300x-192gb", "b200-lot-2x180gb"]
ASSETS = ("eth", "usdc-ethereum")
LABEL = {"eth": "ETH", "usdc-ethereum": "USDC"}
READS = ("head", "scan", "locate", "balances")  # the watcher's reads from the node
TRANSFER_SELECTOR = "0xa9059cbb"  # transfer(address,uint256)


class SetupFailed(Exception):
    pass


# --------------------------------------------------------------------------- database

def _postgres(url: str) -> bool:
    return url.startswith(("postgres://", "postgresql://", "pgsql://"))


def _recreate_postgres(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _database_url(explicit: str, scratch: str) -> str:
    """PostgreSQL when asked for (``--url``, or the environment's URL with the bench's own database name);
    otherwise a SQLite file in ``scratch``."""
    if explicit:
        _recreate_postgres(explicit)
        return explicit
    configured = os.environ.get("ANCHORGPU_DATABASE_URL") or os.environ.get("DATABASE_URL") or ""
    if _postgres(configured):
        url = urlunsplit(urlsplit(configured)._replace(path="/" + BENCH_DATABASE))
        _recreate_postgres(url)
        return url
    return "sqlite:///" + os.path.join(scratch, "bench.sqlite3")


def _django_setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.pop("ANCHORGPU_DATABASE_URL", None)
    os.environ["ANCHORGPU_ALLOW_TEST_KEYS"] = "1"  # the demo's deposit keys
    for name in [n for n in os.environ if n.startswith("ANCHORGPU_WATCH_URL_")]:
        os.environ.pop(name)  # the assets' URLs are set below, to the bench's node
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anchorgpu.settings")
    import logging

    import django

    django.setup()
    logging.disable(logging.WARNING)
    from django.conf import settings

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


# --------------------------------------------------------------------------- chain

class Chain:
    """The bench's anvil node, spoken to in raw JSON-RPC batches for speed."""

    def __init__(self, url: str):
        from tests.chains import evm_support as evm

        self.evm = evm
        self.url = url
        self.w3 = evm.anvil_web3(url)
        self.accounts = self.w3.eth.accounts
        self.eth_payer, self.token_payer = self.accounts[1], self.accounts[2]
        self.noise_senders = self.accounts[3:9]
        self.token_noise_sender = self.accounts[9]
        self.token = evm.deploy_token(self.w3, symbol="USDC")
        for holder in (self.token_payer, self.token_noise_sender):
            evm.mint(self.w3, self.token, holder, 10**15)
        self.rng = random.Random(7)

    def head(self) -> int:
        return self.w3.eth.block_number

    def batch(self, requests: list[tuple[str, list]]) -> list:
        answers = []
        for start in range(0, len(requests), 500):
            chunk = requests[start:start + 500]
            responses = self.w3.provider.make_batch_request(chunk)
            if not isinstance(responses, list) or len(responses) != len(chunk):
                raise SetupFailed(f"anvil refused a batch: {str(responses)[:300]}")
            for (method, _params), response in zip(chunk, responses, strict=True):
                if "error" in response:
                    raise SetupFailed(f"{method} failed: {response['error']}")
                answers.append(response["result"])
        return answers

    def automine(self, on: bool) -> None:
        self.w3.manager.request_blocking("evm_setAutomine", [on])

    def mine(self, n: int = 1) -> None:
        self.evm.mine(self.w3, n)

    def eth_tx(self, sender: str, to: str, wei: int) -> tuple[str, list]:
        return ("eth_sendTransaction", [{"from": sender, "to": to, "value": hex(wei), "gas": hex(21_000)}])

    def token_tx(self, sender: str, to: str, units: int) -> tuple[str, list]:
        data = TRANSFER_SELECTOR + to[2:].lower().rjust(64, "0") + hex(units)[2:].rjust(64, "0")
        return ("eth_sendTransaction", [{"from": sender, "to": self.token, "data": data, "gas": hex(80_000)}])

    def _random_address(self) -> str:
        return "0x" + self.rng.randbytes(20).hex()

    def in_blocks(self, txs: list[tuple[str, list]], blocks: int) -> list[str]:
        """Mine ``txs`` into ``blocks`` blocks (automine off meanwhile); every one must succeed."""
        hashes: list[str] = []
        per_block = -(-len(txs) // max(1, blocks)) if txs else 0
        self.automine(False)
        try:
            for b in range(blocks):
                chunk = txs[b * per_block:(b + 1) * per_block]
                hashes.extend(self.batch(chunk))
                self.w3.manager.request_blocking("evm_mine", [])
        finally:
            self.automine(True)
        receipts = self.batch([("eth_getTransactionReceipt", [h]) for h in hashes])
        failed = [h for h, r in zip(hashes, receipts, strict=True) if r is None or int(r["status"], 16) != 1]
        if failed:
            raise SetupFailed(f"{len(failed)} of {len(hashes)} transactions were not mined or reverted")
        return hashes

    def history(self, blocks: int, per_block: int) -> None:
        """Background traffic: ``per_block`` transfers per block to addresses no order has (4 in 5 ether,
        1 in 5 token)."""
        txs = []
        for n in range(blocks * per_block):
            if n % 5 == 4:
                txs.append(self.token_tx(self.token_noise_sender, self._random_address(), 1 + n))
            else:
                txs.append(self.eth_tx(self.noise_senders[n % len(self.noise_senders)], self._random_address(),
                                       10**12 + n))
        if txs:
            self.in_blocks(txs, blocks)
        elif blocks:
            self.mine(blocks)


# --------------------------------------------------------------------------- orders

def _create_orders(n: int, paid: int, codes: tuple[str, ...] = ASSETS) -> tuple[dict[str, list], dict[str, int],
                                                                                float]:
    """``n`` open orders per asset of ``codes``; the first ``paid`` through order_place. Returns the orders to pay
    per asset, how many were placed per asset, and the seconds it took."""
    from django.db import transaction

    from anchorgpu.orders.errors import Unavailable
    from anchorgpu.orders.models import Order, new_reference
    from anchorgpu.payments.addresses import derive_address
    from anchorgpu.payments.models import DepositKey, Quote
    from tests import shop

    started = time.perf_counter()
    user = shop.customer()
    to_pay: dict[str, list] = {}
    placed: dict[str, int] = {}
    for code in codes:
        orders = []
        for i in range(paid):
            try:
                orders.append(shop.place(user, product=PRODUCTS[i % len(PRODUCTS)], asset=code))
            except Unavailable:
                break  # the fleet is full: the remaining payers are copies (their hold is made when paid)
        if not orders:
            raise SetupFailed(f"order_place could not place a single {code} order")
        placed[code] = len(orders)
        template, quote = orders[0], orders[0].quote
        with transaction.atomic():
            key = DepositKey.objects.select_for_update().get(scheme=quote.scheme)
            copies = [_copy(template, reference=new_reference(), booking=None) for _ in range(n - len(orders))]
            Order.objects.bulk_create(copies, batch_size=500)
            quotes = []
            for index, order in enumerate(copies, start=key.next_index):
                address = derive_address(key.extended_public_key, quote.scheme, index)
                quotes.append(_copy(quote, order=order, address_index=index, address=address))
            Quote.objects.bulk_create(quotes, batch_size=500)
            key.next_index += len(copies)
            key.save(update_fields=["next_index"])
        orders.extend(copies)
        to_pay[code] = orders[:paid]
    return to_pay, placed, time.perf_counter() - started


def _copy(obj, **changes):
    """A new, unsaved row with ``obj``'s column values, ``changes`` applied."""
    clone = obj.__class__()
    for field in obj._meta.concrete_fields:
        if not field.primary_key:
            setattr(clone, field.attname, getattr(obj, field.attname))
    for name, value in changes.items():
        setattr(clone, name, value)
    return clone


# --------------------------------------------------------------------------- measuring

def _timed_watcher_class():
    from anchorgpu.chains.evm import EvmWatcher

    class TimedWatcher(EvmWatcher):
        """The real adapter, with the time spent in each kind of read added up."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.read_seconds = dict.fromkeys(READS, 0.0)

        @property
        def node_seconds(self) -> float:
            return sum(self.read_seconds.values())

        def _timed(self, name, method, *args):
            started = time.perf_counter()
            try:
                return method(*args)
            finally:
                self.read_seconds[name] += time.perf_counter() - started

        def head(self):
            return self._timed("head", super().head)

        def scan(self, addresses, first, last):
            return self._timed("scan", super().scan, addresses, first, last)

        def locate(self, txids):
            return self._timed("locate", super().locate, txids)

        def balances(self, addresses, block):
            return self._timed("balances", super().balances, addresses, block)

    return TimedWatcher


class SqlMeter:
    """Counts the SQL statements run, and adds up the time their execution and the commits took
    (Django's execute wrapper, and the connection's commit)."""

    def __init__(self):
        self.statements = 0
        self.commits = 0
        self.seconds = 0.0

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.statements += 1
            self.seconds += time.perf_counter() - started

    @contextmanager
    def watching(self, connection):
        real_commit = connection._commit

        def commit():
            started = time.perf_counter()
            try:
                return real_commit()
            finally:
                self.commits += 1
                self.seconds += time.perf_counter() - started

        connection._commit = commit
        try:
            with connection.execute_wrapper(self):
                yield self
        finally:
            del connection._commit


@dataclass
class Row:
    step: str
    asset: str
    blocks: str
    watched: int
    found: int
    recorded: int
    wall: float
    node: float
    reads: dict
    sql: float
    statements: int
    commits: int
    calls: int
    round_trips: int
    ok: bool
    problem: str


def _poll(step: str, code: str, node_url: str) -> Row:
    from django.conf import settings
    from django.db import connection

    from anchorgpu.payments.models import Asset
    from anchorgpu.payments.watch import watch_poll

    asset = Asset.objects.get(code=code)
    watcher = _timed_watcher_class().for_url(node_url, chain_id=asset.chain_id, contract=asset.contract,
                                             network=asset.network, timeout=settings.ANCHORGPU_WATCH_TIMEOUT)
    meter = SqlMeter()
    started = time.perf_counter()
    with meter.watching(connection):
        report = watch_poll(asset, watcher=watcher)
    wall = time.perf_counter() - started
    problem = report.error or "; ".join(report.failures)
    blocks = f"{report.scanned[0]}-{report.scanned[1]}" if report.scanned else "none"
    return Row(step=step, asset=LABEL[code], blocks=blocks, watched=report.watched, found=report.found,
               recorded=report.recorded, wall=wall, node=watcher.node_seconds, reads=dict(watcher.read_seconds),
               sql=meter.seconds, statements=meter.statements, commits=meter.commits, calls=report.calls,
               round_trips=report.round_trips, ok=report.ok and not report.failures, problem=problem)


def _cycle(step: str, node_url: str) -> list[Row]:
    return [_poll(step, code, node_url) for code in ASSETS]


# --------------------------------------------------------------------------- output

HEADER = (f"{'step':<34} {'asset':<5} {'blocks':>9} {'watched':>7} {'found':>5} {'rec.':>4} {'wall s':>7} "
          f"{'node s':>7} {'db s':>6} {'stmts':>5} {'commits':>7} {'other s':>7} {'calls':>6} {'trips':>5} "
          f"{'calls/order':>11}")


def _line(row: Row) -> str:
    other = max(0.0, row.wall - row.node - row.sql)
    per_order = row.calls / row.watched if row.watched else 0.0
    return (f"{row.step:<34} {row.asset:<5} {row.blocks:>9} {row.watched:>7} {row.found:>5} {row.recorded:>4} "
            f"{row.wall:>7.3f} {row.node:>7.3f} {row.sql:>6.3f} {row.statements:>5} {row.commits:>7} {other:>7.3f} "
            f"{row.calls:>6} {row.round_trips:>5} {per_order:>11.2f}")


# --------------------------------------------------------------------------- main

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1000, help="open orders per asset (default 1000)")
    parser.add_argument("--paid", type=int, default=None,
                        help="orders paid per asset in step 3 (default: 10%% of --orders, at least 1)")
    parser.add_argument("--pay-blocks", type=int, default=3, help="blocks the payments are mined into (3)")
    parser.add_argument("--confirmations", type=int, default=12, help="confirmations the assets require (12)")
    parser.add_argument("--history", type=int, default=100, help="blocks of background traffic before (100)")
    parser.add_argument("--noise", type=int, default=50, help="background transactions per history block (50)")
    parser.add_argument("--url", default="", help="a PostgreSQL URL whose database is dropped and recreated")
    parser.add_argument("--networks", type=int, default=1,
                        help="1: ETH and USDC on one node (default); 2 to 4: USDT on that many EVM networks at once, "
                             "one anvil node each with the network's chain id (bench/chain_watch_networks.py)")
    args = parser.parse_args()
    if args.orders < 1 or args.history < 0 or args.noise < 0:
        parser.error("--orders must be at least 1, --history and --noise not negative")
    if not 1 <= args.pay_blocks < args.confirmations:
        # Step 4 expects every payment still short of its confirmations, so that it is followed.
        parser.error("--pay-blocks must be at least 1 and below --confirmations")
    paid = args.paid if args.paid is not None else max(1, args.orders // 10)
    if not 1 <= paid <= args.orders:
        parser.error("--paid must be between 1 and --orders")
    if not 1 <= args.networks <= 4:
        parser.error("--networks must be between 1 and 4")
    sys.path.insert(0, REPO)
    sys.path.insert(0, os.path.join(REPO, "src"))
    if args.networks > 1:
        from chain_watch_networks import networks_main

        return networks_main(args, paid)
    from tests.chains import evm_support as evm

    scratch = tempfile.mkdtemp(prefix="anchorgpu-bench-watch-")
    node = None
    try:
        try:
            node = evm.AnvilNode(evm.find_anvil())
            node.start()
            chain = Chain(node.url)
            began = time.perf_counter()
            chain.history(args.history, args.noise)
            history_s = time.perf_counter() - began
            _django_setup(_database_url(args.url, scratch))
            _point_assets(chain, args.confirmations)
            to_pay, placed, orders_s = _create_orders(args.orders, paid)
        except (evm.AnvilMissing, SetupFailed) as exc:
            print(f"set-up failed: {exc}", file=sys.stderr)
            return 2
        except Exception:  # noqa: BLE001 - any other set-up failure, with its traceback
            traceback.print_exc()
            print("set-up failed", file=sys.stderr)
            return 2
        return _measure(args, chain, node.url, to_pay, placed, paid, orders_s, history_s)
    finally:
        if node is not None:
            node.stop()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: BLE001 - Django was perhaps never set up
            pass
        shutil.rmtree(scratch, ignore_errors=True)


def _point_assets(chain: Chain, confirmations: int) -> None:
    from anchorgpu.payments.models import Asset
    from tests import shop

    shop.load_shop()
    chain_id = chain.w3.eth.chain_id
    Asset.objects.filter(code="eth").update(chain_id=chain_id, confirmations_required=confirmations,
                                            watch_url=chain.url)
    Asset.objects.filter(code="usdc-ethereum").update(chain_id=chain_id, contract=chain.token,
                                                      confirmations_required=confirmations, watch_url=chain.url)


def _measure(args, chain: Chain, url: str, to_pay: dict, placed: dict, paid: int, orders_s: float,
             history_s: float) -> int:
    from django.conf import settings
    from django.db import connection

    from anchorgpu.orders.models import Order

    rows: list[Row] = []
    rows += _cycle("1 first poll (lookback)", url)
    chain.mine(1)
    rows += _cycle("2 new empty block", url)
    txs = []
    for order in to_pay["eth"]:
        txs.append(chain.eth_tx(chain.eth_payer, order.quote.address, order.quote.amount))
    for order in to_pay["usdc-ethereum"]:
        txs.append(chain.token_tx(chain.token_payer, order.quote.address, order.quote.amount))
    chain.in_blocks(txs, args.pay_blocks)
    rows += _cycle(f"3 {paid}/asset paid in {args.pay_blocks} blocks", url)
    chain.mine(1)
    rows += _cycle("4 new block, transfers confirming", url)
    chain.mine(args.confirmations)
    rows += _cycle(f"5 +{args.confirmations} blocks, transfers final", url)

    payers = [o.pk for orders in to_pay.values() for o in orders]
    now_paid = Order.objects.filter(pk__in=payers, state="paid").count()
    vendor = connection.vendor
    where = "PostgreSQL" if vendor == "postgresql" else "SQLite (temporary file)"
    print(f"chain watch benchmark: anvil at {url}, {os.cpu_count()} CPUs, database {where}")
    print(f"  {args.history} blocks of history with {args.noise} background transactions each "
          f"(made in {history_s:.1f} s); confirmations required: {args.confirmations}; "
          f"lookback {settings.ANCHORGPU_WATCH_LOOKBACK} blocks")
    print(f"  open orders: {args.orders} per asset ({2 * args.orders} in all), made in {orders_s:.1f} s: "
          + ", ".join(f"{LABEL[c]} {placed[c]} through order_place + {args.orders - placed[c]} copied rows "
                      f"(order + quote, bulk_create)" for c in ASSETS))
    print(f"  paid in step 3: {paid} per asset; orders paid after step 5: {now_paid} of {len(payers)}")
    print()
    print("node s: time in the watcher's reads (JSON-RPC, decoding included); db s: SQL statements and commits; "
          "other s: the rest (ORM, services, Python)")
    print(HEADER)
    for row in rows:
        print(_line(row))
    print()
    print(f"{'node s by read':<34} {'asset':<5} " + " ".join(f"{name:>8}" for name in READS))
    for row in rows:
        print(f"{row.step:<34} {row.asset:<5} " + " ".join(f"{row.reads[name]:>8.3f}" for name in READS))
    print()
    print(f"{'full cycle (both assets)':<34} {'wall s':>7} {'node s':>7} {'db s':>6} {'calls':>6} {'trips':>5}")
    cycles = {}
    for row in rows:
        cycles.setdefault(row.step, []).append(row)
    for step, pair in cycles.items():
        cycles[step] = sum(r.wall for r in pair)
        print(f"{step:<34} {cycles[step]:>7.3f} {sum(r.node for r in pair):>7.3f} {sum(r.sql for r in pair):>6.3f} "
              f"{sum(r.calls for r in pair):>6} {sum(r.round_trips for r in pair):>5}")
    slowest_poll = max(rows, key=lambda r: r.wall)
    slowest_cycle = max(cycles, key=cycles.get)
    print()
    verdict = "met" if slowest_poll.wall < TARGET_SECONDS else "MISSED"
    print(f"target: one asset's poll with {args.orders} open orders under {TARGET_SECONDS:.0f} s: {verdict} "
          f"(slowest: {slowest_poll.asset} in step {slowest_poll.step.split()[0]}, {slowest_poll.wall:.2f} s)")
    verdict = "met" if cycles[slowest_cycle] < TARGET_SECONDS else "MISSED"
    print(f"        both assets in one cycle ({2 * args.orders} orders) under {TARGET_SECONDS:.0f} s: {verdict} "
          f"(slowest: step {slowest_cycle.split()[0]}, {cycles[slowest_cycle]:.2f} s)")
    most_trips = max(rows, key=lambda r: r.round_trips)
    print(f"        batched: at most {most_trips.round_trips} HTTP round trips in one poll "
          f"({most_trips.asset}, step {most_trips.step.split()[0]}) for {most_trips.watched} orders")

    problems = [f"{r.asset} step {r.step.split()[0]}: {r.problem}" for r in rows if not r.ok]
    # Step 3 finds the payments; steps 4 and 5 read only the new blocks and follow the recorded transfers'
    # confirmations (a block already read is read again only when it was replaced).
    for row in rows:
        number = row.step.split()[0]
        if number == "3" and (row.found != paid or row.recorded != paid):
            problems.append(f"{row.asset} step 3: found {row.found}, recorded {row.recorded}, expected {paid} of each")
        if number == "4" and (row.found or row.recorded != paid):
            problems.append(f"{row.asset} step 4: found {row.found} (expected 0), recorded {row.recorded} "
                            f"(expected {paid})")
        if number == "5" and row.recorded != paid:
            problems.append(f"{row.asset} step 5: recorded {row.recorded}, expected {paid}")
        if number in ("1", "2") and (row.found or row.recorded):
            problems.append(f"{row.asset} step {number}: found {row.found} before anything was paid")
    if now_paid != len(payers):
        problems.append(f"{now_paid} of the {len(payers)} paid orders reached 'paid'")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
