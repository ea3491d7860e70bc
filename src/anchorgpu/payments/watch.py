"""One poll of one asset's chain: find transfers to the open orders'
deposit addresses, follow the confirmations of those not yet final, and
withdraw any whose block was replaced.

Reads come first and all together; only when every read succeeded does the
poll write. A node that is down or answers garbage leaves the orders as they
were, and the failure is logged and shown on the operators' status page.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from anchorgpu.chains.base import BlockRef, ChainUnavailable, SeenTransfer, Watcher

from .models import Asset, Quote, Transfer, WatchState
from .observe import WATCHER, transfer_observe, transfer_withdraw
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
    failures: list[str] = field(default_factory=list)  # per-order writes that failed (logged)
    calls: int = 0
    round_trips: int = 0
    seconds: float = 0.0


@dataclass
class _Reads:
    head: BlockRef
    span: tuple[int, int] | None
    seen: list[SeenTransfer]
    unsettled: list[Transfer]
    where: dict[str, BlockRef | None]
    balances: dict[str, int]
    recent: dict[str, str]


def open_quotes(asset: Asset, now: datetime) -> list[Quote]:
    """Quotes whose address is still watched: until the monitoring window ends, whatever the order's state
    (money reaching a settled or cancelled order is owed back, so it must be seen too)."""
    return list(Quote.objects.filter(asset=asset, monitor_until__gt=now).select_related("order"))


BALANCE_EVERY_BLOCKS = 10  # the coin balances (one read per address) are compared this often


def _span(state: WatchState, head: BlockRef, required: int,
          watcher: Watcher) -> tuple[tuple[int, int] | None, dict[str, str]]:
    """Which blocks to read, and the hashes to remember of the blocks not yet final.

    From where the last poll stopped; and from lower down when a block read earlier and not final then
    has been replaced since (a reorganisation may have put a payment into a block at a height already
    read). Replaced blocks are found by comparing hashes, so unchanged ones are not read again."""
    if state.next_block is not None and state.tip_hash == head.hash and state.next_block > head.number:
        return None, state.recent  # no new block since the last poll
    start = state.next_block if state.next_block is not None else max(0, head.number - settings.ANCHORGPU_WATCH_LOOKBACK)
    start = min(start, head.number + 1)
    window = range(max(0, head.number - max(required, 1) + 1), head.number + 1)
    known = {int(h): v for h, v in (state.recent or {}).items()}
    now_at = watcher.hashes(set(known) | {h for h in window if h < start + settings.ANCHORGPU_WATCH_MAX_BLOCKS})
    replaced = [h for h, old in known.items() if now_at.get(h) != old]
    first = min([start, *replaced])
    last = min(head.number, first + settings.ANCHORGPU_WATCH_MAX_BLOCKS - 1)
    recent = {str(h): now_at[h] for h in window if h <= last and now_at.get(h)}
    return ((first, last) if first <= last else None), recent


def _read(asset: Asset, state: WatchState, watcher: Watcher, now: datetime) -> tuple[_Reads, dict[str, Quote]]:
    head = watcher.head()
    # The open quotes are read after the tip: a quote made later cannot have been paid in a block up to it.
    by_address = {q.address.lower(): q for q in open_quotes(asset, now)}
    required = asset.confirmations_required
    if state.next_block is not None and state.tip_hash == head.hash and state.next_block > head.number:
        return _Reads(head, None, [], [], {}, {}, state.recent), by_address  # no new block: nothing changed
    span, recent = _span(state, head, required, watcher)
    seen = watcher.scan(set(by_address), *span) if span and by_address else []
    unsettled = list(Transfer.objects.filter(asset=asset, withdrawn_at__isnull=True, confirmations__lt=required)
                     .select_related("order__quote"))
    where = watcher.locate({t.txid for t in unsettled}) if unsettled else {}
    balances = {}
    crossed = state.tip is None or head.number // BALANCE_EVERY_BLOCKS != state.tip // BALANCE_EVERY_BLOCKS
    if asset.chain == "evm" and not asset.is_token and by_address and crossed and hasattr(watcher, "balances"):
        balances = watcher.balances(set(by_address), head.number)
    return _Reads(head, span, seen, unsettled, where, balances, recent), by_address


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
    _write(asset, reads, by_address, report, now)
    state.tip, state.tip_hash, state.tip_time = reads.head.number, reads.head.hash, reads.head.time
    if reads.span is not None:
        state.next_block = reads.span[1] + 1
    state.recent = reads.recent
    _save_state(state, report, now, started, watcher)
    return report


def _write(asset: Asset, reads: _Reads, by_address: dict[str, Quote], report: PollReport, now: datetime) -> None:
    tip = reads.head.number
    for seen in reads.seen:
        quote = by_address.get(seen.to)
        if quote is None:
            continue
        _guarded(report, f"record {seen.txid}:{seen.index}",
                 lambda: transfer_observe(order=quote.order, seen=seen, tip=tip, now=now))
    fresh = {(t.txid, t.index) for t in reads.seen}
    for row in reads.unsettled:
        if (row.txid, row.index) in fresh:
            continue  # the scan just brought it up to date
        block = reads.where.get(row.txid)
        if block is None:
            if row.source == Transfer.Source.WATCHER and row.block_hash:
                report.withdrawn += 1
                _guarded(report, f"withdraw {row}", lambda: transfer_withdraw(
                    transfer=row, now=now, reason=f"block {row.block_number} ({row.block_hash[:18]}…) was replaced "
                                                  "and the transaction is in no block now"))
            continue  # still in the mempool, or an operator's record the chain does not show: left alone
        again = SeenTransfer(txid=row.txid, index=row.index, to=row.order.quote.address.lower(), amount=row.amount,
                             sender=row.sender, block=block)
        _guarded(report, f"update {row}", lambda: transfer_observe(order=row.order, seen=again, tip=tip, now=now))
    if reads.balances:
        _note_balances(asset, reads.balances, by_address)


def _guarded(report: PollReport, what: str, write) -> None:
    """One order's write failing (a bug, a lock timeout) must not stop the others; it is logged and retried."""
    try:
        if write() is not None:
            report.recorded += 1
    except Exception as exc:  # noqa: BLE001 - logged with its traceback, the poll goes on
        log.exception("watch: %s failed", what)
        report.failures.append(f"{what}: {exc}")


def _note_balances(asset: Asset, balances: dict[str, int], by_address: dict[str, Quote]) -> None:
    """Coin at an address beyond the transfers found (a contract's internal transfer, which no block's
    transaction list shows) is set on the quote for an operator to attribute."""
    credited = _credited(asset, by_address)
    for address, balance in balances.items():
        quote = by_address.get(address)
        if quote is None:
            continue
        unattributed = max(0, balance - credited.get(address, 0))
        if unattributed != quote.unattributed:
            if unattributed:
                log.warning("watch %s: %s holds %s more than its transfers found", asset.code, address, unattributed)
            Quote.objects.filter(pk=quote.pk).update(unattributed=unattributed)


def _credited(asset: Asset, by_address: dict[str, Quote]) -> dict[str, int]:
    """Base units recorded per address (amounts are stored as digits, so they are summed here)."""
    address_of = {q.order_id: a for a, q in by_address.items()}
    totals: dict[str, int] = {}
    rows = Transfer.objects.filter(asset=asset, withdrawn_at__isnull=True, order_id__in=list(address_of))
    for order_id, amount in rows.values_list("order_id", "amount"):
        totals[address_of[order_id]] = totals.get(address_of[order_id], 0) + int(amount)
    return totals


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
