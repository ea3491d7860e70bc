"""Transfers an operator records, and moves, by hand (DESIGN §5–6: one transfer credits one order once).

* Where the asset is watched on chain, the operator names the transaction and the transfer is read from the
  chain (``transfer_record_from_chain``): amount, recipient, token contract and confirmations come from the
  node, never from a keyboard, and the watcher then follows its confirmations like any it found itself.
* Where it is not watched (``transfer_record``), the operator types what the explorer shows. One transaction
  id then credits one order, once: a second record of the same id, for any order and at any index, is refused
  unless the operator states which output pays which order (``TransferInput.shared_statement``), which is
  kept on the row and written to the audit log.
* ``transfer_reassign`` moves a recorded transfer to the order it was meant for (one customer paid another's
  quote), when the order it sits on does not keep it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _l

from anchorgpu.audit.services import audit_record
from anchorgpu.chains.base import ChainUnavailable, LookupOutcome
from anchorgpu.chains.keys import watch_key
from anchorgpu.i18n import message
from anchorgpu.orders.errors import InvalidOrder, NotAllowedNow
from anchorgpu.orders.models import Order
from anchorgpu.orders.states import OrderState
from anchorgpu.orders.transitions import order_lock, order_transition

from .models import Asset, Transfer
from .services import KEEPS_PAYMENT, need_reason, owed_back, payment_apply, payment_status, release_booking
from .txids import TxIdError, normalise_txid
from .watch_config import watch_url, watcher_for

S = OrderState
# Bitcoin block times may run up to two hours ahead of the clock.
SEEN_AT_SLACK = timedelta(hours=2)


@dataclass(frozen=True)
class TransferInput:
    txid: str
    index: int
    amount: int
    confirmations: int
    seen_at: datetime
    sender: str = ""
    note: str = ""
    # Only when this one transaction pays several orders: which output pays which order, as the explorer shows.
    shared_statement: str = ""


def is_watched(asset: Asset) -> bool:
    """Whether a node or explorer is configured for ``asset``: its transfers are then read from the chain."""
    return bool(watch_url(asset))


def _txid(asset: Asset, txid: str) -> str:
    try:
        return normalise_txid(txid, chain=asset.chain)
    except TxIdError as exc:
        raise InvalidOrder(message(exc), code="bad_txid") from None


def _take_turn_on(asset: Asset, txid: str) -> None:
    """Records of one transaction id take turns, so two operators typing it for two orders at once cannot both
    find it unrecorded. SQLite's writers already take turns (IMMEDIATE transactions); PostgreSQL locks the id
    until the transaction ends."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                           [f"transfer:{asset.network}:{txid}"])


def _refuse_second_credit(order: Order, asset: Asset, txid: str, statement: str) -> None:
    """One transaction id credits one order, once, unless the operator states the outputs."""
    _take_turn_on(asset, txid)
    recorded = Transfer.objects.filter(chain=asset.network, txid=txid).select_related("order")
    if statement or not recorded.exists():
        return
    refs = sorted({row.order.reference for row in recorded})
    raise NotAllowedNow(
        _("Transaction %(txid)s is already credited to %(orders)s. One transaction pays one order once. Only if "
          "this transaction really pays several of our deposit addresses, fill in the statement: which output "
          "pays which order, as the block explorer shows it; it is recorded with your name.")
        % {"txid": txid[:18] + "…", "orders": ", ".join(refs)}, code="txid_already_credited")


def transfer_record(*, order: Order, transfer: TransferInput, actor: str, source: str = Transfer.Source.OPERATOR,
                    now: datetime | None = None) -> Transfer:
    """Record one transfer to the order's deposit address, as typed by an operator for an asset that is not
    watched on chain, and re-evaluate the order."""
    now = now or timezone.now()
    if transfer.amount <= 0:
        raise InvalidOrder(_("The amount must be a positive whole number of base units."), code="bad_amount")
    if transfer.seen_at > now + SEEN_AT_SLACK:
        raise InvalidOrder(_("A transfer cannot have been seen in the future."), code="bad_time")
    statement = transfer.shared_statement.strip()
    with transaction.atomic():
        locked = order_lock(order)
        asset: Asset = locked.quote.asset
        if source == Transfer.Source.OPERATOR and is_watched(asset):
            raise NotAllowedNow(_("%(asset)s is watched on chain: give the transaction id only, and the transfer is "
                                  "read from the chain.") % {"asset": asset.symbol}, code="watched_asset")
        txid = _txid(asset, transfer.txid)
        _refuse_second_credit(locked, asset, txid, statement)
        try:
            with transaction.atomic():
                row = Transfer.objects.create(
                    order=locked, asset=asset, chain=asset.network, txid=txid, index=transfer.index,
                    amount=transfer.amount, confirmations=transfer.confirmations, seen_at=transfer.seen_at,
                    sender=transfer.sender.strip(), source=source, recorded_by=actor, note=transfer.note,
                    shared_statement=statement)
        except IntegrityError:  # recorded by someone else a moment ago
            raise NotAllowedNow(_("This transfer is already recorded; one transfer credits one order once."),
                                code="duplicate_transfer") from None
        data = {"txid": txid, "index": transfer.index, "amount": str(transfer.amount),
                "confirmations": transfer.confirmations, "seen_at": transfer.seen_at.isoformat(), "source": source}
        if statement:
            data["shared_statement"] = statement
        audit_record(actor=actor, action="transfer_record", obj=locked, data=data)
        payment_apply(locked, actor=actor, now=now)
    return row


