"""TRON addresses and transaction ids against published vectors, each named with its source.

Sources (commit pinned where the vector lives in a repository):
* TD: tronprotocol/documentation-en @ 8f3209ef53d72cc016f1f55143c75d85b90e431a, docs/api/json-rpc/
* JT: tronprotocol/java-tron @ 1e35f79a165424bbae319799d9aca92948b8f5c2, framework/src/test/java/org/tron/core/jsonrpc/
* BU: ebellocchia/bip_utils @ d15c75ddd74e4838c396a0d036ef6faf11b06a4b, tests/bip/bip44/test_bip44.py (TRON entry,
  seed 5eb00bbd… = BIP39 "abandon ×11 about" with no passphrase)
* WC: trustwallet/wallet-core @ e3bc4a587300cd6467b206abb3b863724a45b022, tests/chains/Tron/AddressTests.cpp
"""

from __future__ import annotations

import pytest
from bip_utils import (
    Base58Decoder,
    Base58Encoder,
    Bip39SeedGenerator,
    Bip44,
    Bip44Changes,
    Bip44Coins,
    Secp256k1PrivateKey,
    TrxAddrEncoder,
)

from anchorgpu.chains.keys import watch_key
from anchorgpu.chains.tron_address import TronAddressError, is_base58, to_base58, to_hex20, to_hex21
from anchorgpu.payments.address_check import AddressCheckError, check_address
from anchorgpu.payments.addresses import derive_address
from anchorgpu.payments.txids import TxIdError, normalise_txid

# (Base58Check, 20-byte hex, where the pair is published)
PAIRS = [
    # Nile testnet USDT: T… in JT ApiUtilTest.java ("nile usdt"); 0x-hex in TD smart-contract/eth_call.md
    # ("call symbol() of Tether USD (USDT) on Nile testnet", to = 0xeca9bc82…).
    ("TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf", "eca9bc828a3005b9a3b909f2cc5c2a54794de05f"),
    # JT JsonRpcTest.java: "nile contract：TXEphLzyv5jFwvjzwMok9UoehaSn294ZhN" next to its 41E94EAD… form.
    ("TXEphLzyv5jFwvjzwMok9UoehaSn294ZhN", "e94ead5f4ca072a25b2e5500934709f1aee3c64b"),
    # JT ApiUtilTest.java: "transfer to address TVjsyZ7fYF3qLF6BQgPmTEZy1xrNNyVAAA", whose 20 bytes are the
    # first argument of the a9059cbb (transfer) call data written below that comment.
    ("TVjsyZ7fYF3qLF6BQgPmTEZy1xrNNyVAAA", "d8dd39e2dea27a40001884901735e3940829bb44"),
    # TRON mainnet USDT (Tether's TRC-20 contract), as the brief gives it; no TRON page in the sources above
    # prints both forms, so this pair is checked for consistency with the codec, not from a document.
    ("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", "a614f803b6fd780986a42c78ec9c7f77e6ded13c"),
]

# BU: the TRON account xpub (m/44'/195'/0') and the first five receive addresses m/44'/195'/0'/0/i.
BU_SEED = bytes.fromhex("5eb00bbddcf069084889a8ab9155568165f5c453ccb85e70811aaed6f6da5fc19a5ac40b389cd370d086206dec8a"
                        "a6c43daea6690f20ad3d8d48b2d2ce9e38e4")
BU_XPUB = ("xpub6D1AabNHCupeiLM65ZR9UStMhJ1vCpyV4XbZdyhMZBiJXALQtmn9p42VTQckoHVn8WNqS7dqnJokZHAHcHGoaQgmv8D45oNUKx6"
           "DZMNZBCd")
BU_ADDRESSES = ["TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH", "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK",
                "TYJPRrdB5APNeRs4R7fYZSwW3TcrTKw2gx", "TRhVWK5XEDkQBDevcdCWW7RW51aRncty4W",
                "TT2X2yyubp7qpAWYYNE5JQWBtoZ7ikQFsY"]
# WC TronAddress.FromPublicKey: private key -> address.
WC_KEYS = [("2d8f68944bdbfbc0769542fba8fc2d2a3de67393334471624364c7006da2aa54", "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"),
           ("be88df1d0bf30a923cb39c3bb953178baaf3726e8d3ce81e7c8462e046e0d835", "THRF3GuPnvvPzKoaT8pJex5XHmo8NNbCb3")]


@pytest.mark.parametrize(("base58", "hex20"), PAIRS)
def test_published_pairs_convert_both_ways(base58, hex20):
    assert to_hex20(base58) == "0x" + hex20
    assert to_hex21(base58) == "41" + hex20
    assert to_base58("0x" + hex20) == base58
    assert to_base58("41" + hex20.upper()) == base58
    assert to_base58(base58) == base58 and is_base58(base58)
    assert watch_key(base58) == "0x" + hex20  # what watchers and payment code compare
    assert check_address(base58, "tron") == base58


def test_bip44_coin_195_derivation_matches_bip_utils_vectors():
    # the mnemonic really is the one the seed stands for (BIP39's standard vector)
    assert Bip39SeedGenerator("abandon " * 11 + "about").Generate().hex() == BU_SEED.hex()
    account = Bip44.FromSeed(BU_SEED, Bip44Coins.TRON).Purpose().Coin().Account(0)
    assert account.PublicKey().ToExtended() == BU_XPUB
    # the shop's own derivation, from the account xpub alone
    assert [derive_address(BU_XPUB, "tron", i) for i in range(5)] == BU_ADDRESSES
    assert account.Change(Bip44Changes.CHAIN_EXT).AddressIndex(0).PublicKey().ToAddress() == BU_ADDRESSES[0]
    for address in BU_ADDRESSES:
        assert to_base58(to_hex20(address)) == address and check_address(address, "tron") == address


