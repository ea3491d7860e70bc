"""One poll of one asset's chain: find transfers to the open orders'
deposit addresses, follow the confirmations of those not yet final, and
withdraw any whose block was replaced. Settled transfers are looked at
again too, in bounded batches (``settled_check``): one taken away by a
reorganisation deeper than its confirmations flags its order for the
operators.

Reads come first and all together; only when every read succeeded does the
poll write. A node that is down or answers garbage leaves the orders as they
were, and the failure is logged and shown on the operators' status page.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from anchorgpu.chains.base import BlockRef, ChainUnavailable, LookupOutcome, SeenTransfer, Watcher
from anchorgpu.chains.keys import watch_key

from .models import Asset, Quote, Transfer, WatchState
from .observe import WATCHER, transfer_observe, transfer_withdraw
from .settled_check import SettledReads, credited_by_address, settled_read, settled_write
from .strays import stray_follow, stray_quotes, stray_record, strays_unsettled
from .watch_config import watcher_for

log = logging.getLogger("anchorgpu.watch")


@dataclass
class PollReport:
    asset: str
    ok: bool = True
    error: str = ""
    tip: int | None = None
    scanned: tuple[int, int] | None = None  # inclusive heights, None when no new block
    watched: int = 0
    found: int = 0  # transfers the scan returned
    recorded: int = 0  # new or changed rows
    withdrawn: int = 0
    strays: int = 0  # transfers to an order quoted on another EVM network, recorded or updated (never credited)
    failures: list[str] = field(default_factory=list)  # per-order writes that failed (logged)
    calls: int = 0
    round_trips: int = 0
    seconds: float = 0.0


@dataclass
class _Reads:
    head: BlockRef
    counted: int  # the height confirmations are counted from (the tip, or the asset's finality-tagged block)
    span: tuple[int, int] | None
    seen: list[SeenTransfer]
    unsettled: list[Transfer]
    where: dict[str, BlockRef | None]  # txid -> the block its receipt or status names now
    canonical: dict[int, str | None]  # height -> the chain's block hash there now (to trust ``where``)
    balances: dict[str, int]
    recent: dict[str, str]
    dropped: set[str] = field(default_factory=set)  # unmined transfers the node no longer knows at all
    settled: SettledReads = field(default_factory=SettledReads)  # settled transfers and balances checked again
    strays: dict[str, int] = field(default_factory=dict)  # address -> quote id, this coin on the other EVM networks
    stray_rows: list = field(default_factory=list)  # recorded strays not yet final, followed like transfers


BALANCE_EVERY_BLOCKS = 10  # the coin balances (one read per address) are compared this often
RECENT_BLOCKS = 12  # at least this many of the last heights read are remembered by hash
# With a finality tag, every block above the tagged one can still be replaced: that many are remembered too, up
# to this many (an L2's "finalized" block can lag thousands of blocks; a payment mined into a replacement block
# deeper than this is found by its claim check, and recorded transfers are followed by receipt whatever the depth).
TAGGED_WINDOW_CAP = 512
WINDOW_SLACK = timedelta(hours=1)  # quotes whose watch window closed this long before the blocks read


def open_quotes(asset: Asset, since: datetime) -> list[Quote]:
    """Quotes whose address is still watched at ``since``: until the monitoring window ends, whatever the
    order's state (money reaching a settled or cancelled order is owed back, so it must be seen too)."""
    return list(Quote.objects.filter(asset=asset, monitor_until__gt=since).select_related("order"))


def _since(state: WatchState, now: datetime) -> datetime:
    """The moment the blocks this poll reads start at, roughly: after a stop of the worker or a node
    outage, blocks from inside a quote's window are read after the window closed, and must still be read
    with its address."""
    last_seen = state.tip_time or now
    return min(now, last_seen) - WINDOW_SLACK


