"""Settled transfers, looked at again: money the watcher credited with all
its confirmations can still be taken away by a reorganisation deeper than
the confirmations (a 51 % attack on a small chain, a long fork). Each poll
with a new block re-checks a bounded batch of them, and the native coin
held by the watched deposit addresses is compared with what settled there.

Which transfers: those the watcher recorded (an operator's record has no
block to check), not withdrawn, with their quote's confirmations, recorded
(credited) within ``RECHECK_FOR`` and not found in place within ``RECHECK_EVERY``;
at most ``RECHECK_BATCH`` per poll, those checked longest ago (or never)
first. A node or explorer that fails these reads fails only this check (it
is logged and shown with the poll's errors): new payments are still found. Deep reorganisations seen on
proof-of-work chains were over within days, so two weeks is a margin, not a
guess at the limit. Transfers taken away after settling are watched for the
same time in case they are mined again (then ``transfer_observe`` restores
them and the order's alert says so).

What counts as gone is what the unsettled check already requires: the
transaction is in no block *and* the block at its height now has another
hash. A missing receipt alone is not proof (a node behind a load balancer
loses receipts), nor is a chain shorter than the transfer's height (a node
that is behind): both leave the transfer as it is, to be read again.

The balance rule. A balance is only a signal, because the operators sweep
deposit addresses and an address's coin leaves by a transaction it signs.
So the alert is raised for an address only when all of these hold: its
quote is still watched (the balance is read for open quotes only, every
``BALANCE_EVERY_BLOCKS``); it holds less native coin than the settled
transfers the watcher credited to it, counted after this poll's own
withdrawals; and its transaction count at that block is 0, so nothing was
swept, refunded or spent from it. Then the coin cannot have left by any
transaction of the address, and what was credited is not there. Tokens have
no balance rule: a token can leave an address without a transaction from it
(``transferFrom`` after an off-chain permit), so a short token balance
proves nothing; token and Bitcoin transfers rely on the transfer check.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum

from django.db import transaction
from django.db.models import F, Q

from anchorgpu.chains.base import BlockRef, ChainUnavailable, SeenTransfer, Watcher
from anchorgpu.chains.keys import watch_key
from anchorgpu.orders.transitions import order_lock

from .chain_alerts import chain_alert_raise
from .models import Asset, Quote, Transfer
from .observe import BALANCE_SUBJECT, GONE, WATCHER, gone_after_settling, transfer_observe, transfer_withdraw

log = logging.getLogger("anchorgpu.watch")
RECHECK_FOR = timedelta(days=14)
RECHECK_EVERY = timedelta(minutes=5)  # an explorer without batches pays four requests per Bitcoin transfer
RECHECK_BATCH = 25


class Verdict(str, Enum):
    FOUND = "found"  # in the block it was credited in, which is on the chain
    MOVED = "moved"  # in another block of the chain (mined again there)
    GONE = "gone"  # in no block, and its block was replaced
    UNSURE = "unsure"  # the node's answers do not settle it (behind, lost a receipt): read again next time


def judge(*, block_number: int, block_hash: str, now_at: BlockRef | None, canonical: dict[int, str | None],
          tip: int) -> Verdict:
    """Where a transfer credited in block ``block_number`` (``block_hash``) stands, from what the node says:
    ``now_at`` the block its receipt or status names, ``canonical`` the chain's hashes at the heights read."""
    if now_at is not None:
        if now_at.number > tip or canonical.get(now_at.number) != now_at.hash:
            return Verdict.UNSURE  # a receipt naming a block the chain does not have (yet): not believed
        if now_at.number == block_number and now_at.hash == block_hash:
            return Verdict.FOUND
        return Verdict.MOVED
    there = canonical.get(block_number)
    if block_number <= tip and there is not None and there != block_hash:
        return Verdict.GONE
    return Verdict.UNSURE


@dataclass
class SettledReads:
    rows: list[Transfer] = field(default_factory=list)  # settled and counting
    returning: list[Transfer] = field(default_factory=list)  # taken away after settling, watched for a return
    where: dict[str, BlockRef | None] = field(default_factory=dict)
    canonical: dict[int, str | None] = field(default_factory=dict)
    short: dict[str, int] = field(default_factory=dict)  # address -> balance, below its settled credit
    sent: dict[str, int] = field(default_factory=dict)  # address -> transactions it sent (its nonce)
    balance_block: int | None = None
    error: str = ""  # why the reads failed (then nothing else is set)


