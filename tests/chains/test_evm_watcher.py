"""The EVM adapter on its own (no database): on anvil, a real node over
HTTP with batched JSON-RPC, and on the in-process eth-tester."""

from __future__ import annotations

import pytest
from web3 import Web3

from anchorgpu.chains.base import ChainUnavailable, LookupOutcome
from anchorgpu.chains.evm import EvmWatcher
from tests.chains import evm_support as evm

# Fresh receiving addresses no dev account owns.
PAYEES = ["0x" + f"{n:040x}" for n in range(0x1000, 0x1004)]


def watcher(w3: Web3, *, contract: str = "") -> EvmWatcher:
    return EvmWatcher.for_web3(w3, chain_id=w3.eth.chain_id, contract=contract, network="test")


def test_head_checks_the_chain_id(evm_w3):
    assert watcher(evm_w3).head().number == evm_w3.eth.block_number
    wrong = EvmWatcher.for_web3(evm_w3, chain_id=1, network="test")
    with pytest.raises(ChainUnavailable, match=r"chain id \d+, this asset is configured for 1"):
        wrong.head()


def test_native_scan_finds_value_transfers_to_watched_addresses_only(evm_w3):
    payer = evm_w3.eth.accounts[1]
    first = evm_w3.eth.block_number + 1
    paid = evm.send_eth(evm_w3, payer, PAYEES[0], 10**18)
    evm.send_eth(evm_w3, payer, PAYEES[2], 5)  # not watched
    again = evm.send_eth(evm_w3, payer, PAYEES[1], 7 * 10**17)
    w = watcher(evm_w3)
    tip = w.head().number
    seen = w.scan({PAYEES[0], PAYEES[1].upper().replace("0X", "0x")}, first, tip)
    assert [(t.txid, t.to, t.amount, t.index) for t in seen] == [(paid, PAYEES[0], 10**18, 0),
                                                                 (again, PAYEES[1], 7 * 10**17, 0)]
    assert seen[0].sender == payer.lower()
    block = evm_w3.eth.get_block(seen[0].block.number)
    assert seen[0].block.hash == block["hash"].to_0x_hex() and seen[0].block.time.timestamp() == block["timestamp"]
    assert seen[1].confirmations(tip) == 1 and seen[0].confirmations(tip) == 3


def test_token_scan_reads_the_configured_contract_only(evm_w3):
    owner, payer = evm_w3.eth.accounts[0], evm_w3.eth.accounts[1]
    usdc = evm.deploy_token(evm_w3, symbol="USDC")
    fake = evm.deploy_token(evm_w3, symbol="USDC")  # a look-alike: same event, other contract
    evm.mint(evm_w3, usdc, payer, 10**9)
    evm.mint(evm_w3, fake, payer, 10**9)
    first = evm_w3.eth.block_number + 1
    real = evm.token_transfer(evm_w3, usdc, payer, PAYEES[0], 25_000_000)
    evm.token_transfer(evm_w3, fake, payer, PAYEES[0], 99_000_000)
    evm.token_transfer(evm_w3, usdc, payer, PAYEES[0], 0)  # zero-value spam
    evm.send_eth(evm_w3, owner, PAYEES[0], 10**18)  # coin, not the token
    w = watcher(evm_w3, contract=usdc)
    seen = w.scan({PAYEES[0], PAYEES[1]}, first, w.head().number)
    assert [(t.txid, t.amount, t.sender) for t in seen] == [(real, 25_000_000, payer.lower())]
    assert seen[0].block.time is not None


def test_scan_of_a_thousand_addresses_is_batched_on_a_real_node(anvil_w3):
    payer = anvil_w3.eth.accounts[1]
    usdc = evm.deploy_token(anvil_w3)
    evm.mint(anvil_w3, usdc, payer, 10**9)
    payees = ["0x" + f"{n:040x}" for n in range(0x5000, 0x5000 + 1000)]
    first = anvil_w3.eth.block_number + 1
    for payee in payees[::250]:
        evm.token_transfer(anvil_w3, usdc, payer, payee, 1_000_000)
    w = watcher(anvil_w3, contract=usdc)
    tip = w.head().number
    before = w.round_trips
    seen = w.scan(payees, first, tip)
    assert sorted(t.to for t in seen) == sorted(payees[::250])
    # five address filters of 200 in one batch, then one batch of block headers
    assert w.round_trips - before == 2


