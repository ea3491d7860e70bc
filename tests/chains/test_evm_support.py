"""The EVM test chains themselves: the token deploys and moves on both, logs read back, anvil reverts.

No database here: on the PostgreSQL pass these are deselected (they ran in the SQLite pass).
"""

from __future__ import annotations

import hashlib

import pytest
from web3 import Web3
from web3.exceptions import TransactionNotFound

from tests.chains import evm_support as evm


def test_artifact_matches_its_source():
    artifact = evm.load_token_artifact()
    source_hash = hashlib.sha256(evm.TOKEN_SOURCE.read_bytes()).hexdigest()
    assert artifact["sourceSha256"] == source_hash, "TestToken.sol changed: run tests/chains/contracts/build.sh"
    assert artifact["contractName"] == "TestToken"
    assert artifact["compiler"]["evmVersion"] == "paris"
    assert artifact["bytecode"].startswith("0x") and len(artifact["bytecode"]) > 1000
    names = {entry.get("name") for entry in artifact["abi"]}
    assert {"decimals", "totalSupply", "balanceOf", "transfer", "approve", "allowance", "transferFrom",
            "mint", "Transfer", "Approval"} <= names


def test_transfer_topic_is_the_erc20_event_signature():
    assert evm.TRANSFER_TOPIC == Web3.keccak(text="Transfer(address,address,uint256)").to_0x_hex()


def test_token_moves_and_its_transfer_log_reads_back(evm_w3):
    w3 = evm_w3
    deployer, payer, shop = w3.eth.accounts[:3]
    token = evm.deploy_token(w3, decimals=6)
    assert token == Web3.to_checksum_address(token)
    contract = evm.token_contract(w3, token)
    assert contract.functions.decimals().call() == 6
    assert contract.functions.symbol().call() == "TUSD"

    evm.mint(w3, token, payer, 250_000_000)
    assert evm.token_balance(w3, token, payer) == 250_000_000
    assert contract.functions.totalSupply().call() == 250_000_000

    tx_hash = evm.token_transfer(w3, token, payer, shop, 99_500_000)
    assert tx_hash.startswith("0x") and len(tx_hash) == 66
    assert evm.token_balance(w3, token, shop) == 99_500_000
    assert evm.token_balance(w3, token, payer) == 150_500_000

    block = w3.eth.get_transaction_receipt(tx_hash)["blockNumber"]
    logs = w3.eth.get_logs({"address": token, "fromBlock": block, "toBlock": block,
                            "topics": [evm.TRANSFER_TOPIC, None, evm.address_topic(shop)]})
    assert len(logs) == 1
    log = logs[0]
    assert log["transactionHash"].to_0x_hex() == tx_hash
    assert evm.topic_address(log["topics"][1]) == payer
    assert evm.topic_address(log["topics"][2]) == shop
    assert int.from_bytes(log["data"], "big") == 99_500_000
    # web3's own decoding agrees
    event = contract.events.Transfer().process_log(log)
    assert (event["args"]["from"], event["args"]["to"], event["args"]["value"]) == (payer, shop, 99_500_000)

    # Over the whole chain: the mint (from the zero address) and the transfer, nothing for the deployer.
    everything = w3.eth.get_logs({"address": token, "fromBlock": 0, "toBlock": "latest",
                                  "topics": [evm.TRANSFER_TOPIC]})
    assert [evm.topic_address(entry["topics"][1]) for entry in everything] == [
        "0x0000000000000000000000000000000000000000", payer]
    assert w3.eth.get_logs({"address": token, "fromBlock": 0, "toBlock": "latest",
                            "topics": [evm.TRANSFER_TOPIC, None, evm.address_topic(deployer)]}) == []


def test_only_the_deployer_mints_and_overdrafts_revert(evm_w3):
    w3 = evm_w3
    deployer, stranger = w3.eth.accounts[:2]
    token = evm.deploy_token(w3, decimals=18, name="Other", symbol="OTH", deployer=deployer)
    contract = evm.token_contract(w3, token)
    assert contract.functions.decimals().call() == 18
    with pytest.raises(evm.REVERTED, match="only the deployer mints"):
        contract.functions.mint(stranger, 1).transact({"from": stranger})
    with pytest.raises(evm.REVERTED, match="balance too small"):
        contract.functions.transfer(deployer, 1).transact({"from": stranger})
    assert contract.functions.totalSupply().call() == 0


def test_allowance_and_transfer_from(evm_w3):
    w3 = evm_w3
    owner, spender, receiver = w3.eth.accounts[:3]
    token = evm.deploy_token(w3)
    contract = evm.token_contract(w3, token)
    evm.mint(w3, token, owner, 1_000)
    evm.wait(w3, contract.functions.approve(spender, 600).transact({"from": owner}))
    assert contract.functions.allowance(owner, spender).call() == 600
    evm.wait(w3, contract.functions.transferFrom(owner, receiver, 400).transact({"from": spender}))
    assert contract.functions.allowance(owner, spender).call() == 200
    assert evm.token_balance(w3, token, receiver) == 400
    with pytest.raises(evm.REVERTED, match="allowance too small"):
        contract.functions.transferFrom(owner, receiver, 201).transact({"from": spender})


def test_send_eth_and_mine(evm_w3):
    w3 = evm_w3
    sender, receiver = w3.eth.accounts[:2]
    before = w3.eth.get_balance(receiver)
    tx_hash = evm.send_eth(w3, sender, receiver, 10**18)
    receipt = w3.eth.get_transaction_receipt(tx_hash)
    assert w3.eth.get_balance(receiver) == before + 10**18
    assert w3.eth.get_transaction(tx_hash)["to"] == receiver
    assert receipt["blockNumber"] == w3.eth.block_number  # mined at once, in its own block
    evm.mine(w3, 5)
    assert w3.eth.block_number == receipt["blockNumber"] + 5


def test_anvil_revert_drops_a_mined_transaction_like_a_reorg(anvil_w3):
    w3 = anvil_w3
    payer, shop = w3.eth.accounts[1:3]
    token = evm.deploy_token(w3)
    evm.mint(w3, token, payer, 5_000_000)
    tip = w3.eth.block_number
    fork_point = evm.snapshot(w3)

    tx_hash = evm.token_transfer(w3, token, payer, shop, 5_000_000)
    evm.mine(w3, 2)
    orphaned = w3.eth.get_block(tip + 1)["hash"]
    assert w3.eth.get_transaction_receipt(tx_hash)["blockNumber"] == tip + 1

    evm.revert(w3, fork_point)
    assert w3.eth.block_number == tip
    with pytest.raises(TransactionNotFound):
        w3.eth.get_transaction_receipt(tx_hash)
    assert evm.token_balance(w3, token, shop) == 0

    # The new branch: another block at the same height, with another hash.
    evm.mine(w3, 1)
    assert w3.eth.get_block(tip + 1)["hash"] != orphaned


def test_anvil_chain_is_fresh_for_each_test(anvil_w3):
    # The fixture reverted what the earlier tests mined. (Using anvil_url directly and mining would leak
    # blocks into every later test: go through anvil_w3.)
    assert anvil_w3.eth.chain_id == evm.ANVIL_CHAIN_ID
    assert anvil_w3.eth.get_transaction_count(anvil_w3.eth.accounts[0]) == 0
    assert anvil_w3.eth.block_number == 0


def test_eth_tester_mines_with_its_own_call(tester_w3):
    evm.mine(tester_w3, 3)
    assert tester_w3.eth.block_number == 3
    with pytest.raises(NotImplementedError):
        evm.snapshot(tester_w3)
