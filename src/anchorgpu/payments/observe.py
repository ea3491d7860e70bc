"""What the chain watcher writes: a transfer it found, its confirmations as
blocks arrive, and its withdrawal when the block holding it was replaced.

Each function locks the order and ends in ``payment_apply``, the evaluation
an operator's manual record also goes through, so an order moves the same
way whichever path a transfer took.

A transfer that had all its confirmations (it *settled*) and is then
withdrawn was counted by the order: the withdrawal raises the order's chain
alert (``chain_alerts``) in the same transaction. The withdrawn transfer
stops counting for new decisions (an evaluation no longer sees it), but the
order is not moved back: ``payment_apply`` only moves waiting orders, and a
paid one keeps its state, invoice and access until an operator decides. If
the transfer is mined again, ``transfer_observe`` restores it and the alert
says so. The transfer's ``note`` keeps the trail (``settled_moved``,
``settled_gone``, ``settled_back`` lines).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from anchorgpu.audit.services import audit_record
from anchorgpu.chains.base import SeenTransfer
from anchorgpu.orders.models import Order
from anchorgpu.orders.transitions import order_lock

from .chain_alerts import chain_alert_raise, chain_alert_resolved
from .models import Transfer
from .services import payment_apply

log = logging.getLogger("anchorgpu.watch")
WATCHER = "chain-watcher"
# Lines of a transfer's note: it left its block after settling (moved, gone), or came back after going.
MOVED, GONE, BACK = "settled_moved", "settled_gone", "settled_back"
BALANCE_SUBJECT = "Deposit address"  # how a balance finding's sentence starts (payments.settled_check)


def gone_after_settling(note: str) -> bool:
    """Whether the transfer's latest withdrawal took away money the order had counted (and it is not back)."""
    return note.rfind(f"{GONE}:") > note.rfind(f"{BACK}:")


def _note_line(row: Transfer, line: str) -> None:
    row.note = f"{row.note}\n{line}" if row.note else line


