"""Bitcoin bytes checked locally (anchorgpu.chains.bitcoin), on recorded mainnet and testnet data."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from anchorgpu.chains.bitcoin import (
    BitcoinDataError,
    bits_to_target,
    merkle_proof_root,
    merkle_root,
    parse_block,
    parse_header,
    parse_transaction,
    verify_merkle_proof,
)
from anchorgpu.payments.addresses import derive_address
from tests.chains.esplora_server import load_fixture, merkle_branch, mine_header, recorded_transactions

TESTNET_VPUB = load_fixture("tx_9fca06b2.json")["account_key"]
PAYMENT = load_fixture("tx_9fca06b2.json")
BLOCK_170 = load_fixture("block_mainnet_170.json")


def _flip(hex_text: str, at: int) -> str:
    """The same hex with one digit changed at position ``at``."""
    digit = "1" if hex_text[at] != "1" else "2"
    return hex_text[:at] + digit + hex_text[at + 1:]


# --- transactions -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("txid, doc", sorted(recorded_transactions().items()))
def test_recorded_testnet_transactions_hash_to_their_ids(txid, doc):
    tx = parse_transaction(doc["hex"], network="testnet")
    assert tx.txid == txid
    assert tx.has_witness  # all SegWit spends: the id leaves the witness out
    assert tx.size == len(doc["hex"]) // 2


def test_legacy_mainnet_transactions_of_block_170_hash_to_their_ids():
    block = parse_block(bytes.fromhex(BLOCK_170["hex"]), network="bitcoin")
    assert [tx.txid for tx in block.transactions] == BLOCK_170["txids"]
    assert not any(tx.has_witness for tx in block.transactions)


def test_outputs_of_a_payment_to_a_derived_address():
    tx = parse_transaction(PAYMENT["hex"], network="testnet")
    ours = derive_address(TESTNET_VPUB, "btc-testnet", 0)
    assert ours == "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl"
    assert [(o.index, o.address, o.value) for o in tx.outputs] == [
        (0, ours, 1_000_000),
        (1, "tb1qr6ch6nwvgrwvz5y3t9l9xe6r3me7dmkpd4zwna", 24_099_800),
    ]
    assert tx.outputs[0].script_pubkey == "0014d0c4a3ef09e997b6e99e397e518fe3e41a118ca1"
    assert [o.index for o in tx.paying(ours.upper())] == [0]  # bech32 compares case-insensitively
    assert tx.paying(derive_address(TESTNET_VPUB, "btc-testnet", 1)) == []


def test_the_same_script_reads_as_a_mainnet_address_on_mainnet():
    tx = parse_transaction(PAYMENT["hex"], network="bitcoin")
    assert tx.txid == PAYMENT["txid"]
    assert tx.outputs[0].address.startswith("bc1q")
    assert tx.paying("tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl") == []


def test_bare_public_key_outputs_have_no_address():
    block = parse_block(bytes.fromhex(BLOCK_170["hex"]), network="bitcoin")
    hal = block.transactions[1]
    assert [(o.address, o.value) for o in hal.outputs] == [(None, 10 * 10**8), (None, 40 * 10**8)]


def test_tampered_transaction_hashes_to_another_id():
    hex_text = PAYMENT["hex"]
    amount_at = hex_text.index("40420f00")  # output 0: 1,000,000 sat, little-endian
    tampered = parse_transaction(hex_text[:amount_at] + "80841e00" + hex_text[amount_at + 8:], network="testnet")
    assert tampered.outputs[0].value == 2_000_000
    assert tampered.txid != PAYMENT["txid"]


def test_changing_only_the_witness_keeps_the_id():
    hex_text = PAYMENT["hex"]
    signature_at = hex_text.index("0247304402") + 20  # inside the witness signature
    assert parse_transaction(_flip(hex_text, signature_at), network="testnet").txid == PAYMENT["txid"]


@pytest.mark.parametrize("bad", [
    "",
    "   ",
    "xyz",
    "abc",  # odd length
    PAYMENT["hex"][:-2],  # truncated locktime
    PAYMENT["hex"][:120],  # cut inside an input
    PAYMENT["hex"] + "00",  # trailing byte
    "0100000000" + "00" * 10,  # no inputs, no witness flag
    "01000000" + "0002" + PAYMENT["hex"][12:],  # witness marker with a wrong flag
    "01000000" + "0001" + "01" + "00" * 36 + "00" + "ffffffff" + "01" + "00" * 8 + "00" + "00" + "00000000",
])
def test_malformed_transactions_raise_one_error_type(bad):
    with pytest.raises(BitcoinDataError):
        parse_transaction(bad, network="testnet")


def test_transaction_bytes_and_hex_give_the_same_result():
    assert parse_transaction(bytes.fromhex(PAYMENT["hex"]), network="testnet") == \
        parse_transaction(PAYMENT["hex"], network="testnet")


# --- headers and targets ----------------------------------------------------------------------------------------


def test_recorded_testnet_header():
    doc = load_fixture("header_testnet_1259783.json")
    header = parse_header(doc["hex"])
    assert header.hash == doc["hash"] == PAYMENT["recorded_block"]["hash"]
    assert header.prev_hash == "0000000060f94940783997588ce41375c8131454ee87f07e0813da23b182afb2"
    assert header.bits == 0x1D00FFFF
    assert header.timestamp == datetime(2018, 1, 21, 10, 35, 41, tzinfo=UTC)
    assert header.meets_target()
    header.check_proof_of_work(pow_limit_bits=0x1D00FFFF)


def test_recorded_mainnet_headers_meet_their_targets():
    recent = parse_header(load_fixture("header_mainnet_370090.json")["hex"])
    assert recent.hash == load_fixture("header_mainnet_370090.json")["hash"]
    assert recent.bits == 0x1814DD04 and recent.target == 0x14DD04 << 8 * (0x18 - 3)
    recent.check_proof_of_work(pow_limit_bits=0x1D00FFFF)
    early = parse_header(BLOCK_170["hex"][:160])
    assert early.hash == BLOCK_170["hash"]
    assert early.merkle_root == "7dac2c5666815c17a3b36427de37bb9d2e2c5ccec3f8633eb91a4205cb4c10ff"
    assert early.timestamp == datetime(2009, 1, 12, 3, 30, 25, tzinfo=UTC)
    early.check_proof_of_work()


def test_header_with_another_nonce_misses_its_target():
    doc = load_fixture("header_testnet_1259783.json")
    header = parse_header(_flip(doc["hex"], 152))  # a nonce digit
    assert header.hash != doc["hash"]
    assert not header.meets_target()
    with pytest.raises(BitcoinDataError, match="does not meet its own target"):
        header.check_proof_of_work()


def test_header_claiming_an_easier_target_than_the_network_allows():
    doc = load_fixture("header_testnet_1259783.json")
    header = parse_header(doc["hex"])
    with pytest.raises(BitcoinDataError, match="easier target"):
        header.check_proof_of_work(pow_limit_bits=0x1B00FFFF)


@pytest.mark.parametrize("bits, target", [
    (0x1D00FFFF, 0xFFFF << 208),
    (0x207FFFFF, 0x7FFFFF << 232),
    (0x03123456, 0x123456),
    (0x02123456, 0x1234),
])
def test_bits_decode(bits, target):
    assert bits_to_target(bits) == target


@pytest.mark.parametrize("bits", [0x1D800000, 0x1D000000, 0x22FFFFFF, -1, 1 << 32])
def test_impossible_bits_raise(bits):
    with pytest.raises(BitcoinDataError):
        bits_to_target(bits)


@pytest.mark.parametrize("bad", ["", "00" * 79, "00" * 81, "zz" * 80])
def test_header_must_be_80_bytes_of_hex(bad):
    with pytest.raises(BitcoinDataError):
        parse_header(bad)


# --- merkle proofs and blocks -----------------------------------------------------------------------------------


def test_merkle_proof_of_block_170():
    header = parse_header(BLOCK_170["hex"][:160])
    coinbase, payment = BLOCK_170["txids"]
    verify_merkle_proof(payment, {"block_height": 170, "merkle": [coinbase], "pos": 1}, header)
    verify_merkle_proof(coinbase, {"block_height": 170, "merkle": [payment], "pos": 0}, header)
    with pytest.raises(BitcoinDataError, match="does not lead"):
        verify_merkle_proof(payment, {"block_height": 170, "merkle": [coinbase], "pos": 0}, header)
    with pytest.raises(BitcoinDataError, match="does not lead"):
        verify_merkle_proof(PAYMENT["txid"], {"block_height": 170, "merkle": [coinbase], "pos": 1}, header)


@pytest.mark.parametrize("proof", [
    {"merkle": ["00" * 32], "pos": 2},  # position beyond a one-level branch
    {"merkle": ["00" * 32], "pos": -1},
    {"merkle": ["00" * 32], "pos": True},
    {"merkle": ["not hex"], "pos": 0},
    {"merkle": "00" * 32, "pos": 0},
    {"pos": 0},
    ["00" * 32],
])
def test_malformed_merkle_proofs_raise(proof):
    header = parse_header(BLOCK_170["hex"][:160])
    with pytest.raises(BitcoinDataError):
        verify_merkle_proof(BLOCK_170["txids"][1], proof, header)


def test_merkle_root_of_an_odd_number_of_transactions_repeats_the_last():
    txids = sorted(recorded_transactions())[:5]
    root = merkle_root(txids)
    assert root == merkle_root(txids + txids[-1:])  # why blocks with a repeated last txid are refused
    for pos, txid in enumerate(txids):
        assert merkle_proof_root(txid, merkle_branch(txids, pos), pos) == root


def test_raw_block_170_rebuilds_its_merkle_root():
    block = parse_block(bytes.fromhex(BLOCK_170["hex"]), network="bitcoin")
    assert block.hash == BLOCK_170["hash"]
    assert block.header.merkle_root == merkle_root(BLOCK_170["txids"])


def test_tampered_raw_block_is_refused():
    raw = bytes.fromhex(BLOCK_170["hex"])
    value_at = raw.index(bytes.fromhex("00ca9a3b00000000"))  # Hal Finney's 10 BTC
    tampered = raw[:value_at] + bytes.fromhex("00ca9a3b01000000") + raw[value_at + 8:]
    with pytest.raises(BitcoinDataError, match="merkle root"):
        parse_block(tampered, network="bitcoin")


@pytest.mark.parametrize("cut", [
    lambda raw: raw[:-1],  # truncated
    lambda raw: raw + b"\x00",  # trailing byte
    lambda raw: raw[:80] + b"\x03" + raw[81:],  # claims three transactions
    lambda raw: raw[:80] + b"\x00" + raw[81:],  # claims none
    lambda raw: raw[:80],  # header only
])
def test_malformed_raw_blocks_raise(cut):
    with pytest.raises(BitcoinDataError):
        parse_block(cut(bytes.fromhex(BLOCK_170["hex"])), network="bitcoin")


def test_block_repeating_its_last_transaction_is_refused():
    """Three transactions and the same three plus the last again share one merkle root (CVE-2012-2459)."""
    docs = [recorded_transactions()[t] for t in load_fixture("scenario.json")["blocks"][1]]
    header = mine_header("00" * 32, merkle_root([d["txid"] for d in docs]), 1_700_000_000)
    body = b"".join(bytes.fromhex(d["hex"]) for d in docs)
    honest = parse_block(header + b"\x03" + body, network="testnet")
    assert [tx.txid for tx in honest.transactions] == [d["txid"] for d in docs]
    with pytest.raises(BitcoinDataError, match="twice"):
        parse_block(header + b"\x04" + body + bytes.fromhex(docs[-1]["hex"]), network="testnet")