def test_locate_follows_a_transaction_out_of_a_replaced_block(anvil_w3):
    snap = evm.snapshot(anvil_w3)
    txid = evm.send_eth(anvil_w3, anvil_w3.eth.accounts[1], PAYEES[0], 10**18)
    w = watcher(anvil_w3)
    where = w.locate([txid])
    assert where[txid].number == anvil_w3.eth.block_number
    evm.revert(anvil_w3, snap)
    evm.mine(anvil_w3, 2)  # the chain goes on without it
    assert w.locate([txid]) == {txid: None}


def test_lookup_says_what_a_pasted_hash_does(evm_w3):
    payer = evm_w3.eth.accounts[1]
    usdc = evm.deploy_token(evm_w3, symbol="USDC")
    fake = evm.deploy_token(evm_w3, symbol="USDC")
    for token in (usdc, fake):
        evm.mint(evm_w3, token, payer, 10**9)
    coin = evm.send_eth(evm_w3, payer, PAYEES[0], 10**18)
    token = evm.token_transfer(evm_w3, usdc, payer, PAYEES[0], 3_000_000)
    lookalike = evm.token_transfer(evm_w3, fake, payer, PAYEES[0], 3_000_000)
    eth, tok = watcher(evm_w3), watcher(evm_w3, contract=usdc)

    found = eth.lookup(coin, PAYEES[0])
    assert found.outcome is LookupOutcome.FOUND and found.transfers[0].amount == 10**18
    assert found.transfers[0].confirmations(found.tip) == 3
    assert eth.lookup(coin, PAYEES[1]).outcome is LookupOutcome.OTHER_ADDRESS
    assert eth.lookup(token, PAYEES[0]).outcome is LookupOutcome.WRONG_ASSET

    found = tok.lookup(token, PAYEES[0])
    assert found.outcome is LookupOutcome.FOUND and [t.amount for t in found.transfers] == [3_000_000]
    wrong = tok.lookup(lookalike, PAYEES[0])
    assert wrong.outcome is LookupOutcome.WRONG_ASSET and wrong.detail == {"contract": fake.lower()}
    assert tok.lookup(coin, PAYEES[0]).detail == {"native": True}
    assert tok.lookup("0x" + "ab" * 32, PAYEES[0]).outcome is LookupOutcome.NOT_FOUND


def test_lookup_of_a_reverted_and_of_an_unmined_transaction(anvil_w3):
    payer = anvil_w3.eth.accounts[1]
    usdc = evm.deploy_token(anvil_w3)
    contract = evm.token_contract(anvil_w3, usdc)
    # More than the payer holds: reverts on chain (gas given, so no estimate refuses it first).
    failed = contract.functions.transfer(Web3.to_checksum_address(PAYEES[0]), 5).transact(
        {"from": payer, "gas": 100_000}).to_0x_hex()
    assert anvil_w3.eth.get_transaction_receipt(failed)["status"] == 0
    tok = watcher(anvil_w3, contract=usdc)
    assert tok.lookup(failed, PAYEES[0]).outcome is LookupOutcome.FAILED
    anvil_w3.manager.request_blocking("evm_setAutomine", [False])
    try:
        waiting = anvil_w3.eth.send_transaction({"from": payer, "to": Web3.to_checksum_address(PAYEES[0]),
                                                 "value": 1}).to_0x_hex()
        assert watcher(anvil_w3).lookup(waiting, PAYEES[0]).outcome is LookupOutcome.PENDING
    finally:
        anvil_w3.manager.request_blocking("evm_setAutomine", [True])
