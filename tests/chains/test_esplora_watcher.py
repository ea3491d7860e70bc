"""BitcoinWatcher against a local stand-in Esplora explorer (tests/chains/esplora_server.py).

The transactions are real recorded testnet transactions paying addresses of the
BIP84 test account ("abandon … about", m/84'/1'/0'); the blocks around them are
synthetic (regtest target), so the watcher is told that target is acceptable.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from anchorgpu.chains.base import BlockRef, ChainUnavailable, LookupOutcome
from anchorgpu.chains.bitcoin import REGTEST_POW_LIMIT_BITS
from anchorgpu.chains.esplora import BitcoinWatcher
from anchorgpu.payments.addresses import derive_address
from tests.chains.esplora_server import build_scenario, closed_port_url, load_fixture

VPUB = load_fixture("tx_9fca06b2.json")["account_key"]
ADDRESS_0 = derive_address(VPUB, "btc-testnet", 0)  # tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl
ADDRESS_1 = derive_address(VPUB, "btc-testnet", 1)
PAYMENT = "9fca06b2a6469d401f33ef86d29ea4cdd832c35e6384f5df663e9fd4a95df3ac"  # 1,000,000 sat to ADDRESS_0
SECOND_PAYMENT = "101d6d29a22043907181f7c3b32d06b6408ee5898b8e5c83ccc5efbed47375cb"  # 1,000,000 sat to ADDRESS_0
TO_INDEX_1 = "0ada6fe8491ccb96a9533a50a69a67472f7c0e996ba51e645516bed8bf11e48e"  # 100,000 sat to ADDRESS_1
UNDERPAYMENT = "1204fb4785c2e31d5851036fe2684d198f8c5809143740a997f29ca23f2e472d"  # 100,000 sat, in the mempool
ELSEWHERE = "3e610a6f94ad1b0f0799e196678cd580696628fc3aef7b73f26818cda6bb5ac4"  # pays none of ours
UNKNOWN = "ab" * 32


@pytest.fixture
def chain():
    explorer, blocks, recorded = build_scenario()
    explorer.start()
    try:
        yield explorer, blocks, recorded
    finally:
        explorer.stop()


def _watcher(url: str, **kwargs) -> BitcoinWatcher:
    kwargs.setdefault("network", "testnet")
    kwargs.setdefault("timeout", 5.0)
    return BitcoinWatcher(base_url=url, pow_limit_bits=REGTEST_POW_LIMIT_BITS, **kwargs)


def _ref(block) -> BlockRef:
    return BlockRef(block.height, block.hash, datetime.fromtimestamp(block.time, tz=UTC))


# --- head ---------------------------------------------------------------------------------------------------------


def test_head_is_the_tip_with_its_checked_header(chain):
    explorer, blocks, _ = chain
    watcher = _watcher(explorer.url)
    tip = blocks[-1]
    assert watcher.head() == _ref(tip)
    assert watcher.head().time == datetime.fromtimestamp(tip.time, tz=UTC)
    each_time = ["/blocks/tip/height", f"/block-height/{tip.height}", f"/block/{tip.hash}/header"]
    assert explorer.paths == ["/block-height/0"] + each_time + each_time  # the network is checked once
    assert (watcher.calls, watcher.round_trips) == (7, 7)


def test_explorer_of_another_network_is_refused(chain):
    explorer, _, _ = chain
    with pytest.raises(ChainUnavailable, match="another chain") as caught:
        BitcoinWatcher(base_url=explorer.url, network="bitcoin", pow_limit_bits=REGTEST_POW_LIMIT_BITS).head()
    assert caught.value.endpoint == explorer.url


def test_synthetic_headers_are_refused_at_the_real_testnet_limit(chain):
    explorer, _, _ = chain
    with pytest.raises(ChainUnavailable, match="easier target"):
        BitcoinWatcher(base_url=explorer.url, network="testnet").head()


# --- lookup -------------------------------------------------------------------------------------------------------


def test_lookup_finds_a_payment_to_a_derived_address(chain):
    explorer, blocks, _ = chain
    watcher = _watcher(explorer.url)
    found = watcher.lookup(PAYMENT, ADDRESS_0)
    assert found.outcome is LookupOutcome.FOUND
    assert found.tip == blocks[-1].height
    (transfer,) = found.transfers
    assert (transfer.txid, transfer.index, transfer.to, transfer.amount, transfer.sender) == \
        (PAYMENT, 0, ADDRESS_0, 1_000_000, "")
    assert transfer.block == _ref(blocks[1])
    assert transfer.confirmations(found.tip) == 2  # its block and one on top
    # Amounts and addresses come from the bytes: the explorer's JSON summary of the transaction is never asked for.
    assert f"/tx/{PAYMENT}" not in explorer.paths


def test_lookup_accepts_the_address_in_capitals(chain):
    explorer, _, _ = chain
    found = _watcher(explorer.url).lookup(PAYMENT.upper(), ADDRESS_0.upper())
    assert found.outcome is LookupOutcome.FOUND and found.transfers[0].to == ADDRESS_0


def test_underpayment_is_reported_with_its_true_amount(chain):
    explorer, blocks, _ = chain
    quote_sat = 150_000
    found = _watcher(explorer.url).lookup(UNDERPAYMENT, ADDRESS_0)
    assert found.outcome is LookupOutcome.FOUND
    (transfer,) = found.transfers
    assert transfer.amount == 100_000 < quote_sat
    assert transfer.block is None and transfer.confirmations(found.tip) == 0  # still in the mempool


def test_lookup_of_tampered_hex_is_bad_data(chain):
    explorer, _, recorded = chain
    hex_text = recorded[PAYMENT]["hex"]
    explorer.override(f"/tx/{PAYMENT}/hex", body=hex_text.replace("40420f00", "80841e00", 1))  # 2,000,000 sat
    found = _watcher(explorer.url).lookup(PAYMENT, ADDRESS_0)
    assert found.outcome is LookupOutcome.BAD_DATA
    assert found.transfers == ()
    assert found.detail["computed"] != PAYMENT


def test_lookup_of_another_transaction_served_under_the_id_is_bad_data(chain):
    explorer, _, recorded = chain
    explorer.override(f"/tx/{PAYMENT}/hex", body=recorded[SECOND_PAYMENT]["hex"])  # also pays ADDRESS_0
    found = _watcher(explorer.url).lookup(PAYMENT, ADDRESS_0)
    assert found.outcome is LookupOutcome.BAD_DATA and found.detail["computed"] == SECOND_PAYMENT


def test_lookup_of_truncated_hex_is_bad_data(chain):
    explorer, _, recorded = chain
    explorer.override(f"/tx/{PAYMENT}/hex", body=recorded[PAYMENT]["hex"][:-8])
    assert _watcher(explorer.url).lookup(PAYMENT, ADDRESS_0).outcome is LookupOutcome.BAD_DATA


def test_lookup_of_an_unknown_transaction(chain):
    explorer, blocks, _ = chain
    found = _watcher(explorer.url).lookup(UNKNOWN, ADDRESS_0)
    assert (found.outcome, found.tip, found.transfers) == (LookupOutcome.NOT_FOUND, blocks[-1].height, ())


def test_lookup_of_a_transaction_paying_someone_else(chain):
    explorer, _, _ = chain
    watcher = _watcher(explorer.url)
    assert watcher.lookup(ELSEWHERE, ADDRESS_0).outcome is LookupOutcome.OTHER_ADDRESS
    assert watcher.lookup(PAYMENT, ADDRESS_1).outcome is LookupOutcome.OTHER_ADDRESS


# --- scan ---------------------------------------------------------------------------------------------------------


def test_scan_finds_payments_to_our_addresses_and_nothing_else(chain):
    explorer, blocks, _ = chain
    watcher = _watcher(explorer.url)
    seen = watcher.scan([ADDRESS_0, ADDRESS_1], blocks[0].height, blocks[-1].height)
    assert [(t.txid, t.index, t.to, t.amount) for t in seen] == [
        (PAYMENT, 0, ADDRESS_0, 1_000_000),
        (TO_INDEX_1, 1, ADDRESS_1, 100_000),
        (SECOND_PAYMENT, 0, ADDRESS_0, 1_000_000),
    ]
    assert {t.block for t in seen} == {_ref(blocks[1])}
    assert all(t.sender == "" for t in seen)
    assert UNDERPAYMENT not in {t.txid for t in seen}  # unconfirmed: not in any block
    # one genesis check, then a hash and a raw block per height
    assert watcher.calls == 1 + 2 * len(blocks)


def test_scan_of_one_address_and_one_block(chain):
    explorer, blocks, _ = chain
    watcher = _watcher(explorer.url)
    assert [t.key for t in watcher.scan([ADDRESS_1.upper()], blocks[1].height, blocks[1].height)] == [(TO_INDEX_1, 1)]
    assert watcher.scan([ADDRESS_0], blocks[2].height, blocks[2].height) == []
    assert watcher.scan([ADDRESS_0], blocks[2].height, blocks[1].height) == []  # empty range


def test_scan_of_a_tampered_raw_block_is_refused(chain):
    explorer, blocks, _ = chain
    raw = blocks[1].raw
    at = raw.index(bytes.fromhex("40420f00"))  # the 1,000,000 sat output
    explorer.override(f"/block/{blocks[1].hash}/raw", body=raw[:at] + bytes.fromhex("80841e00") + raw[at + 4:],
                      content_type="application/octet-stream")
    with pytest.raises(ChainUnavailable, match="merkle root"):
        _watcher(explorer.url).scan([ADDRESS_0], blocks[0].height, blocks[-1].height)


def test_scan_refuses_a_block_other_than_the_one_asked_for(chain):
    explorer, blocks, _ = chain
    explorer.override(f"/block/{blocks[1].hash}/raw", body=blocks[2].raw, content_type="application/octet-stream")
    with pytest.raises(ChainUnavailable, match="got block"):
        _watcher(explorer.url).scan([ADDRESS_0], blocks[1].height, blocks[1].height)


def test_scan_refuses_blocks_that_do_not_chain(chain):
    explorer, blocks, recorded = chain
    stray = explorer.add_block([recorded[UNDERPAYMENT]["hex"]], height=blocks[2].height, prev_hash="11" * 32,
                               when=blocks[2].time)
    assert explorer.best[blocks[2].height] == stray.hash
    with pytest.raises(ChainUnavailable, match="does not follow"):
        _watcher(explorer.url).scan([ADDRESS_0], blocks[1].height, blocks[2].height)


def test_scan_beyond_the_tip_is_unavailable_not_empty(chain):
    explorer, blocks, _ = chain
    with pytest.raises(ChainUnavailable, match=f"no block at height {blocks[-1].height + 1}"):
        _watcher(explorer.url).scan([ADDRESS_0], blocks[-1].height, blocks[-1].height + 1)


# --- locate -------------------------------------------------------------------------------------------------------


def test_locate_canonical_unconfirmed_and_unknown(chain):
    explorer, blocks, _ = chain
    watcher = _watcher(explorer.url)
    where = watcher.locate([PAYMENT, TO_INDEX_1, UNDERPAYMENT, UNKNOWN])
    assert where == {PAYMENT: _ref(blocks[1]), TO_INDEX_1: _ref(blocks[1]), UNDERPAYMENT: None, UNKNOWN: None}
    # the header of a block shared by two transactions is fetched once
    assert explorer.paths.count(f"/block/{blocks[1].hash}/header") == 1


def test_locate_after_a_reorganisation(chain):
    explorer, blocks, recorded = chain
    watcher = _watcher(explorer.url)
    assert watcher.locate([PAYMENT])[PAYMENT] == _ref(blocks[1])
    # The best chain now has another block at that height; the status answer still names the old block.
    explorer.add_block([recorded[ELSEWHERE]["hex"]], height=blocks[1].height, prev_hash=blocks[0].hash,
                       when=blocks[1].time + 1)
    assert watcher.locate([PAYMENT]) == {PAYMENT: None}


def test_locate_refuses_a_forged_merkle_proof(chain):
    explorer, blocks, _ = chain
    # The explorer claims the mempool transaction sits third in the block of the payments.
    status = {"confirmed": True, "block_height": blocks[1].height, "block_hash": blocks[1].hash}
    proof = {"block_height": blocks[1].height, "merkle": [PAYMENT, TO_INDEX_1], "pos": 2}
    explorer.override(f"/tx/{UNDERPAYMENT}/status", body=json.dumps(status), content_type="application/json")
    explorer.override(f"/tx/{UNDERPAYMENT}/merkle-proof", body=json.dumps(proof), content_type="application/json")
    with pytest.raises(ChainUnavailable, match="does not lead to the merkle root"):
        _watcher(explorer.url).locate([UNDERPAYMENT])


def test_locate_refuses_a_header_that_is_not_the_block(chain):
    explorer, blocks, _ = chain
    explorer.override(f"/block/{blocks[1].hash}/header", body=blocks[0].header.hex())
    with pytest.raises(ChainUnavailable, match="hashes to"):
        _watcher(explorer.url).locate([PAYMENT])


def test_locate_rejects_malformed_txids(chain):
    explorer, _, _ = chain
    with pytest.raises(ValueError):
        _watcher(explorer.url).locate(["0x" + PAYMENT[2:]])


# --- a broken explorer --------------------------------------------------------------------------------------------


def test_server_error_is_unavailable_with_a_readable_reason(chain):
    explorer, _, _ = chain
    explorer.override("/blocks/tip/height", status=500, body="Internal Server Error")
    with pytest.raises(ChainUnavailable) as caught:
        _watcher(explorer.url).head()
    assert caught.value.reason == "GET /blocks/tip/height: HTTP 500 Internal Server Error"
    assert str(caught.value) == f"{explorer.url}: GET /blocks/tip/height: HTTP 500 Internal Server Error"


@pytest.mark.parametrize("path, body, match", [
    ("/blocks/tip/height", "<html>rate limited</html>", "not a block height"),
    ("/blocks/tip/height", "-5", "not a block height"),
    ("/block-height/0", "not-a-hash", "not a block hash"),
    ("/blocks/tip/height", b"\xff\xfe", "not plain text"),
])
def test_garbage_text_is_unavailable(chain, path, body, match):
    explorer, _, _ = chain
    explorer.override(path, body=body)
    with pytest.raises(ChainUnavailable, match=match):
        _watcher(explorer.url).head()


@pytest.mark.parametrize("body, match", [
    ("{not json", "not JSON"),
    ('["confirmed"]', "not a transaction status"),
    ('{"confirmed": true, "block_height": "12"}', "usable block height"),
])
def test_garbage_json_is_unavailable(chain, body, match):
    explorer, _, _ = chain
    explorer.override(f"/tx/{PAYMENT}/status", body=body, content_type="application/json")
    with pytest.raises(ChainUnavailable, match=match):
        _watcher(explorer.url).locate([PAYMENT])


def test_garbage_header_is_unavailable(chain):
    explorer, blocks, _ = chain
    explorer.override(f"/block/{blocks[-1].hash}/header", body="00" * 40)
    with pytest.raises(ChainUnavailable, match="80 bytes"):
        _watcher(explorer.url).head()


def test_non_hex_transaction_text_is_unavailable(chain):
    explorer, _, _ = chain
    explorer.override(f"/tx/{PAYMENT}/hex", body="<html>maintenance</html>")
    with pytest.raises(ChainUnavailable, match="not hexadecimal"):
        _watcher(explorer.url).lookup(PAYMENT, ADDRESS_0)


def test_404_where_a_method_does_not_expect_it_is_unavailable(chain):
    explorer, blocks, _ = chain
    explorer.override(f"/block/{blocks[-1].hash}/header", status=404, body="Block not found")
    with pytest.raises(ChainUnavailable, match="HTTP 404"):
        _watcher(explorer.url).head()


def test_slow_explorer_times_out(chain):
    explorer, _, _ = chain
    explorer.override("/blocks/tip/height", body="2500002", delay=1.0)
    with pytest.raises(ChainUnavailable, match="no answer within 0.2 s"):
        _watcher(explorer.url, timeout=0.2).head()


def test_closed_port_is_unavailable_and_counted():
    url = closed_port_url()
    watcher = _watcher(url, timeout=2.0)
    with pytest.raises(ChainUnavailable) as caught:
        watcher.head()
    assert caught.value.reason == "GET /block-height/0: connection refused"
    assert caught.value.endpoint == url
    assert (watcher.calls, watcher.round_trips) == (1, 1)


def test_each_request_counts_once(chain):
    explorer, _, _ = chain
    watcher = _watcher(explorer.url)
    watcher.lookup(PAYMENT, ADDRESS_0)
    assert watcher.calls == watcher.round_trips == len(explorer.paths)
    # genesis, tip height, hash at tip, tip header, hex, status, hash at its height, its header, merkle proof
    assert len(explorer.paths) == 9
