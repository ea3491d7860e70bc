"""Checking the transaction id a customer gives with "I've paid".

The id is a hint, never proof: the transaction must exist on the asset's
network, pay this order's deposit address, in the accepted coin or token
contract, and not already credit another order. What it pays is recorded
through ``transfer_observe`` like anything the poll finds; the outcome is
kept (one row per order and id) so the order page can say precisely what
is wrong, or how many confirmations are still missing. A transaction in
another coin, token or network tells the operators at once (an
``order.wrong_asset`` event of ``orders.operator_events``, in the same
transaction as the check's row), once per transaction id and verdict.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from anchorgpu.chains.base import ChainUnavailable, LookupOutcome, TxLookup
from anchorgpu.chains.keys import watch_key
from anchorgpu.chains.tron_address import TronAddressError, to_base58
from anchorgpu.orders.models import OperatorEvent, Order
from anchorgpu.orders.operator_events import operator_event_raise
from anchorgpu.orders.states import OrderState

from .models import Asset, ClaimCheck, Transfer
from .observe import transfer_observe
from .watch_config import watcher_for

log = logging.getLogger("anchorgpu.watch")
Outcome = ClaimCheck.Outcome
_SIMPLE = {LookupOutcome.PENDING: Outcome.PENDING, LookupOutcome.NOT_FOUND: Outcome.NOT_FOUND,
           LookupOutcome.OTHER_ADDRESS: Outcome.OTHER_ADDRESS, LookupOutcome.WRONG_ASSET: Outcome.WRONG_ASSET,
           LookupOutcome.FAILED: Outcome.FAILED, LookupOutcome.BAD_DATA: Outcome.BAD_DATA}

# Verdicts that tell the operators at once (money may have arrived, just not as this order accepts it).
ALERTS_OPERATORS = frozenset({Outcome.WRONG_ASSET, Outcome.WRONG_NETWORK})


def claim_check(*, order: Order, watcher=None, timeout: float | None = None,
                now: datetime | None = None) -> ClaimCheck | None:
    """Look up ``order.claimed_txid`` now and record what it showed. None when the order names no id."""
    now = now or timezone.now()
    txid = order.claimed_txid
    if not txid:
        return None
    quote = order.quote
    asset = quote.asset
    outcome, confirmations, detail = Outcome.UNAVAILABLE, 0, {}
    try:
        watcher = watcher if watcher is not None else watcher_for(asset, timeout=timeout)
        if watcher is None:
            outcome = Outcome.NOT_WATCHED
        else:
            found = watcher.lookup(txid, watch_key(quote.address))
            outcome, confirmations, detail = _judge(order, asset, found, now)
            if outcome is Outcome.NOT_FOUND:
                elsewhere = _elsewhere(asset, txid, quote.address, timeout)
                if elsewhere:
                    outcome, detail = Outcome.WRONG_NETWORK, {"network": elsewhere}
    except ChainUnavailable as exc:
        log.warning("claim check of %s for %s: %s", txid, order.reference, exc)
        outcome, detail = Outcome.UNAVAILABLE, {}
    with transaction.atomic():  # the verdict and the operators' alert about it, together
        check, created = ClaimCheck.objects.get_or_create(
            order=order, txid=txid, defaults=dict(outcome=outcome, confirmations=confirmations,
                                                  required=quote.confirmations_required, detail=detail,
                                                  checked_at=now))
        if not created:
            check.outcome, check.confirmations, check.detail, check.checked_at = outcome, confirmations, detail, now
            check.required = quote.confirmations_required
            check.checks += 1
            check.save()
        if outcome in ALERTS_OPERATORS:
            with translation.override("en"):  # the operators' language
                text = _("The customer's transaction %(txid)s does not pay this order: %(verdict)s. Tell the "
                         "customer, and refund what arrived once they give an address.") % {
                    "txid": txid, "verdict": verdict(check, asset)}
            operator_event_raise(order=order, kind=OperatorEvent.Kind.WRONG_ASSET, key=f"{txid}:{outcome}",
                                 text=text, now=now, data={"txid": txid, "verdict": str(outcome),
                                                           "detail": dict(detail)})
    return check


def _judge(order: Order, asset: Asset, found: TxLookup, now: datetime) -> tuple[str, int, dict]:
    if found.outcome is not LookupOutcome.FOUND:
        return _SIMPLE[found.outcome], 0, _asset_detail(asset, found.detail)
    keys = {(t.txid, t.index) for t in found.transfers}
    taken = set(Transfer.objects.filter(chain=asset.network, txid=found.transfers[0].txid).exclude(order=order)
                .values_list("txid", "index"))
    if keys <= taken:
        return Outcome.ALREADY_CREDITED, 0, {}
    found = TxLookup(found.outcome, tip=found.tip, transfers=tuple(t for t in found.transfers if t.key not in taken))
    tip = found.tip or 0
    for seen in found.transfers:
        transfer_observe(order=order, seen=seen, tip=tip, now=now)
    confirmations = min(t.confirmations(tip) for t in found.transfers)
    amount = sum(t.amount for t in found.transfers)
    return Outcome.FOUND, confirmations, {"amount": str(amount)}


def _asset_detail(asset: Asset, detail: dict) -> dict:
    """Name what a wrong-asset transaction sent, when it is an asset we know."""
    if detail.get("native"):
        coin = Asset.objects.filter(network=asset.network, contract="").first()
        return {"sent": coin.symbol if coin else ""}
    contract = detail.get("contract")
    if contract:
        # Compared by watch key: a TRON asset's contract is stored as T…, the watcher reports its 0x-hex form.
        known = next((a for a in Asset.objects.filter(network=asset.network).exclude(contract="").order_by("position")
                      if watch_key(a.contract) == watch_key(contract)), None)
        return {"contract": contract, "sent": known.symbol if known else ""}
    return {}


# Transaction-id families whose ids look alike: a TRON id and an EVM hash are both 32 bytes of hex (normalised
# with "0x"), so one pasted on the wrong kind of order is looked up on the other family's networks too.
_LOOK_ALIKE = {"evm": frozenset({"evm", "tron"}), "tron": frozenset({"evm", "tron"})}


def _elsewhere(asset: Asset, txid: str, address: str, timeout: float | None) -> str:
    """The name of another configured network whose ids look like ``txid``'s and that knows it ("" when none
    does): the asset's own family, and for EVM and TRON each other's."""
    families = _LOOK_ALIKE.get(asset.chain, frozenset({asset.chain}))
    tried = {asset.network}
    for other in Asset.objects.filter(is_active=True).exclude(network=asset.network).order_by("position"):
        if other.chain not in families or other.network in tried:
            continue
        try:
            watcher = watcher_for(other, timeout=timeout)
            if watcher is None:
                continue  # this coin is not watched there; another coin of the same network may be
            known = watcher.lookup(txid, watch_key(address)).outcome is not LookupOutcome.NOT_FOUND
            tried.add(other.network)  # one answer per network is enough
            if known:
                return other.network_name
        except ChainUnavailable as exc:
            log.info("claim check: %s could not be asked: %s", other.code, exc)
    return ""


def claims_recheck_due(*, now: datetime | None = None, every: timedelta = timedelta(seconds=30),
                       limit: int = 50, factory=None) -> int:
    """The worker's sweep: look again at claimed ids whose check is not settled (not found yet, still
    confirming, node down). Orders that were paid meanwhile are left alone. ``factory(asset)`` makes the
    adapter (default: from the asset's configured URL)."""
    now = now or timezone.now()
    orders = (Order.objects.filter(state__in=[OrderState.PAYMENT_CLAIMED, OrderState.UNDERPAID])
              .exclude(claimed_txid="").filter(quote__monitor_until__gt=now)
              .select_related("quote__asset").order_by("claimed_at")[: limit * 4])
    done = 0
    for order in orders:
        latest = order.claim_checks.filter(txid=order.claimed_txid).first()
        if latest is not None and (latest.settled or latest.checked_at > now - every):
            continue
        try:
            claim_check(order=order, now=now, watcher=factory(order.quote.asset) if factory else None)
        except Exception:  # noqa: BLE001 - one order's failure must not stop the others' checks
            log.exception("claim recheck of order %s failed", order.reference)
        done += 1
        if done >= limit:
            break
    return done


def describe(check: ClaimCheck, asset: Asset) -> str:
    """The sentence the customer reads, in the active language."""
    other = check.detail.get("network", "")
    # Network names are the operator's data: said in the reader's language where the catalogs carry them.
    params = {"network": _(asset.network_name), "symbol": asset.symbol, "n": check.confirmations,
              "required": check.required, "other": _(other) if other else "",
              "contract": _shown_contract(asset, check.detail.get("contract", "")),
              "sent": check.detail.get("sent", "")}
    from anchorgpu.formats.display import crypto

    if check.outcome == Outcome.FOUND:  # exact, in the reader's language, at the asset's quoted precision
        params["amount"] = crypto(int(check.detail.get("amount", "0")), asset.decimals, asset.quoted_places)
        if check.confirmations >= check.required:
            return _("Transfer found: %(amount)s %(symbol)s, confirmed (%(n)d of %(required)d confirmations).") % params
        return _("Transfer found: %(amount)s %(symbol)s, %(n)d of %(required)d confirmations so far. It counts "
                 "once it has all of them.") % params
    if check.outcome == Outcome.WRONG_ASSET:
        if check.detail.get("contract") and not check.detail.get("sent"):
            return _("This transaction sends a token from contract %(contract)s, which is not the %(symbol)s we "
                     "accept. It does not pay this order; contact us about a refund.") % params
        return _("This transaction pays this order's address in %(sent)s, not in %(symbol)s. It does not pay this "
                 "order; contact us about a refund.") % params
    texts = {
        Outcome.PENDING: _("This transaction is known but not yet in a block (0 of %(required)d confirmations)."),
        Outcome.NOT_FOUND: _(
            "No transaction with this id is known on %(network)s. Check the id and the network you "
            "sent on; a transaction sent a moment ago can take a minute to appear."
        ),
        Outcome.WRONG_NETWORK: _(
            "This transaction is on %(other)s, not on %(network)s, which this order accepts. It does "
            "not pay this order; contact us about a refund."
        ),
        Outcome.OTHER_ADDRESS: _("This transaction does not pay this order's deposit address."),
        Outcome.FAILED: _("This transaction failed on chain (it was reverted): nothing was transferred."),
        Outcome.BAD_DATA: _(
            "The data we received for this transaction does not match its id, so it cannot be trusted. "
            "We check it again, and an operator looks at it."
        ),
        Outcome.ALREADY_CREDITED: _(
            "This transaction is already credited to another order: one transfer pays one order."
        ),
        Outcome.UNAVAILABLE: _(
            "We could not reach the %(network)s node just now; the check is repeated automatically."
        ),
        Outcome.NOT_WATCHED: _("Payments in %(symbol)s are checked by an operator; you hear from us when it is done."),
    }
    return texts[check.outcome] % params


def _shown_contract(asset: Asset, contract: str) -> str:
    """A contract as the customer's explorer shows it: TRON's in Base58Check (``T…``), others as read."""
    if contract and asset.chain == "tron":
        try:
            return to_base58(contract)
        except TronAddressError:
            return contract
    return contract


def verdict(check: ClaimCheck, asset: Asset) -> str:
    """The check's verdict in a few words, for the operators (the queue, the order's admin page, the alert)."""
    from anchorgpu.formats.display import crypto

    params = {"network": _(asset.network_name), "symbol": asset.symbol, "n": check.confirmations,
              "required": check.required, "other": _(other) if (other := check.detail.get("network", "")) else "?",
              "contract": _shown_contract(asset, check.detail.get("contract", "")),
              "sent": check.detail.get("sent", "")}
    if check.outcome == Outcome.FOUND:
        params["amount"] = crypto(int(check.detail.get("amount", "0")), asset.decimals, asset.quoted_places)
        return _("found: %(amount)s %(symbol)s, %(n)d of %(required)d confirmations") % params
    if check.outcome == Outcome.WRONG_ASSET:
        if params["sent"]:
            return _("wrong token: it sends %(sent)s, not %(symbol)s") % params
        if params["contract"]:
            return _("wrong token: contract %(contract)s is not %(symbol)s") % params
        return _("wrong token: not %(symbol)s") % params
    texts = {
        Outcome.PENDING: _("known, not yet in a block"),
        Outcome.NOT_FOUND: _("not found on %(network)s"),
        Outcome.WRONG_NETWORK: _("wrong network: on %(other)s, not %(network)s"),
        Outcome.OTHER_ADDRESS: _("pays another address, not this order's"),
        Outcome.FAILED: _("reverted on chain: nothing was transferred"),
        Outcome.BAD_DATA: _("the node's data does not match the id: not trusted"),
        Outcome.ALREADY_CREDITED: _("already credits another order"),
        Outcome.UNAVAILABLE: _("node unreachable: checked again automatically"),
        Outcome.NOT_WATCHED: _("not watched on chain: check it by hand"),
    }
    return texts[check.outcome] % params


def latest_claim_check(order: Order) -> ClaimCheck | None:
    """The check of the id the order names now (an earlier, replaced id's check is history)."""
    if not order.claimed_txid:
        return None
    return order.claim_checks.filter(txid=order.claimed_txid).first()


def claim_check_after_claim(order: Order) -> ClaimCheck | None:
    """ "I've paid" with an id: checked at once, with the short timeout a page request can afford."""
    try:
        return claim_check(order=order, timeout=settings.ANCHORGPU_WATCH_CLAIM_TIMEOUT)
    except Exception:  # noqa: BLE001 - the claim itself is saved; the worker checks again
        log.exception("claim check of order %s failed", order.reference)
        return None