_LOOKUP_REFUSALS = {
    LookupOutcome.NOT_FOUND: _l("The node does not know this transaction on %(network)s."),
    LookupOutcome.PENDING: _l("The transaction is not in a block yet; record it once it is mined (the watcher "
                             "may find it by itself first)."),
    LookupOutcome.FAILED: _l("The transaction failed on chain: nothing was paid."),
    LookupOutcome.OTHER_ADDRESS: _l("The transaction pays none of this order's deposit address."),
    LookupOutcome.WRONG_ASSET: _l("The transaction pays this order's address in another coin or token than "
                                 "%(asset)s."),
    LookupOutcome.BAD_DATA: _l("The node's data for this transaction does not match its id; nothing was recorded."),
}


def transfer_record_from_chain(*, order: Order, txid: str, actor: str, note: str = "", watcher=None,
                               now: datetime | None = None) -> list[Transfer]:
    """Read transaction ``txid`` from the chain and record what it pays this order's deposit address, in the
    accepted asset. The chain is read before any row is locked (network work never runs under a lock)."""
    from .observe import transfer_observe  # observe builds on the payment services

    quote = order.quote
    asset = quote.asset
    txid = _txid(asset, txid)
    try:
        watcher = watcher or watcher_for(asset, timeout=settings.ANCHORGPU_WATCH_CLAIM_TIMEOUT)
        if watcher is None:
            raise NotAllowedNow(_("%(asset)s is not watched on chain; record the transfer as the explorer shows "
                                  "it.") % {"asset": asset.symbol}, code="not_watched")
        found = watcher.lookup(txid, watch_key(quote.address))
    except ChainUnavailable as exc:
        raise NotAllowedNow(_("The node for %(asset)s could not be read (%(error)s); nothing was recorded. Try "
                              "again in a moment.") % {"asset": asset.symbol, "error": exc}, code="chain_unavailable"
                            ) from None
    if found.outcome is not LookupOutcome.FOUND:
        raise NotAllowedNow(_LOOKUP_REFUSALS[found.outcome] % {"network": asset.network_name, "asset": asset.symbol},
                            code=f"chain_{found.outcome.value}")
    # The chain shows which outputs pay this order's address: only those must not credit another order already
    # (one transaction may pay several of our addresses, each output its own order).
    taken = (Transfer.objects.filter(chain=asset.network, txid=txid, index__in=[s.index for s in found.transfers])
             .exclude(order=order).select_related("order").first())
    if taken is not None:
        raise NotAllowedNow(_("What this transaction pays this order's address already credits order %(ref)s; one "
                              "transfer credits one order once. If it was meant for this order, reassign it from "
                              "that order's page.") % {"ref": taken.order.reference}, code="txid_already_credited")
    known = set(Transfer.objects.filter(chain=asset.network, txid=txid, order=order).values_list("index", flat=True))
    if {seen.index for seen in found.transfers} <= known:
        raise NotAllowedNow(_("This transaction is already recorded for this order; the watcher follows its "
                              "confirmations."), code="duplicate_transfer")
    rows = []
    with transaction.atomic():
        for seen in found.transfers:
            row = transfer_observe(order=order, seen=seen, tip=found.tip or 0, actor=actor, now=now)
            if row is not None:
                rows.append(row)
        if not rows:  # the operator's own earlier record under another index stands (see observe._typed_by_hand)
            raise NotAllowedNow(_("This transaction is already recorded for this order under another index; "
                                  "correct that record instead."), code="duplicate_transfer")
        audit_record(actor=actor, action="transfer_read_from_chain", obj=order, reason=note.strip(),
                     data={"txid": txid, "outputs": [{"index": s.index, "amount": str(s.amount)}
                                                     for s in found.transfers], "tip": found.tip})
    return rows


