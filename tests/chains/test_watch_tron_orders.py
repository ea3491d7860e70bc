"""USDT on TRON end to end: orders placed through the real checkout service, deposit addresses derived from a
TRON account xpub, the watcher built by ``watcher_for`` from the asset (the shape server's URL), and the
payment services deciding. A payment counts from the solidified block."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from anchorgpu.chains.keys import watch_key
from anchorgpu.chains.tron import NILE_CHAIN_ID
from anchorgpu.chains.tron_address import to_base58
from anchorgpu.orders.errors import InvalidOrder
from anchorgpu.payments.claim_check import claim_check, claims_recheck_due, describe
from anchorgpu.payments.models import Asset, ClaimCheck, DepositKey, Rate, Transfer, WatchState
from anchorgpu.payments.services import payment_claim, refund_address_set
from anchorgpu.payments.watch import watch_poll
from anchorgpu.payments.watch_config import watcher_for
from tests import shop
from tests.chains import tron_support
from tests.chains.tron_support import OTHER, OTHER_HEX, PAYER, USDT, USDT_HEX
from tests.chains.watch_support import fresh

pytestmark = pytest.mark.django_db
tron_node = tron_support.tron_node

# bip_utils' own BIP44 test vectors for TRON (ebellocchia/bip_utils, tests/bip/bip44/test_bip44.py at
# d15c75ddd74e4838c396a0d036ef6faf11b06a4b): the account-level xpub of m/44'/195'/0' of the BIP39 mnemonic
# "abandon ×11 about", and its first receive address. A public key: test use only.
TRON_XPUB = ("xpub6D1AabNHCupeiLM65ZR9UStMhJ1vCpyV4XbZdyhMZBiJXALQtmn9p42VTQckoHVn8WNqS7dqnJokZHAHcHGoaQgmv8D45o"
             "NUKx6DZMNZBCd")
FIRST_ADDRESS = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"


class TronShop:
    def __init__(self, node):
        self.node = node
        self.chain = node.chain
        shop.load_shop()
        # The demo has the same key and a USDT-on-TRON asset: the test pins each field it relies on.
        DepositKey.objects.update_or_create(scheme="tron", defaults=dict(
            extended_public_key=TRON_XPUB, label="bip_utils TRON test vector"))
        self.asset, _ = Asset.objects.update_or_create(code="usdt-tron", defaults=dict(
            symbol="USDT", name="Tether USD", network="tron", network_name="TRON (TRC-20)",
            scheme="tron", decimals=6, quote_decimals=2, contract=USDT, confirmations_required=1,
            finality="finalized", tolerance_bps=10, watch_url=node.url, position=9, is_active=True))
        Rate.objects.create(asset=self.asset, currency="USD", price=Decimal("1.00"),
                            observed_at=timezone.now() - timedelta(seconds=1), source="test", entered_by="test")
        self.customer = shop.customer()

    def place(self):
        return shop.place(self.customer, asset="usdt-tron")

    def watcher(self, asset=None):
        return watcher_for(asset or Asset.objects.get(code="usdt-tron"))

    def poll(self):
        asset = Asset.objects.get(code="usdt-tron")
        return watch_poll(asset, watcher=self.watcher(asset))

    def pay(self, order, amount, *, contract=USDT_HEX):
        return self.chain.transfer(contract, PAYER, watch_key(order.quote.address), amount)


@pytest.fixture
def tron(tron_node):
    return TronShop(tron_node)


def test_a_payment_counts_once_its_block_is_solidified(tron):
    order = tron.place()
    quote = order.quote
    assert quote.address == FIRST_ADDRESS  # index 0 of the published vector
    tx = tron.pay(order, quote.amount)
    block = tron.chain.mine(tx)
    tron.chain.mine_empty(5)
    tron.chain.solidify(block.number - 1)
    report = tron.poll()
    assert report.ok and report.found == 1
    row = Transfer.objects.get(order=order)
    assert (row.txid, row.amount, row.confirmations) == (tx.txid, quote.amount, 0)
    assert row.block_hash == block.hash and row.block_number == block.number
    assert fresh(order).state == "awaiting_payment"  # in a block, not solidified: not yet

    tron.chain.solidify(block.number)
    tron.chain.mine_empty(1)
    report = tron.poll()
    assert report.ok
    order = fresh(order)
    assert order.state == "paid" and order.invoice.crypto_amount == quote.amount
    assert Transfer.objects.get(order=order).confirmations == 1
    assert Transfer.objects.count() == 1
    state = WatchState.objects.get(asset__code="usdt-tron")
    assert state.tip == tron.chain.tip and state.errors_in_row == 0
    assert "pending" not in tron.node.rpc.methods_seen and "eth_getBalance" not in tron.node.rpc.methods_seen


def test_a_short_payment_leaves_the_order_underpaid(tron):
    order = tron.place()
    short = order.quote.amount - order.quote.tolerance - 1
    tron.chain.mine(tron.pay(order, short))
    tron.chain.solidify()
    tron.poll()
    assert fresh(order).state == "underpaid"
    assert Transfer.objects.get(order=order).amount == short


def test_another_trc20_token_pays_nothing_and_its_txid_is_the_wrong_asset(tron):
    order = tron.place()
    other = tron.pay(order, order.quote.amount, contract=OTHER_HEX)
    tron.chain.mine(other)
    tron.chain.solidify()
    report = tron.poll()
    assert report.ok and report.found == 0
    assert fresh(order).state == "awaiting_payment" and not Transfer.objects.exists()

    order = payment_claim(order=order, actor=order.user.username, txid=other.txid[2:])
    check = claim_check(order=order, watcher=tron.watcher())
    assert check.outcome == ClaimCheck.Outcome.WRONG_ASSET and check.detail == {"contract": OTHER_HEX, "sent": ""}
    assert f"from contract {OTHER}, which is not the USDT we accept" in describe(check, tron.asset)  # as TRONSCAN
    # the other token is one the shop knows on TRON too (stored as T…): the check names it
    Asset.objects.create(code="usdx-tron", symbol="USDX", name="Other token", network="tron",
                         network_name="TRON (TRC-20)", scheme="tron", decimals=6, contract=OTHER, is_active=False)
    order = payment_claim(order=order, actor=order.user.username, txid=other.txid[2:])
    check = claim_check(order=order, watcher=tron.watcher())
    assert check.outcome == ClaimCheck.Outcome.WRONG_ASSET
    assert check.detail == {"contract": OTHER_HEX, "sent": "USDX"}
    assert not Transfer.objects.exists()


def test_a_reorganisation_above_the_solidified_block_withdraws_the_transfer_until_it_is_mined_again(tron):
    order = tron.place()
    tron.chain.mine_empty(3)
    tron.chain.solidify()
    solid = tron.chain.tip
    tx = tron.pay(order, order.quote.amount)
    block = tron.chain.mine(tx)
    tron.chain.mine_empty(2)
    tron.poll()
    row = Transfer.objects.get(order=order)
    assert row.block_hash == block.hash and row.confirmations == 0 and row.withdrawn_at is None

    dropped = tron.chain.reorg(block.number)  # the block and the two after it are replaced
    assert tron.chain.solidified == solid
    tron.chain.mine_empty(3)
    tron.poll()
    row.refresh_from_db()
    assert row.withdrawn_at is not None  # its block is gone: withdrawn, not credited
    assert fresh(order).state == "awaiting_payment"

    again = tron.chain.mine(*dropped)  # the same transaction, in a later block
    tron.chain.solidify()
    tron.chain.mine_empty(1)
    tron.poll()
    order = fresh(order)
    assert order.state == "paid" and order.invoice.crypto_amount == order.quote.amount
    live = Transfer.objects.filter(order=order, withdrawn_at__isnull=True)
    assert [(t.pk, t.txid, t.block_hash) for t in live] == [(row.pk, tx.txid, again.hash)]  # the same row, back
    assert Transfer.objects.filter(order=order).count() == 1
    tron.poll()
    assert Transfer.objects.filter(order=order, withdrawn_at__isnull=True).count() == 1


def test_a_pasted_tronscan_txid_is_found_and_credited_once(tron):
    order = tron.place()
    tx = tron.pay(order, order.quote.amount)
    tron.chain.mine(tx)
    tron.chain.mine_empty(2)
    bare = tx.txid[2:].upper()  # TRONSCAN shows 64 hex digits without 0x
    order = payment_claim(order=order, actor=order.user.username, txid=bare)
    check = claim_check(order=order, watcher=tron.watcher())
    assert check.outcome == ClaimCheck.Outcome.FOUND and check.confirmations == 0
    assert Transfer.objects.get(order=order).txid == tx.txid
    assert fresh(order).state == "payment_claimed"

    tron.chain.solidify()
    assert claims_recheck_due(every=timedelta(0), factory=lambda asset: tron.watcher(asset)) == 1
    tron.poll()  # the watcher sees the same transfer: still one
    order = fresh(order)
    assert order.state == "paid"
    assert Transfer.objects.filter(order=order).count() == 1


def test_a_node_on_another_tron_network_fails_the_poll_and_decides_nothing(tron):
    order = tron.place()
    tron.chain.mine(tron.pay(order, order.quote.amount))
    tron.chain.solidify()
    tron.chain.chain_id = NILE_CHAIN_ID  # the URL points at a Nile node; the asset is mainnet USDT
    report = tron.poll()
    assert not report.ok
    assert f"chain id {NILE_CHAIN_ID}" in report.error and "configured for" in report.error
    assert not Transfer.objects.exists() and fresh(order).state == "awaiting_payment"
    assert WatchState.objects.get(asset__code="usdt-tron").errors_in_row == 1


def test_watcher_for_refuses_a_safe_rule_on_tron(tron):
    from anchorgpu.chains.base import ChainUnavailable

    Asset.objects.filter(code="usdt-tron").update(finality="safe")
    with pytest.raises(ChainUnavailable, match="no 'safe' block"):
        tron.watcher()


def test_a_log_whose_receipt_the_node_lacks_fails_the_poll_and_is_read_again(tron):
    order = tron.place()
    tx = tron.pay(order, order.quote.amount)
    block = tron.chain.mine(tx)
    tron.chain.solidify(block.number)
    tron.chain.mine_empty(1)
    tron.node.rpc.lagging_receipts.add(tx.txid)
    report = tron.poll()
    assert not report.ok and f"no receipt for transaction {tx.txid}" in report.error
    assert not Transfer.objects.exists() and fresh(order).state == "awaiting_payment"
    state = WatchState.objects.get(asset__code="usdt-tron")
    assert state.next_block is None or state.next_block <= block.number  # its block is read again

    tron.node.rpc.lagging_receipts.clear()
    assert tron.poll().ok
    assert fresh(order).state == "paid" and Transfer.objects.filter(order=order).count() == 1


def test_a_refund_never_goes_to_the_tron_address_the_payment_came_from(tron):
    order = tron.place()
    tron.chain.mine(tron.pay(order, order.quote.amount))
    tron.chain.solidify()
    tron.chain.mine_empty(1)
    assert tron.poll().ok and fresh(order).state == "paid"
    assert Transfer.objects.get(order=order).sender == PAYER  # kept as the JSON-RPC wrote it (0x form)
    with pytest.raises(InvalidOrder, match="never sent back to the address a payment came from"):
        refund_address_set(order=fresh(order), actor="customer", address=to_base58(PAYER))
    refund_address_set(order=fresh(order), actor="customer", address=to_base58("0x" + "6c" * 20))
    assert fresh(order).refund_address == to_base58("0x" + "6c" * 20)


def test_the_solidified_block_moving_under_the_same_tip_makes_the_payment_count(tron):
    order = tron.place()
    block = tron.chain.mine(tron.pay(order, order.quote.amount))
    tron.chain.mine_empty(2)
    assert tron.poll().ok and fresh(order).state == "awaiting_payment"  # nothing solidified yet
    tip = tron.chain.tip
    tron.chain.solidify(block.number)  # the node solidifies it; no new block
    assert tron.chain.tip == tip
    assert tron.poll().ok
    assert fresh(order).state == "paid" and Transfer.objects.get(order=order).confirmations == 1