def _span(state: WatchState, head: BlockRef, depth: int,
          watcher: Watcher) -> tuple[tuple[int, int] | None, dict[str, str]]:
    """Which blocks to read, and the hashes to remember of the last blocks read.

    From where the last poll stopped; and from lower down when a block read earlier has been replaced
    since (a reorganisation may have put a payment into a block at a height already read). Replaced
    blocks are found by comparing hashes, so unchanged ones are not read again."""
    start = (
        state.next_block if state.next_block is not None else max(0, head.number - settings.ANCHORGPU_WATCH_LOOKBACK)
    )
    start = min(start, head.number + 1)
    window = range(max(0, head.number - depth + 1), head.number + 1)
    known = {int(h): v for h, v in (state.recent or {}).items()}
    upcoming = {h for h in window if h < start + settings.ANCHORGPU_WATCH_MAX_BLOCKS}
    now_at = watcher.hashes(set(known) | upcoming)
    replaced = [h for h, old in known.items() if h <= head.number and now_at.get(h) != old]
    first = min([start, *replaced])
    last = min(head.number, first + settings.ANCHORGPU_WATCH_MAX_BLOCKS - 1)
    # Remember the window's hashes up to the last block read; a known height the node does not reach
    # (it is behind) keeps its old hash, to be compared again next time.
    recent = {str(h): v for h, v in known.items() if h > head.number and h >= window.start}
    recent.update({str(h): now_at[h] for h in window if h <= last and now_at.get(h)})
    return ((first, last) if first <= last else None), recent


def _read(asset: Asset, state: WatchState, watcher: Watcher, now: datetime) -> tuple[_Reads, dict[str, Quote]]:
    head = watcher.head()
    counted = watcher.counted_tip(head)
    # The open quotes are read after the tip: a quote made later cannot have been paid in a block up to it.
    quotes = open_quotes(asset, _since(state, now))
    by_address = {watch_key(q.address): q for q in quotes}
    if state.next_block is not None and state.tip_hash == head.hash and state.next_block > head.number \
            and asset.finality == "depth":
        # No new block: nothing changed on chain, but an unmined transfer may have left the mempool. (With a
        # finality tag the tagged block may have moved up under the same tip: the full read follows it.)
        waiting, dropped = _dropped(asset, watcher)
        return _Reads(head, counted, None, [], waiting, {}, {}, {}, state.recent, dropped), by_address
    # Addresses are one key on every EVM network: the same coin sent here for an order quoted elsewhere is found
    # too, to be recorded for the operators (``strays``), never credited.
    strays = stray_quotes(asset, _since(state, now))
    # Quotes keep the confirmations they were made with, even after the operator changes the asset's.
    required = max([asset.confirmations_required, *(q.confirmations_required for q in quotes)])
    # Blocks above the one confirmations count from can still be replaced (with a finality tag that is more than
    # ``required`` below the tip).
    depth = max(required, RECENT_BLOCKS, min(head.number - counted + required, TAGGED_WINDOW_CAP))
    span, recent = _span(state, head, depth, watcher)
    seen = watcher.scan(set(by_address) | set(strays), *span) if span and (by_address or strays) else []
    unsettled = list(Transfer.objects.filter(asset=asset, source=Transfer.Source.WATCHER, withdrawn_at__isnull=True,
                                             confirmations__lt=F("order__quote__confirmations_required"))
                     .select_related("order__quote"))
    stray_rows = strays_unsettled(asset, counted) if asset.chain == "evm" else []
    txids = {t.txid for t in unsettled} | {s.txid for s in stray_rows}
    where = watcher.locate(txids) if txids else {}
    heights = {t.block_number for t in [*unsettled, *stray_rows]
               if where.get(t.txid) is None and t.block_number is not None}
    heights |= {ref.number for ref in where.values() if ref is not None and ref.number <= head.number}
    canonical = watcher.hashes(heights) if heights else {}
    balances = {}
    crossed = state.tip is None or head.number // BALANCE_EVERY_BLOCKS != state.tip // BALANCE_EVERY_BLOCKS
    if asset.chain == "evm" and not asset.is_token and by_address and crossed and hasattr(watcher, "balances"):
        balances = watcher.balances(set(by_address), head.number)
    unmined = [t for t in unsettled if not t.block_hash and where.get(t.txid) is None]
    _waiting, dropped = _dropped(asset, watcher, unmined)
    settled = settled_read(asset, watcher, head, now, balances=balances, by_address=by_address)
    reads = _Reads(head, counted, span, seen, unsettled, where, canonical, balances, recent, dropped, settled,
                   strays, stray_rows)
    return reads, by_address