def transfer_confirmations_update(*, transfer: Transfer, confirmations: int, actor: str,
                                  now: datetime | None = None) -> Transfer:
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(transfer.order_id)
        row = Transfer.objects.select_for_update().get(pk=transfer.pk)
        if row.order_id != locked.pk:
            raise NotAllowedNow(_("This transfer was moved to another order a moment ago; open that order."),
                                code="moved")
        if row.source == Transfer.Source.WATCHER:
            raise NotAllowedNow(_("The chain watcher follows this transfer's confirmations itself."),
                                code="watched_transfer")
        if confirmations < row.confirmations:
            raise InvalidOrder(_("Confirmations only grow; a transfer that lost them was reorganised away and "
                                 "needs an operator's decision."), code="confirmations_fell")
        row.confirmations = confirmations
        row.save(update_fields=["confirmations"])
        audit_record(actor=actor, action="transfer_confirmations", obj=locked,
                     data={"transfer": str(row), "confirmations": confirmations})
        payment_apply(locked, actor=actor, now=now)
    return row


# States whose order never keeps the money it received: it may be moved to another order.
_KEEPS_NOTHING = (S.AWAITING_PAYMENT, S.PAYMENT_CLAIMED, S.UNDERPAID, S.EXPIRED, S.CANCELLED, S.PAID_LATE)


def _check_reassign(source: Order, target: Order, row: Transfer) -> None:
    if target.pk == source.pk:
        raise InvalidOrder(_("The transfer is already recorded for this order."), code="same_order")
    target_quote = getattr(target, "quote", None)
    if target_quote is None or target_quote.asset_id != row.asset_id:
        raise InvalidOrder(_("Order %(ref)s is not paid in %(asset)s; a transfer only moves to an order quoted in "
                             "the same asset on the same network.") % {"ref": target.reference,
                                                                        "asset": row.asset.symbol},
                           code="other_asset")
    if source.refunds.exists():
        raise NotAllowedNow(_("Money was already refunded from order %(ref)s; its transfers stay where they are.")
                            % {"ref": source.reference}, code="refunded")
    state = source.order_state
    if state in KEEPS_PAYMENT and owed_back(source) < int(row.amount):
        raise NotAllowedNow(_("Order %(ref)s is %(state)s and counts this transfer towards its payment; it can only "
                              "give away money it does not keep.") % {"ref": source.reference,
                                                                       "state": source.state_label},
                            code="kept_by_order")
    if state not in KEEPS_PAYMENT and state not in _KEEPS_NOTHING:
        raise NotAllowedNow(_("Order %(ref)s is %(state)s; its transfers cannot be moved.")
                            % {"ref": source.reference, "state": source.state_label}, code="not_movable")


def _settle_source(source: Order, *, actor: str, now: datetime) -> None:
    """The order the transfer left: with nothing received any more, it waits again (or has expired)."""
    if payment_status(source).confirmed_total > 0 or source.transfers.filter(withdrawn_at__isnull=True).exists():
        payment_apply(source, actor=actor, now=now)
        return
    state = source.order_state
    if state in (S.UNDERPAID, S.PAID_LATE):
        running = state is S.UNDERPAID and source.quote.expires_at > now
        order_transition(order=source, to=S.AWAITING_PAYMENT if running else S.EXPIRED, actor=actor,
                         reason="its only transfer was reassigned to the order it was meant for")
        if not running:
            release_booking(source, actor=actor, reason="quote expired; its transfer went to another order")
    payment_apply(source, actor=actor, now=now)


def transfer_reassign(*, transfer: Transfer, to_order: Order, actor: str, reason: str,
                      now: datetime | None = None) -> Transfer:
    """Move a recorded transfer to the order it was meant for (one customer paid another's quote). Both orders
    are locked (in a fixed order, so two operators cannot deadlock), both are evaluated again, and both
    audit trails say who moved what, from where, to where, and why."""
    reason = need_reason(reason)
    now = now or timezone.now()
    with transaction.atomic():
        seen = transfer.order_id  # the order the operator saw it on
        locked = {pk: order_lock(pk) for pk in sorted({seen, to_order.pk})}  # orders first, in a fixed order
        row = Transfer.objects.select_for_update().select_related("asset").get(pk=transfer.pk)
        if row.order_id != seen:  # another operator moved it since
            raise NotAllowedNow(_("This transfer was moved to another order a moment ago; look again."),
                                code="moved")
        source, target = locked[row.order_id], locked[to_order.pk]
        _check_reassign(source, target, row)
        paid_to = row.paid_to or source.quote.address
        row.order, row.paid_to = target, paid_to
        row.save(update_fields=["order", "paid_to"])
        data = {"transfer": str(row), "amount": str(row.amount), "from": source.reference, "to": target.reference,
                "paid_to": paid_to}
        for order in (source, target):
            audit_record(actor=actor, action="transfer_reassign", obj=order, reason=reason, data=data)
        _settle_source(source, actor=actor, now=now)
        payment_apply(target, actor=actor, now=now)
    return row
