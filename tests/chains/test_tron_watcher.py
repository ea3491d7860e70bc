"""The TRON watcher against the shape server (``tron_node``): scan, hashes, locate and lookup, the tags it
sends and never sends, its batch sizes, and the server's answers held to the documented example responses."""

from __future__ import annotations

import json

import pytest
import requests

from anchorgpu.chains.base import ChainUnavailable, LookupOutcome
from anchorgpu.chains.rpc import Rpc
from anchorgpu.chains.tron import MAINNET_CHAIN_ID, NILE_CHAIN_ID, SHASTA_CHAIN_ID, TronWatcher
from anchorgpu.chains.tron_address import to_hex20
from tests.chains import tron_support
from tests.chains.tron_node import FIXTURES, TronChain, TronNode
from tests.chains.tron_support import OTHER, OTHER_HEX, PAYER, USDT, USDT_HEX

tron_node = tron_support.tron_node

DEPOSIT = to_hex20("TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH")
SECOND = to_hex20("TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK")


def watcher(node, **kw) -> TronWatcher:
    kw.setdefault("decimals", 6)
    return TronWatcher.for_url(node.url, contract=kw.pop("contract", USDT), **kw)


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def call(node, method, params, rid=1):
    return requests.post(node.url, json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params},
                         timeout=5).json()


# --- the server speaks TRON's shapes -----------------------------------------------------------------


def test_the_server_answers_with_the_documented_fields(tron_node):
    chain = tron_node.chain
    tx = chain.transfer(USDT_HEX, PAYER, DEPOSIT, 5_000_000)
    block = chain.mine(tx)
    answers = {
        "eth_getBlockByNumber.json": call(tron_node, "eth_getBlockByNumber", [hex(block.number), False]),
        "eth_getTransactionReceipt.json": call(tron_node, "eth_getTransactionReceipt", [tx.txid]),
        "eth_getTransactionByHash.json": call(tron_node, "eth_getTransactionByHash", [tx.txid]),
        "eth_getLogs.json": call(tron_node, "eth_getLogs", [{"fromBlock": hex(block.number),
                                                             "toBlock": hex(block.number), "address": USDT_HEX}]),
    }
    for name, answer in answers.items():
        documented = fixture(name)["response"]["result"]
        ours = answer["result"]
        if isinstance(documented, list):
            documented, ours = documented[0], ours[0]
        assert set(ours) == set(documented), name
        if "logs" in documented:
            assert set(ours["logs"][0]) == set(documented["logs"][0])
    # the documented values' forms: block ids that begin with the number, quantities in hex
    documented_block = fixture("eth_getBlockByNumber.json")["response"]["result"]
    assert documented_block["hash"][2:18] == f"{int(documented_block['number'], 16):016x}"
    assert answers["eth_getBlockByNumber.json"]["result"]["hash"][2:18] == f"{block.number:016x}"
    assert fixture("eth_chainId.json")["response"]["result"] == hex(NILE_CHAIN_ID)


def test_the_documented_block_and_receipt_read_as_tron(tron_node):
    """The watcher's own parsers on the documented Nile answers: the block id check passes, the receipt's
    status and block are read."""
    from anchorgpu.chains.evm import _block_ref
    from anchorgpu.chains.tron import _tron_receipt_state

    w = watcher(tron_node)
    ref = _block_ref(fixture("eth_getBlockByNumber.json")["response"]["result"])
    assert w._block_id(ref).number == 0x3FE1C00
    ok, where = _tron_receipt_state(fixture("eth_getTransactionReceipt.json")["response"]["result"])
    assert ok and where.number == 0x3FE1CA0 and where.hash.startswith("0x0000000003fe1ca0")


def test_pending_and_safe_are_refused_as_java_tron_does(tron_node):
    for tag in ("pending", "safe"):
        answer = call(tron_node, "eth_getBlockByNumber", [tag, False])
        assert answer["error"] == {"code": -32602, "message": f"TAG {tag} not supported", "data": "{}"}
    assert call(tron_node, "eth_call", [{"to": USDT_HEX, "data": "0x313ce567"}, "finalized"])["error"]["code"] == -32602


def test_a_batch_over_100_is_refused_whole(tron_node):
    batch = [{"jsonrpc": "2.0", "id": i, "method": "eth_blockNumber", "params": []} for i in range(101)]
    answer = requests.post(tron_node.url, json=batch, timeout=5).json()
    assert answer["error"]["code"] == -32005 and answer["error"]["message"].startswith("Batch size ")
    assert len(requests.post(tron_node.url, json=batch[:100], timeout=5).json()) == 100