def _recent(asset: Asset, now: datetime):
    return (Transfer.objects.filter(asset=asset, source=Transfer.Source.WATCHER, created_at__gte=now - RECHECK_FOR)
            .exclude(block_hash="").exclude(block_number__isnull=True).select_related("order__quote"))


def settled_due(asset: Asset, now: datetime) -> tuple[list[Transfer], list[Transfer]]:
    """The settled transfers to check in this poll, and those taken away after settling to look for."""
    rows = list(_recent(asset, now).filter(withdrawn_at__isnull=True,
                                           confirmations__gte=F("order__quote__confirmations_required"))
                .filter(Q(rechecked_at__isnull=True) | Q(rechecked_at__lt=now - RECHECK_EVERY))
                .order_by(F("rechecked_at").asc(nulls_first=True), "created_at", "id")[:RECHECK_BATCH])
    gone = (_recent(asset, now).filter(withdrawn_at__isnull=False, note__contains=f"{GONE}:")
            .order_by("created_at", "id"))
    return rows, [t for t in gone[:RECHECK_BATCH * 4] if gone_after_settling(t.note)][:RECHECK_BATCH]


def credited_by_address(asset: Asset, by_address: dict[str, Quote], *, settled_only: bool = False) -> dict[str, int]:
    """Base units credited per watched address (lowercased), counted where the money went: a transfer
    reassigned to another order (``Transfer.paid_to``) still sits at the address it was paid to.
    ``settled_only``: only the watcher's transfers with all their confirmations."""
    addresses = {q.address for q in by_address.values()}
    rows = Transfer.objects.filter(asset=asset, withdrawn_at__isnull=True).filter(
        Q(paid_to="", order_id__in=[q.order_id for q in by_address.values()]) | Q(paid_to__in=addresses))
    if settled_only:
        rows = rows.filter(source=Transfer.Source.WATCHER,
                           confirmations__gte=F("order__quote__confirmations_required"))
    totals: dict[str, int] = {}
    for paid_to, own, amount in rows.values_list("paid_to", "order__quote__address", "amount"):
        address = watch_key(paid_to or own)
        totals[address] = totals.get(address, 0) + int(amount)  # amounts are stored as digits
    return totals


def settled_credit(asset: Asset, by_address: dict[str, Quote]) -> dict[str, int]:
    """Base units the watcher credited per watched address with all their confirmations (not withdrawn)."""
    return credited_by_address(asset, by_address, settled_only=True)


def settled_read(asset: Asset, watcher: Watcher, head: BlockRef, now: datetime, *, balances: dict[str, int],
                 by_address: dict[str, Quote]) -> SettledReads:
    """Every chain read the settled checks need. A failed read empties them all, with the reason: nothing is
    judged from part of the answers."""
    try:
        return _settled_read(asset, watcher, head, now, balances=balances, by_address=by_address)
    except ChainUnavailable as exc:
        log.warning("watch %s: the settled transfers could not be checked: %s", asset.code, exc)
        return SettledReads(error=str(exc))


def _settled_read(asset: Asset, watcher: Watcher, head: BlockRef, now: datetime, *, balances: dict[str, int],
                  by_address: dict[str, Quote]) -> SettledReads:
    rows, returning = settled_due(asset, now)
    reads = SettledReads(rows=rows, returning=returning)
    txids = {t.txid for t in rows + returning}
    reads.where = watcher.locate(txids) if txids else {}
    heights = {t.block_number for t in rows + returning}
    heights |= {ref.number for ref in reads.where.values() if ref is not None and ref.number <= head.number}
    reads.canonical = watcher.hashes(heights) if heights else {}
    if balances:
        credit = settled_credit(asset, by_address)
        reads.short = {a: b for a, b in balances.items() if b < credit.get(a, 0)}
        reads.balance_block = head.number
        if reads.short and hasattr(watcher, "sent_counts"):
            reads.sent = watcher.sent_counts(set(reads.short), head.number)
    return reads