def _dropped(asset: Asset, watcher: Watcher, rows: list[Transfer] | None = None) -> tuple[list[Transfer], set[str]]:
    """Transfers recorded from the mempool (a Bitcoin claim) that the explorer no longer knows: double-spent,
    replaced by fee, or expired from the mempool. They stop counting as pending (they come back if seen)."""
    if rows is None:
        rows = list(Transfer.objects.filter(asset=asset, source=Transfer.Source.WATCHER, withdrawn_at__isnull=True,
                                            block_hash="").select_related("order__quote"))
    gone = set()
    for txid in sorted({t.txid for t in rows}):
        address = next(t.address for t in rows if t.txid == txid)  # where it was paid, even if reassigned since
        if watcher.lookup(txid, watch_key(address)).outcome is LookupOutcome.NOT_FOUND:
            gone.add(txid)
    return rows, gone


def watch_poll(asset: Asset, *, watcher: Watcher | None = None, now: datetime | None = None) -> PollReport | None:
    """Poll ``asset`` once. None when no node or explorer is configured for it."""
    now = now or timezone.now()
    started = time.monotonic()
    report = PollReport(asset=asset.code)
    state, _ = WatchState.objects.get_or_create(asset=asset)
    try:
        watcher = watcher or watcher_for(asset)
        if watcher is None:
            return None
        reads, by_address = _read(asset, state, watcher, now)
    except ChainUnavailable as exc:
        report.ok, report.error = False, str(exc)
        log.warning("watch %s: %s; nothing decided, the next poll tries again", asset.code, exc)
        _save_state(state, report, now, started, watcher)
        return report
    report.watched = len(by_address)
    report.tip, report.scanned, report.found = reads.head.number, reads.span, len(reads.seen)
    retry_from = _write(asset, reads, by_address, report, now)
    state.tip, state.tip_hash, state.tip_time = reads.head.number, reads.head.hash, reads.head.time
    if reads.span is not None:
        # A transfer that could not be written is read again next time, from its block.
        state.next_block = min(reads.span[1] + 1, retry_from) if retry_from is not None else reads.span[1] + 1
    state.recent = reads.recent
    if report.failures:
        report.ok = False
        report.error = f"{len(report.failures)} write(s) failed and are retried: {report.failures[0]}"[:2000]
    _save_state(state, report, now, started, watcher)
    return report


def _write(asset: Asset, reads: _Reads, by_address: dict[str, Quote], report: PollReport,
           now: datetime) -> int | None:
    """Write what the reads found; returns the lowest block whose transfer could not be written."""
    tip, counted = reads.head.number, reads.counted
    retry_from = None
    for seen in reads.seen:
        quote = by_address.get(seen.to)
        if quote is not None:
            what, write = f"record {seen.txid}:{seen.index}", partial(transfer_observe, order=quote.order, seen=seen,
                                                                      tip=counted, now=now)
        elif seen.to in reads.strays:
            what, write = f"stray {seen.txid}:{seen.index}", partial(_stray, report, asset, reads.strays[seen.to],
                                                                     seen, now)
        else:
            continue
        if not _guarded(report, what, write):
            height = seen.block.number if seen.block else reads.span[0]
            retry_from = height if retry_from is None else min(retry_from, height)
    fresh = {(t.txid, t.index) for t in reads.seen}
    for row in reads.unsettled:
        if (row.txid, row.index) in fresh:
            continue  # the scan just brought it up to date
        block = reads.where.get(row.txid)
        if block is None and not row.block_hash and row.txid in reads.dropped:
            report.withdrawn += 1
            _guarded(report, f"withdraw {row}", partial(
                transfer_withdraw, transfer=row, expected=(None, ""), now=now,
                reason="it was never mined and the node no longer knows it (double-spent, replaced or dropped "
                       "from the mempool)"))
            continue
        if block is None:
            now_there = reads.canonical.get(row.block_number) if row.block_number is not None else None
            # Withdrawn only when its block was really replaced: a node that is merely behind, or that lost
            # a receipt, answers "no receipt" too, and must not take a payment away.
            if row.block_hash and now_there is not None and now_there != row.block_hash:
                report.withdrawn += 1
                _guarded(report, f"withdraw {row}", partial(
                    transfer_withdraw, transfer=row, expected=(row.block_number, row.block_hash), now=now,
                    reason=f"block {row.block_number} ({row.block_hash[:18]}…) was replaced by {now_there[:18]}… "
                           "and the transaction is in no block now"))
            continue  # still in the mempool, or the node is behind: looked at again next poll
        if block.number > tip or reads.canonical.get(block.number) != block.hash:
            continue  # a receipt naming a block the chain does not have (yet): not believed
        again = SeenTransfer(txid=row.txid, index=row.index, to=watch_key(row.order.quote.address), amount=row.amount,
                             sender=row.sender, block=block)
        _guarded(report, f"update {row}", partial(transfer_observe, order=row.order, seen=again, tip=counted,
                                                  now=now))
    for stray in reads.stray_rows:
        if (stray.txid, stray.index) in fresh:
            continue  # the scan just brought it up to date
        block = reads.where.get(stray.txid)
        if block is not None and (block.number > tip or reads.canonical.get(block.number) != block.hash):
            continue  # a receipt naming a block the chain does not have (yet): not believed
        _guarded(report, f"follow stray {stray}", partial(
            _stray_follow, report, stray, block, reads.canonical.get(stray.block_number), now))
    if reads.settled.error:
        report.failures.append(f"settled transfers not checked: {reads.settled.error}")
    report.withdrawn += settled_write(reads.settled, asset=asset, by_address=by_address, tip=tip, counted=counted,
                                      skip=fresh, now=now, guarded=lambda what, write: _guarded(report, what, write))
    if reads.balances:
        _note_balances(asset, reads.balances, by_address)
    return retry_from