# --- the watcher ------------------------------------------------------------------------------------


def test_the_chain_ids_are_tron_s():
    assert (MAINNET_CHAIN_ID, NILE_CHAIN_ID, SHASTA_CHAIN_ID) == (0x2B6653DC, 0xCD8690DC, 0x94A9059E)


def test_head_reads_the_tip_and_the_solidified_block(tron_node):
    chain = tron_node.chain
    chain.mine_empty(30)
    chain.solidify(11)
    w = watcher(tron_node)
    head = w.head()
    assert head.number == 30 and head.hash == chain.blocks[30].hash
    assert w.counted_tip(head) == 11
    assert "pending" not in json.dumps(tron_node.rpc.methods_seen)
    # the decimals check went to the contract in its 0x-hex form, with the "latest" tag (the only one taken)
    assert "eth_call" in tron_node.rpc.methods_seen


def test_depth_counts_from_the_tip_and_safe_is_refused(tron_node):
    tron_node.chain.mine_empty(5)
    w = watcher(tron_node, finality="depth")
    assert w.counted_tip(w.head()) == 5
    with pytest.raises(ValueError, match="safe"):
        watcher(tron_node, finality="safe")
    with pytest.raises(ValueError, match="TRC-20"):
        TronWatcher.for_url(tron_node.url, contract="")


def test_a_node_on_another_chain_is_refused(tron_node):
    tron_node.chain.chain_id = NILE_CHAIN_ID
    with pytest.raises(ChainUnavailable, match=f"chain id {NILE_CHAIN_ID}.*configured for {MAINNET_CHAIN_ID}"):
        watcher(tron_node).head()
    assert watcher(tron_node, chain_id=NILE_CHAIN_ID).head().number == 0


def test_a_contract_with_other_decimals_is_refused(tron_node):
    with pytest.raises(ChainUnavailable, match="reports 6 decimals.*configured with 18"):
        watcher(tron_node, decimals=18).head()


def test_scan_finds_usdt_transfers_to_deposit_addresses_only(tron_node):
    chain = tron_node.chain
    paid = chain.transfer(USDT_HEX, PAYER, DEPOSIT, 12_340_000)
    other_token = chain.transfer(OTHER_HEX, PAYER, DEPOSIT, 99_000_000)
    elsewhere = chain.transfer(USDT_HEX, PAYER, "0x" + "77" * 20, 1_000_000)
    failed = chain.transfer(USDT_HEX, PAYER, SECOND, 3_000_000, status=0)
    zero = chain.transfer(USDT_HEX, PAYER, SECOND, 0)
    # a look-alike: another contract emitting a Transfer while being called as if it were USDT
    lookalike = chain.transfer(USDT_HEX, PAYER, SECOND, 4_000_000, emitter=OTHER_HEX)
    block = chain.mine(other_token, paid, elsewhere, failed, zero, lookalike)
    chain.mine_empty(3)
    seen = watcher(tron_node).scan({DEPOSIT, SECOND}, 1, chain.tip)
    assert [(t.txid, t.to, t.amount, t.sender, t.index) for t in seen] == [(paid.txid, DEPOSIT, 12_340_000, PAYER, 0)]
    assert seen[0].block.number == block.number and seen[0].block.hash == block.hash
    assert seen[0].block.time.timestamp() == block.timestamp
    assert not seen[0].txid[2:].startswith("0x") and len(seen[0].txid) == 66


def test_scan_batches_fit_the_node_limits(tron_node):
    """Many deposit addresses over a long range: every eth_getLogs fits 5,000 blocks and 1,000 topic
    alternatives, and every batch fits 100 (the server refuses any that does not)."""
    chain = tron_node.chain
    addresses = {"0x" + f"{i:040x}" for i in range(1, 451)}
    target = "0x" + f"{450:040x}"
    chain.mine_empty(1200)
    tx = chain.transfer(USDT_HEX, PAYER, target, 7)
    chain.mine(tx)
    seen = watcher(tron_node).scan(addresses, 1, chain.tip)
    assert [(t.txid, t.to) for t in seen] == [(tx.txid, target)]
    assert max(tron_node.rpc.batches) <= 100