def settled_write(reads: SettledReads, *, asset: Asset, by_address: dict[str, Quote], tip: int,
                  skip: set[tuple[str, int]], now: datetime, guarded, counted: int | None = None) -> int:
    """Act on what ``settled_read`` found; ``guarded(what, write)`` runs each write (the poll's error
    handling). ``counted``: the height confirmations count from (``Watcher.counted_tip``; the tip by
    default). Returns how many transfers were taken away."""
    counted = tip if counted is None else counted
    if reads.error:
        return 0  # the poll reports it (PollReport.failures)
    withdrawn = 0
    found = []
    for row in reads.rows:
        if (row.txid, row.index) in skip:
            continue  # the scan just brought it up to date
        now_at = reads.where.get(row.txid)
        verdict = judge(block_number=row.block_number, block_hash=row.block_hash, now_at=now_at,
                        canonical=reads.canonical, tip=tip)
        if verdict is Verdict.FOUND:
            found.append(row.pk)
        elif verdict is Verdict.MOVED:
            guarded(f"move settled {row}", lambda row=row, now_at=now_at: transfer_observe(
                order=row.order, seen=_again(row, now_at), tip=counted, now=now))
        elif verdict is Verdict.GONE:
            withdrawn += 1
            there = reads.canonical.get(row.block_number) or ""
            guarded(f"withdraw settled {row}", lambda row=row, there=there: transfer_withdraw(
                transfer=row, expected=(row.block_number, row.block_hash), now=now,
                reason=f"block {row.block_number} is now {there} and the transaction is in no block of the chain "
                       f"(its tip is at {tip})"))
    if found:
        guarded("note settled transfers found", lambda: _found(found, now))
    for row in reads.returning:
        now_at = reads.where.get(row.txid)
        if now_at is None or (row.txid, row.index) in skip:
            continue
        if judge(block_number=row.block_number, block_hash=row.block_hash, now_at=now_at, canonical=reads.canonical,
                 tip=tip) in (Verdict.FOUND, Verdict.MOVED):
            guarded(f"restore {row}", lambda row=row, now_at=now_at: transfer_observe(
                order=row.order, seen=_again(row, now_at), tip=counted, now=now))
    if reads.short:
        guarded("compare balances", lambda: _balance_alerts(reads, asset, by_address, now))
    return withdrawn


def _found(pks: list[int], now: datetime) -> None:
    Transfer.objects.filter(pk__in=pks, withdrawn_at__isnull=True).update(rechecked_at=now)


def _again(row: Transfer, block: BlockRef) -> SeenTransfer:
    return SeenTransfer(txid=row.txid, index=row.index, to=watch_key(row.order.quote.address), amount=row.amount,
                        sender=row.sender, block=block)


def _orders_credited_at(asset: Asset, quote: Quote) -> list[int]:
    """The orders whose settled transfers sit at ``quote``'s address: its own order, and any order a transfer
    paid there was reassigned to (``Transfer.paid_to``)."""
    rows = (Transfer.objects.filter(asset=asset, source=Transfer.Source.WATCHER, withdrawn_at__isnull=True)
            .filter(Q(paid_to="", order_id=quote.order_id) | Q(paid_to=quote.address)))
    return sorted(set(rows.values_list("order_id", flat=True))) or [quote.order_id]


def _balance_alerts(reads: SettledReads, asset: Asset, by_address: dict[str, Quote], now: datetime) -> None:
    credit = settled_credit(asset, by_address)  # after this poll's withdrawals: those are alerted already
    for address, balance in sorted(reads.short.items()):
        owed = credit.get(address, 0)
        if balance >= owed or reads.sent.get(address) != 0:
            continue  # explained by a withdrawal above, or the address has sent something (a sweep, a refund)
        subject = f"{BALANCE_SUBJECT} {address}"
        for order_id in _orders_credited_at(asset, by_address[address]):
            with transaction.atomic():
                order = order_lock(order_id)
                chain_alert_raise(order=order, subject=subject, actor=WATCHER, now=now,
                                  data={"address": address, "balance": str(balance), "credited": str(owed),
                                        "block": reads.balance_block},
                                  text=f"{subject} holds {balance} base units at block {reads.balance_block}, less "
                                       f"than the {owed} its settled transfers credited to this order, and it has "
                                       "sent no transaction (nothing was swept or refunded from it).")