def _stray(report: PollReport, asset: Asset, quote: int, seen: SeenTransfer, now: datetime) -> None:
    if stray_record(asset=asset, quote=quote, seen=seen, now=now) is not None:
        report.strays += 1
    # None: not counted in ``recorded`` (no transfer of an order changed)


def _stray_follow(report: PollReport, stray, block: BlockRef | None, now_there: str | None, now: datetime) -> None:
    if stray_follow(stray, block=block, now_there=now_there, now=now):
        report.strays += 1


def _guarded(report: PollReport, what: str, write) -> bool:
    """One order's write failing (a bug, a lock timeout) must not stop the others; it is logged, and
    the poll reads its block again next time. False when it failed."""
    try:
        if write() is not None:
            report.recorded += 1
        return True
    except Exception as exc:  # noqa: BLE001 - logged with its traceback, the poll goes on
        log.exception("watch: %s failed", what)
        report.failures.append(f"{what}: {exc}")
        return False


def _note_balances(asset: Asset, balances: dict[str, int], by_address: dict[str, Quote]) -> None:
    """Coin at an address beyond the transfers found (a contract's internal transfer, which no block's
    transaction list shows) is set on the quote for an operator to attribute."""
    credited = credited_by_address(asset, by_address)
    for address, balance in balances.items():
        quote = by_address.get(address)
        if quote is None:
            continue
        unattributed = max(0, balance - credited.get(address, 0))
        if unattributed != quote.unattributed:
            if unattributed:
                log.warning("watch %s: %s holds %s more than its transfers found", asset.code, address, unattributed)
            Quote.objects.filter(pk=quote.pk).update(unattributed=unattributed)


def _save_state(state: WatchState, report: PollReport, now: datetime, started: float, watcher) -> None:
    report.seconds = time.monotonic() - started
    report.calls = getattr(watcher, "calls", 0) if watcher else 0
    report.round_trips = getattr(watcher, "round_trips", 0) if watcher else 0
    state.last_poll_at = now
    state.watched, state.found = report.watched, report.found
    state.calls, state.round_trips = report.calls, report.round_trips
    state.duration_ms = int(report.seconds * 1000)
    if report.ok:
        state.last_success_at, state.errors_in_row = now, 0
    else:
        state.last_error, state.last_error_at = report.error[:2000], now
        state.errors_in_row += 1
    state.save()


def watch_poll_all(*, now: datetime | None = None) -> int:
    """The worker's sweep: poll every accepted asset that has a node or explorer; returns transfers written."""
    written = 0
    for asset in Asset.objects.filter(is_active=True):
        try:
            report = watch_poll(asset, now=now)
        except Exception:  # noqa: BLE001 - one asset's bug must not stop the others' polls
            log.exception("watch %s: the poll failed", asset.code)
            continue
        if report is not None:
            written += report.recorded + report.withdrawn
    return written


__all__ = ["watch_poll", "watch_poll_all", "open_quotes", "PollReport", "WATCHER"]