def test_hashes_and_locate_follow_a_reorganisation(tron_node):
    chain = tron_node.chain
    chain.mine_empty(4)
    tx = chain.transfer(USDT_HEX, PAYER, DEPOSIT, 5)
    chain.mine(tx)
    chain.mine_empty(2)
    chain.solidify(4)
    w = watcher(tron_node)
    w.head()
    before = w.hashes([5, 6])
    seen = w.scan({DEPOSIT}, 5, 5)[0].block
    assert {k: (v.number, v.hash) for k, v in w.locate([tx.txid]).items()} == {tx.txid: (seen.number, seen.hash)}
    dropped = chain.reorg(5)
    chain.mine_empty(1)
    assert w.locate([tx.txid]) == {tx.txid: None}
    after = w.hashes([5, 6])
    assert after[5] != before[5] and after[6] is None
    chain.mine(*dropped)  # mined again, one block later: same txid
    where = w.locate([tx.txid[2:]])  # bare hex as TRONSCAN shows it
    assert where[tx.txid].number == 6
    with pytest.raises(ValueError, match="solidified"):
        chain.reorg(4)


def test_lookup_judges_a_pasted_txid(tron_node):
    chain = tron_node.chain
    paid = chain.transfer(USDT_HEX, PAYER, DEPOSIT, 8_000_000)
    other = chain.transfer(OTHER_HEX, PAYER, DEPOSIT, 8_000_000)
    failed = chain.transfer(USDT_HEX, PAYER, DEPOSIT, 8_000_000, status=0)
    chain.mine(paid, other, failed)
    chain.mine_empty(3)
    chain.solidify(2)
    w = watcher(tron_node)
    found = w.lookup(paid.txid[2:], DEPOSIT)  # bare 64 hex, as TRONSCAN shows it
    assert found.outcome is LookupOutcome.FOUND and found.tip == 2
    assert [(t.txid, t.amount, t.index) for t in found.transfers] == [(paid.txid, 8_000_000, 0)]
    wrong = w.lookup(other.txid, DEPOSIT)
    assert wrong.outcome is LookupOutcome.WRONG_ASSET and wrong.detail == {"contract": OTHER_HEX}
    assert w.lookup(failed.txid, DEPOSIT).outcome is LookupOutcome.FAILED
    assert w.lookup(paid.txid, SECOND).outcome is LookupOutcome.OTHER_ADDRESS
    assert w.lookup("0x" + "ab" * 32, DEPOSIT).outcome is LookupOutcome.NOT_FOUND


def test_a_node_whose_block_ids_are_not_tron_s_is_refused(tron_node):
    chain = tron_node.chain
    chain.mine_empty(2)
    chain.solidify()
    chain.blocks[2].hash = "0x" + "ff" * 32
    with pytest.raises(ChainUnavailable, match="does not begin with its number"):
        watcher(tron_node).head()


def test_trx_balances_are_not_read(tron_node):
    w = watcher(tron_node)
    with pytest.raises(ChainUnavailable, match="TRC-20"):
        w.balances({DEPOSIT}, 0)
    with pytest.raises(ChainUnavailable, match="eth_getTransactionCount"):
        w.sent_counts({DEPOSIT}, 0)


def test_a_stopped_server_is_a_clear_failure():
    node = TronNode(TronChain()).start()
    url = node.url
    node.stop()
    w = TronWatcher(Rpc.for_url(url, timeout=1, batch_size=100), contract=USDT, decimals=6)
    with pytest.raises(ChainUnavailable, match="connection"):
        w.head()


def test_the_contract_may_be_given_in_any_tron_spelling(tron_node):
    for spelling in (USDT, "41" + USDT_HEX[2:], USDT_HEX.upper().replace("0X", "0x")):
        assert watcher(tron_node, contract=spelling).contract == USDT_HEX
    assert watcher(tron_node, contract=OTHER).contract == OTHER_HEX
    with pytest.raises(ValueError, match="not a TRON address"):
        watcher(tron_node, contract="TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u")


def test_a_transfer_log_of_a_failed_transaction_is_not_a_payment(tron_node):
    """TRON's receipt page asks readers to check ``status`` before reading ``logs``: a receipt saying 0x0
    whose logs still hold a Transfer pays nothing, however the node came to list it."""
    chain = tron_node.chain
    tx = chain.transfer(USDT_HEX, PAYER, DEPOSIT, 9_000_000)
    tx.status = 0  # the log stays, the receipt says failed
    chain.mine(tx)
    chain.solidify()
    w = watcher(tron_node)
    assert call(tron_node, "eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0x1", "address": USDT_HEX}])["result"]
    assert w.scan({DEPOSIT}, 1, 1) == []
    assert w.lookup(tx.txid, DEPOSIT).outcome is LookupOutcome.FAILED
    assert w.locate([tx.txid]) == {tx.txid: None}