def transfer_observe(*, order: Order, seen: SeenTransfer, tip: int, actor: str = WATCHER,
                     now: datetime | None = None) -> Transfer | None:
    """Record a transfer the watcher found for ``order``, or bring the
    recorded one up to date (its block, its confirmations, back from a
    withdrawal). Returns None when the transfer belongs to another order."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(order)
        asset = locked.quote.asset
        confirmations = seen.confirmations(tip)
        row = (Transfer.objects.select_for_update()
               .filter(chain=asset.network, txid=seen.txid, index=seen.index).first())
        if row is not None and row.order_id != locked.pk:
            log.warning("transfer %s:%s already credits order %s, not %s", seen.txid, seen.index, row.order_id,
                        locked.pk)
            return None
        if row is None:
            typed = _typed_by_hand(locked, asset, seen)
            if typed is not None:
                return None
            row = _create(locked, seen, confirmations, actor, now)
            if row is None:
                return None
        else:
            returning = row.withdrawn_at is not None and gone_after_settling(row.note)
            changed = _refresh(locked, row, seen, confirmations, actor)
            if changed is None:
                return row  # nothing changed
            if not changed:
                return row  # one more confirmation, still short of the required number: the evaluation is the same
            if returning:
                _came_back(locked, row, actor, now)
        payment_apply(locked, actor=actor, now=now)
    return row


def _came_back(order: Order, row: Transfer, actor: str, now: datetime) -> None:
    """A transfer taken away after it had settled is on chain again: the alert keeps a trace of it."""
    required = order.quote.confirmations_required
    subject = f"{row} back in block {row.block_number} ({row.block_hash})"
    _note_line(row, f"{BACK}: {now.isoformat()} in block {row.block_number} {row.block_hash}")
    row.save(update_fields=["note"])
    others = (Transfer.objects.filter(order=order, withdrawn_at__isnull=False).exclude(pk=row.pk)
              .values_list("note", flat=True))
    still_open = any(gone_after_settling(n) for n in others) or BALANCE_SUBJECT in order.chain_alert
    counts = ("it counts for the order again" if row.confirmations >= required
              else "it counts for the order again once it has them all")
    chain_alert_resolved(order=order, subject=subject, actor=actor, now=now, still_open=still_open,
                         text=f"Transfer {subject} is on chain again, with {row.confirmations} confirmation(s) of "
                              f"the {required} required: {counts}.")


def _typed_by_hand(order: Order, asset, seen: SeenTransfer) -> Transfer | None:
    """An operator's record of the same transaction for this order under another index: the same money,
    perhaps, typed with the wrong index. Not credited twice: left to the operator, and said once."""
    typed = (Transfer.objects.filter(order=order, chain=asset.network, txid=seen.txid, source=Transfer.Source.OPERATOR,
                                     withdrawn_at__isnull=True).exclude(index=seen.index).first())
    if typed is not None and f"watcher_index {seen.index}" not in typed.note:
        log.warning("transfer %s: an operator recorded it at index %s, the chain has it at %s", seen.txid,
                    typed.index, seen.index)
        audit_record(actor=WATCHER, action="transfer_index_conflict", obj=order,
                     reason="the watcher found this transaction at another index than the operator's record; "
                            "the operator's record stands until corrected",
                     data={"txid": seen.txid, "recorded_index": typed.index, "found_index": seen.index,
                           "found_amount": str(seen.amount)})
        typed.note = (typed.note + "\n" if typed.note else "") + f"watcher_index {seen.index}: the chain has it there"
        typed.save(update_fields=["note"])
    return typed


def _create(order: Order, seen: SeenTransfer, confirmations: int, actor: str, now: datetime) -> Transfer | None:
    asset = order.quote.asset
    block = seen.block
    # The block's time says when the money moved; a clock running ahead of ours never dates it in the future.
    seen_at = min(block.time, now) if block is not None and block.time is not None else now
    try:
        with transaction.atomic():
            row = Transfer.objects.create(
                order=order, asset=asset, chain=asset.network, txid=seen.txid, index=seen.index, amount=seen.amount,
                confirmations=confirmations, seen_at=seen_at, sender=seen.sender, source=Transfer.Source.WATCHER,
                recorded_by=actor, block_number=block.number if block else None, block_hash=block.hash if block else "")
    except IntegrityError:  # another worker recorded it a moment ago
        return None
    audit_record(actor=actor, action="transfer_record", obj=order,
                 data={"txid": seen.txid, "index": seen.index, "amount": str(seen.amount),
                       "confirmations": confirmations, "seen_at": seen_at.isoformat(), "source": "watcher",
                       "block": block.number if block else None, "block_hash": block.hash if block else ""})
    return row


def _refresh(order: Order, row: Transfer, seen: SeenTransfer, confirmations: int, actor: str) -> bool | None:
    """Bring ``row`` up to what the chain says now. None: nothing changed; False: only its confirmations
    grew, without reaching the required number; True: a change the evaluation must see."""
    changes: dict = {}
    if row.withdrawn_at is not None:
        row.withdrawn_at = None
        changes["restored"] = True
    block = seen.block
    if block is not None and (row.block_hash != block.hash or row.block_number != block.number):
        changes["block"] = {"from": [row.block_number, row.block_hash], "to": [block.number, block.hash]}
        if row.withdrawn_at is None and row.confirmations >= order.quote.confirmations_required:
            # Counted by the order, now elsewhere: if it goes from there, that is money the order had counted.
            _note_line(row, f"{MOVED}: had {row.confirmations} confirmations in block {row.block_number} "
                            f"{row.block_hash}; now in block {block.number} {block.hash}")
        row.block_number, row.block_hash = block.number, block.hash
    if block is None and row.block_hash and not changes:
        return None  # a mined transfer is not moved back to the mempool by a stale answer
    # Confirmations only fall when the transfer moved to another block (or came back).
    if confirmations > row.confirmations or (changes and confirmations != row.confirmations):
        changes["confirmations"] = {"from": row.confirmations, "to": confirmations}
        row.confirmations = confirmations
    if seen.amount != row.amount and "amount_differs" not in row.note:
        # The operator typed another amount than the chain holds: left to them, but said.
        log.warning("transfer %s: recorded %s, the chain says %s", row, row.amount, seen.amount)
        audit_record(actor=actor, action="transfer_amount_differs", obj=order,
                     data={"transfer": str(row), "recorded": str(row.amount), "on_chain": str(seen.amount)})
        row.note = (row.note + "\n" if row.note else "") + f"amount_differs: the chain says {seen.amount}"
        row.save(update_fields=["note"])
    if not changes:
        return None
    row.save(update_fields=["withdrawn_at", "block_number", "block_hash", "confirmations", "note"])
    required = order.quote.confirmations_required
    counted = (
        changes.get("confirmations", {}).get("to", 0) >= required > changes.get("confirmations", {}).get("from", 0)
    )
    if set(changes) - {"confirmations"} or counted:
        # Each new block is not worth an audit row; a moved block, a return, or the confirmation that
        # makes the transfer count are.
        audit_record(actor=actor, action="transfer_update", obj=order, data={"transfer": str(row), **changes})
        return True
    return False


def transfer_withdraw(*, transfer: Transfer, reason: str, expected: tuple[int | None, str] | None = None,
                      actor: str = WATCHER, now: datetime | None = None) -> Transfer:
    """The transfer is in no block of the chain any more: it stops counting
    (it comes back through ``transfer_observe`` if it is mined again).
    ``expected``: the (height, hash) judged replaced; if another writer has
    moved the row since, nothing is done."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(transfer.order_id)
        row = Transfer.objects.select_for_update().get(pk=transfer.pk)
        if row.order_id != locked.pk:
            return row  # reassigned to another order since it was read: the next poll judges it there
        if row.withdrawn_at is not None:
            return row
        if expected is not None and (row.block_number, row.block_hash) != expected:
            return row
        before = (row.block_number, row.block_hash, row.confirmations)
        settled = before[2] >= locked.quote.confirmations_required or f"{MOVED}:" in row.note
        row.withdrawn_at, row.confirmations = now, 0
        if settled:
            _note_line(row, f"{GONE}: {now.isoformat()} from block {before[0]} {before[1]}: {reason}")
        row.save(update_fields=["withdrawn_at", "confirmations", "note"])
        audit_record(actor=actor, action="transfer_withdrawn", obj=locked, reason=reason,
                     data={"transfer": str(row), "block": before[0], "block_hash": before[1],
                           "confirmations_before": before[2], "had_settled": settled})
        log.warning("transfer %s withdrawn from order %s: %s", row, locked.reference, reason)
        payment_apply(locked, actor=actor, now=now)
        if settled:
            subject = f"{row} in block {before[0]} ({before[1]})"
            times = row.note.count(f"{GONE}:")
            if times > 1:  # back in the same block since, and gone again: news, not the same finding
                subject += f" (taken away {times} times)"
            chain_alert_raise(order=locked, subject=subject, actor=actor, now=now,
                              data={"transfer": str(row), "amount": str(row.amount), "block": before[0],
                                    "block_hash": before[1], "confirmations_before": before[2]},
                              text=f"Transfer {subject}, {row.amount} base units credited to this order with "
                                   f"{before[2]} confirmation(s), is no longer on chain: {reason}.")
    return row