@pytest.mark.parametrize(("private_key", "address"), WC_KEYS)
def test_wallet_core_public_key_vectors(private_key, address):
    public = Secp256k1PrivateKey.FromBytes(bytes.fromhex(private_key)).PublicKey()
    assert TrxAddrEncoder.EncodeKey(public) == address
    assert to_base58(to_hex20(address)) == address


# --- refusals -------------------------------------------------------------------------------------------------


def _flip_checksum(address: str) -> str:
    raw = Base58Decoder.Decode(address)
    return Base58Encoder.Encode(raw[:-1] + bytes([raw[-1] ^ 1]))


def test_a_bad_checksum_is_refused():
    for good, _hex in PAIRS:
        bad = _flip_checksum(good)
        assert len(bad) == 34 and bad != good
        with pytest.raises(TronAddressError, match="checksum"):
            to_hex20(bad)
        with pytest.raises(AddressCheckError):
            check_address(bad, "tron")
        assert not is_base58(bad)
        assert watch_key(bad) == bad.lower()  # compared as typed, it matches no deposit address
    # wallet-core's invalid ones (WC TronAddress.Invalid)
    for text in ("abc", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "175tWpb8K1S7NmH4Zx6rewF9WQrcZv245W",
                 "2MegQ6oqSda2tTagdEzBA"):
        with pytest.raises(AddressCheckError):
            check_address(text, "tron")
    # one typed character wrong in the vector address
    with pytest.raises(AddressCheckError, match="checksum"):
        check_address("TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdh", "tron")


def test_a_wrong_version_byte_is_refused():
    body = bytes.fromhex(PAIRS[0][1])
    for version in (0x00, 0x05, 0x42, 0xA0):
        text = Base58Encoder.CheckEncode(bytes([version]) + body)
        with pytest.raises(TronAddressError):
            to_hex20(text)
        with pytest.raises(AddressCheckError):
            check_address(text, "tron")
    # a T… of the right length whose payload is valid Base58Check but not 0x41 + 20 bytes
    lookalike = next(Base58Encoder.CheckEncode(bytes([v]) + body) for v in range(0x41, 0x50)
                     if Base58Encoder.CheckEncode(bytes([v]) + body).startswith("T") and v != 0x41)
    with pytest.raises(TronAddressError, match="version byte"):
        to_hex20(lookalike)


def test_wrong_lengths_are_refused():
    good, hex20 = PAIRS[0]
    for text in (good[:-1], good + "1", "0x" + hex20[:-2], "0x" + hex20 + "00", "41" + hex20[:-2], "41" + hex20 + "0",
                 "", "T"):
        with pytest.raises(TronAddressError):
            to_hex20(text)
    short = Base58Encoder.CheckEncode(b"\x41" + bytes.fromhex(hex20)[:-1])  # 19 bytes behind the version byte
    with pytest.raises((TronAddressError, AddressCheckError)):
        check_address(short, "tron")
    with pytest.raises(TronAddressError):
        to_hex20(short)
    # check_address wants the T… form a wallet shows, not the hex ones the codec also reads
    for text in ("41" + hex20, "0x" + hex20):
        with pytest.raises(AddressCheckError, match="34 characters"):
            check_address(text, "tron")
    with pytest.raises(AddressCheckError, match="zero address"):
        check_address(to_base58("0x" + "00" * 20), "tron")


# --- transaction ids --------------------------------------------------------------------------------------------

# TD block-and-tx-query/eth_getTransactionByHash.md: the Nile transaction, 0x-prefixed as the JSON-RPC writes it,
# and the same 64 digits without 0x in its Nile TRONSCAN link.
TD_TXID = "0x01b4cde4197b9d1a1ff09ef5d2b1d939d3ec2401b3f002ebd0802c0f30a6e4ca"


def test_tron_txids_normalise_to_the_json_rpc_form():
    assert normalise_txid(TD_TXID, chain="tron") == TD_TXID
    assert normalise_txid(TD_TXID[2:], chain="tron") == TD_TXID  # as TRONSCAN shows it
    assert normalise_txid("  " + TD_TXID[2:].upper() + "\n", chain="tron") == TD_TXID
    assert normalise_txid("0X" + TD_TXID[2:], chain="tron") == TD_TXID


@pytest.mark.parametrize("text", ["", TD_TXID[:-1], TD_TXID + "0", TD_TXID[2:] + "00", "0x" + "g" * 64,
                                  "0x" + "0" * 64, "0" * 64, "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"])
def test_bad_tron_txids_are_refused(text):
    with pytest.raises(TxIdError):
        normalise_txid(text, chain="tron")


def test_a_tron_txid_is_not_taken_as_bitcoin_or_ethereum_by_mistake():
    # the same 64 digits are a valid Bitcoin id (no 0x) and, with 0x, an EVM hash: the asset's family decides
    assert normalise_txid(TD_TXID[2:], chain="btc") == TD_TXID[2:]
    with pytest.raises(TxIdError):
        normalise_txid(TD_TXID[2:], chain="evm")
