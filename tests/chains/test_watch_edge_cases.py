"""Edge cases found in review: a token transfer mined again elsewhere, a node
that lost a receipt, a write that fails, a watch window that closed while the
worker was down, confirmations changed after quoting, an operator's record
under another index, a token contract with other decimals."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from eth_account import Account
from web3 import Web3

from anchorgpu.audit.models import AuditEntry
from anchorgpu.chains.base import ChainUnavailable
from anchorgpu.chains.evm import EvmWatcher
from anchorgpu.orders.errors import NotAllowedNow
from anchorgpu.payments.models import Asset, Quote, Transfer, WatchState
from anchorgpu.payments.transfers import transfer_record_from_chain
from anchorgpu.payments.watch import watch_poll
from tests import shop
from tests.chains import evm_support as evm
from tests.chains.watch_support import CONFIRMATIONS, ChainShop, fresh

pytestmark = pytest.mark.django_db
# anvil's second development account (the payer in ChainShop): its key is public, printed by anvil itself.
PAYER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"


@pytest.fixture
def chain(anvil_w3, anvil_url):
    shop_ = ChainShop(anvil_w3, url=anvil_url)
    assert Account.from_key(PAYER_KEY).address == shop_.payer
    return shop_


def signed_token_transfer(w3: Web3, token: str, to: str, amount: int, nonce: int) -> bytes:
    call = evm.token_contract(w3, token).functions.transfer(Web3.to_checksum_address(to), amount)
    tx = call.build_transaction({"from": Account.from_key(PAYER_KEY).address, "nonce": nonce, "gas": 100_000,
                                 "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 10**9, "chainId": w3.eth.chain_id})
    return Account.sign_transaction(tx, PAYER_KEY).raw_transaction


def test_a_token_transfer_mined_again_elsewhere_stays_one_transfer(chain, anvil_w3):
    order = chain.place("usdc-ethereum")
    other = chain.place("usdc-ethereum")
    nonce = anvil_w3.eth.get_transaction_count(chain.payer)
    raw = signed_token_transfer(anvil_w3, chain.token, order.quote.address, order.quote.amount, nonce + 1)
    snap = evm.snapshot(anvil_w3)
    chain.send(other, 1_000)  # nonce, then ours alone in the next block: log index 0 there
    txid = anvil_w3.eth.send_raw_transaction(raw).to_0x_hex()
    # anvil mines a sent transaction just after answering: wait for its receipt (a busy machine was seen
    # to ask before it was there)
    assert evm.wait(anvil_w3, txid)["logs"][0]["logIndex"] == 0
    watch_poll(chain.asset("usdc-ethereum"))
    assert Transfer.objects.filter(order=order).count() == 1

    evm.revert(anvil_w3, snap)  # the same two transactions, now mined together in one block
    anvil_w3.manager.request_blocking("evm_setAutomine", [False])
    try:
        evm.token_contract(anvil_w3, chain.token).functions.transfer(  # the other order's, first in the block
            Web3.to_checksum_address(other.quote.address), 1_000).transact({"from": chain.payer, "nonce": nonce})
        assert anvil_w3.eth.send_raw_transaction(raw).to_0x_hex() == txid
        anvil_w3.manager.request_blocking("evm_mine", [])
    finally:
        anvil_w3.manager.request_blocking("evm_setAutomine", [True])
    assert evm.wait(anvil_w3, txid)["logs"][0]["logIndex"] == 1  # the block-wide index moved
    chain.mine(CONFIRMATIONS)
    watch_poll(chain.asset("usdc-ethereum"))
    rows = list(Transfer.objects.filter(order=order))
    assert [(r.txid, r.index, r.amount) for r in rows] == [(txid, 0, order.quote.amount)]
    assert rows[0].block_number == anvil_w3.eth.get_transaction_receipt(txid)["blockNumber"]
    order = fresh(order)
    assert order.state == "paid" and not order.refund_due and order.invoice.crypto_amount == order.quote.amount


class LostReceipts(EvmWatcher):
    """A node behind a load balancer whose backend has not seen the receipts yet."""

    def locate(self, txids):
        return {txid: None for txid in txids}


def test_a_node_that_lost_a_receipt_takes_nothing_away(chain, anvil_w3):
    order = chain.place("eth")
    chain.send(order, order.quote.amount)
    watch_poll(chain.asset("eth"))
    chain.mine(1)
    asset = chain.asset("eth")
    forgetful = LostReceipts.for_web3(anvil_w3, chain_id=asset.chain_id, network=asset.network)
    report = watch_poll(asset, watcher=forgetful)
    assert report.ok and report.withdrawn == 0
    row = Transfer.objects.get(order=order)
    assert row.withdrawn_at is None and row.confirmations == 1  # not moved either way
    chain.mine(CONFIRMATIONS)
    watch_poll(chain.asset("eth"))
    assert fresh(order).state == "paid"


def test_a_write_that_fails_is_retried_from_its_block(chain, anvil_w3, monkeypatch):
    order = chain.place("eth")
    txid = chain.send(order, order.quote.amount)
    block = anvil_w3.eth.get_transaction_receipt(txid)["blockNumber"]
    chain.mine(CONFIRMATIONS)

    def broken(**kwargs):
        raise RuntimeError("database is locked")

    monkeypatch.setattr("anchorgpu.payments.watch.transfer_observe", broken)
    report = watch_poll(chain.asset("eth"))
    assert not report.ok and "database is locked" in report.error
    state = WatchState.objects.get(asset__code="eth")
    assert state.next_block == block and state.errors_in_row == 1
    monkeypatch.undo()
    report = watch_poll(chain.asset("eth"))
    assert report.ok and report.found == 1 and fresh(order).state == "paid"


def test_a_window_that_closed_while_the_worker_was_down_is_still_read(chain):
    order = chain.place("eth")
    watch_poll(chain.asset("eth"))  # the last poll before the worker stopped
    chain.send(order, order.quote.amount)  # paid inside the window…
    chain.mine(CONFIRMATIONS)
    closed = timezone.now() - timedelta(minutes=5)  # …which closed before the worker came back
    Quote.objects.filter(pk=order.quote.pk).update(expires_at=closed - timedelta(minutes=1), monitor_until=closed)
    report = watch_poll(chain.asset("eth"))
    assert report.found == 1 and Transfer.objects.filter(order=order).exists()


def test_a_quote_keeps_the_confirmations_it_was_made_with(chain):
    order = chain.place("eth")
    Asset.objects.filter(code="eth").update(confirmations_required=CONFIRMATIONS * 2)
    chain.send(order, order.quote.amount)
    watch_poll(chain.asset("eth"))
    chain.mine(CONFIRMATIONS - 1)
    watch_poll(chain.asset("eth"))
    assert fresh(order).state == "paid"  # at the quote's 3, not the asset's new 6


def test_an_operators_record_under_another_index_is_not_credited_twice(chain):
    order = chain.place("usdc-ethereum")
    txid = chain.send(order, order.quote.amount)
    url = chain.asset("usdc-ethereum").watch_url
    Asset.objects.filter(code="usdc-ethereum").update(watch_url="")  # typed by hand before the asset was watched,
    shop.pay(order, txid=txid, index=57, confirmations=1)  # with the block-wide index
    Asset.objects.filter(code="usdc-ethereum").update(watch_url=url)
    chain.mine(CONFIRMATIONS)
    watch_poll(chain.asset("usdc-ethereum"))
    assert list(Transfer.objects.filter(order=order).values_list("index", "source")) == [(57, "operator")]
    entry = AuditEntry.objects.get(object_id=str(order.pk), action="transfer_index_conflict")
    assert entry.data == {"txid": txid, "recorded_index": 57, "found_index": 0, "found_amount": str(order.quote.amount)}

    later = chain.place("usdc-ethereum")
    seen = chain.send(later, later.quote.amount)
    watch_poll(chain.asset("usdc-ethereum"))
    with pytest.raises(NotAllowedNow, match="watched on chain: give the transaction id only"):
        shop.pay(later, txid=seen, index=3)  # a watched asset's transfers are read from the chain, not typed
    with pytest.raises(NotAllowedNow, match="already recorded for this order"):
        transfer_record_from_chain(order=later, txid=seen, actor="operator", watcher=chain.watcher(later.quote.asset))
    assert Transfer.objects.filter(order=later).count() == 1


def test_a_token_contract_with_other_decimals_is_refused(chain, anvil_w3):
    eighteen = evm.deploy_token(anvil_w3, decimals=18)
    Asset.objects.filter(code="usdc-ethereum").update(contract=eighteen)
    chain.place("usdc-ethereum")
    report = watch_poll(chain.asset("usdc-ethereum"))
    assert not report.ok and "the token contract reports 18 decimals, the asset is configured with 6" in report.error
    asset = chain.asset("usdc-ethereum")
    with pytest.raises(ChainUnavailable, match="reports 18 decimals"):
        EvmWatcher.for_web3(anvil_w3, chain_id=asset.chain_id, contract=eighteen, decimals=6).head()
