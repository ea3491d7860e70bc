"""Money on the wrong EVM network: an order quoted USDT on Base, the customer sent USDT on Polygon.

Every EVM network derives deposit addresses from the same key and one index sequence, so an order's
address is its own on every EVM chain and the operator can move whatever arrives there. The watcher of
each EVM asset therefore also reads transfers of the same symbol to the addresses of open orders quoted
on *another* EVM network (``stray_quotes``). Such a transfer never pays the order: it is recorded once
(``StrayTransfer``, unique on network, txid and log position, so a reorganisation that mines it again
updates the row), the operators hear of it once (``order.wrong_asset``), and the order page says what
happened and what to do (``stray_sentences``).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils.translation import gettext as _

from anchorgpu.chains.base import SeenTransfer
from anchorgpu.chains.keys import watch_key
from anchorgpu.orders.models import OperatorEvent, Order
from anchorgpu.orders.operator_events import operator_event_raise
from anchorgpu.orders.transitions import order_lock

from .addresses import Scheme
from .models import Asset, Quote, StrayTransfer

log = logging.getLogger("anchorgpu.watch")


def stray_quotes(asset: Asset, since: datetime) -> dict[str, int]:
    """Open quotes of the same coin on the other EVM networks (none off EVM): watched address -> quote id.
    Only the two columns are read: a poll reads every other network's open quotes, and few ever get money."""
    if asset.scheme != Scheme.EVM:
        return {}
    rows = (Quote.objects.filter(asset__scheme=Scheme.EVM, asset__symbol=asset.symbol, monitor_until__gt=since)
            .exclude(asset__network=asset.network).values_list("address", "pk"))
    return {watch_key(address): pk for address, pk in rows}


def stray_record(*, asset: Asset, quote: int, seen: SeenTransfer, now: datetime) -> StrayTransfer | None:
    """Record ``seen`` (a transfer of ``asset``, on ``asset``'s network, to the address of the quote whose id is
    ``quote``) as money on the wrong network, and tell the operators once. Returns the row when it is new or
    changed, else None."""
    block = seen.block
    with transaction.atomic():
        quote = Quote.objects.select_related("asset").get(pk=quote)
        order = order_lock(quote.order_id)
        row, created = StrayTransfer.objects.get_or_create(
            network=asset.network, txid=seen.txid, index=seen.index,
            defaults=dict(order=order, asset=asset, amount=seen.amount, address=quote.address, sender=seen.sender,
                          block_number=block.number if block else None, block_hash=block.hash if block else "",
                          seen_at=(block.time if block and block.time else now)))
        if not created:
            # Seen again: a reorganisation may have mined it in another block. Nothing is ever credited.
            if block is None or ((row.block_number, row.block_hash) == (block.number, block.hash)
                                 and row.withdrawn_at is None):
                return None
            row.block_number, row.block_hash, row.withdrawn_at = block.number, block.hash, None
            row.save(update_fields=["block_number", "block_hash", "withdrawn_at"])
            return row
        quoted = quote.asset
        text = (f"{seen.amount} base units of {asset.symbol} arrived on {asset.network_name} (transaction "
                f"{seen.txid}, log {seen.index}) at the deposit address of this order, which quoted "
                f"{quoted.symbol} on {quoted.network_name}. It does not pay the order. The address is ours on "
                f"every EVM network: move the money and refund the customer, or settle it with them.")
        operator_event_raise(order=order, kind=OperatorEvent.Kind.WRONG_ASSET,
                             key=f"stray:{asset.network}:{seen.txid}:{seen.index}", text=text, now=now,
                             data={"txid": seen.txid, "index": seen.index, "network": asset.network,
                                   "asset": asset.code, "amount": str(seen.amount)})
    log.warning("watch %s: %s:%s pays order %s quoted on %s: recorded, not credited", asset.code, seen.txid,
                seen.index, order.reference, quoted.network)
    return row


def strays_unsettled(asset: Asset, counted: int) -> list[StrayTransfer]:
    """This network's recorded strays that a reorganisation can still take away: fewer than the asset's
    confirmations, counted from ``counted`` (the tip, or the finality-tagged block)."""
    lowest = counted - asset.confirmations_required + 1
    return list(StrayTransfer.objects.filter(network=asset.network, withdrawn_at__isnull=True,
                                             block_number__gt=lowest))


def stray_follow(row: StrayTransfer, *, block, now_there: str | None, now: datetime) -> bool:
    """Bring a not yet final stray up to date with where its transaction is now (``block``, None when in no
    block) and the hash the chain has at its recorded height (``now_there``). Withdrawn only when that block
    was really replaced; True when the row changed."""
    if block is not None:
        if (block.number, block.hash) == (row.block_number, row.block_hash):
            return False
        StrayTransfer.objects.filter(pk=row.pk).update(block_number=block.number, block_hash=block.hash)
        return True
    if now_there is None or now_there == row.block_hash:
        return False  # the node is behind, or lost the receipt: nothing is decided
    StrayTransfer.objects.filter(pk=row.pk, withdrawn_at__isnull=True).update(withdrawn_at=now)
    log.warning("stray %s: block %s was replaced and the transaction is in no block: withdrawn", row,
                row.block_number)
    return True


def stray_sentences(order: Order) -> list[str]:
    """What the order page tells the customer about money that arrived on another network, one sentence
    per transfer, in the active language."""
    from anchorgpu.formats.display import crypto

    quoted = order.quote.asset
    sentences = []
    for row in order.stray_transfers.filter(withdrawn_at__isnull=True).select_related("asset").order_by("seen_at",
                                                                                                          "id"):
        params = {"amount": crypto(row.amount, row.asset.decimals, row.asset.quoted_places),
                  "symbol": row.asset.symbol, "network": _(row.asset.network_name),
                  "quoted": _(quoted.network_name), "txid": row.txid}
        sentences.append(_("We received %(amount)s %(symbol)s on %(network)s (transaction %(txid)s), but this "
                           "order accepts %(symbol)s on %(quoted)s only, so it does not pay the order. The money "
                           "is safe with us: contact us and we will return it to an address of yours.") % params)
    return sentences


__all__ = ["stray_quotes", "stray_record", "strays_unsettled", "stray_follow", "stray_sentences"]
