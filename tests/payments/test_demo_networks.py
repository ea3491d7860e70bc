"""The demo's payment catalog: each stablecoin on each network an operator would enable, with that network's
own token contract, decimals, chain id and finality rule, and a TRON deposit key from the public test mnemonic."""

from __future__ import annotations

import pytest
from bip_utils import Base58Decoder, Bip39SeedGenerator, Bip44, Bip44Changes, Bip44Coins
from eth_utils import is_checksum_address

from anchorgpu.chains import tron_address
from anchorgpu.payments import demo
from anchorgpu.payments.addresses import derive_address
from anchorgpu.payments.demo import load_payments
from anchorgpu.payments.models import Asset, DepositKey, Rate

pytestmark = pytest.mark.django_db

TEST_MNEMONIC = " ".join(["abandon"] * 11 + ["about"])  # BIP39's published test mnemonic


def test_every_coin_is_loaded_on_each_of_its_networks():
    load_payments()
    pairs = {(a.symbol, a.network) for a in Asset.objects.filter(is_active=True)}
    assert pairs == {("BTC", "bitcoin"), ("ETH", "ethereum"),
                     ("USDT", "ethereum"), ("USDT", "tron"), ("USDT", "arbitrum"), ("USDT", "polygon"),
                     ("USDT", "bsc"),
                     ("USDC", "ethereum"), ("USDC", "base"), ("USDC", "arbitrum"), ("USDC", "polygon"),
                     ("USDC", "bsc")}
    # Circle no longer supports USDC on TRON; Tether issues no USDT on Base.
    assert not Asset.objects.filter(symbol="USDC", network="tron").exists()
    assert not Asset.objects.filter(symbol="USDT", network="base").exists()
    for asset in Asset.objects.all():  # every asset can be quoted: it has a rate
        assert Rate.objects.filter(asset=asset, currency="USD").exists(), asset.code


def test_each_network_has_its_chain_id_standard_and_finality():
    load_payments()
    rows = {a.code: a for a in Asset.objects.all()}
    assert {code: a.chain_id for code, a in rows.items() if a.symbol == "USDC"} == {
        "usdc-ethereum": 1, "usdc-base": 8453, "usdc-arbitrum": 42161, "usdc-polygon": 137, "usdc-bsc": 56}
    assert rows["usdt-tron"].chain_id == 0x2B6653DC == 728126428
    assert rows["usdt-tron"].scheme == "tron" and rows["usdt-tron"].network_name == "TRON (TRC-20)"
    assert rows["usdt-bsc"].network_name == "BNB Smart Chain (BEP-20)"
    assert rows["usdt-ethereum"].network_name == rows["usdc-ethereum"].network_name == "Ethereum mainnet (ERC-20)"
    # Binance-Peg tokens have 18 decimals on BNB Smart Chain; the others 6.
    assert {code: a.decimals for code, a in rows.items() if a.network == "bsc"} == {"usdt-bsc": 18, "usdc-bsc": 18}
    assert {a.decimals for a in rows.values() if a.symbol in ("USDT", "USDC") and a.network != "bsc"} == {6}
    # Ethereum keeps twelve blocks; the others count from the finalized block.
    for code in ("eth", "usdc-ethereum", "usdt-ethereum"):
        assert (rows[code].finality, rows[code].confirmations_required) == ("depth", 12), code
    for code in ("usdt-tron", "usdc-base", "usdc-arbitrum", "usdt-arbitrum", "usdc-polygon", "usdt-polygon",
                 "usdc-bsc", "usdt-bsc"):
        assert (rows[code].finality, rows[code].confirmations_required) == ("finalized", 1), code


def test_token_contracts_are_well_formed_and_differ_per_network():
    load_payments()
    tokens = Asset.objects.exclude(contract="")
    contracts = [a.contract for a in tokens]
    assert len(set(contracts)) == len(contracts) == 10
    for asset in tokens:
        if asset.scheme == "evm":
            assert is_checksum_address(asset.contract), asset.code  # the EIP-55 mixed case as published
        else:
            raw = Base58Decoder.CheckDecode(asset.contract)  # raises on a bad checksum
            assert raw[0] == 0x41 and len(raw) == 21 and asset.contract.startswith("T")
            assert tron_address.is_base58(asset.contract) and tron_address.to_hex21(asset.contract) == raw.hex()
    assert Asset.objects.get(code="usdt-tron").contract == "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"


def test_the_tron_deposit_key_is_the_test_mnemonics_public_account_key():
    load_payments()
    key = DepositKey.objects.get(scheme="tron")
    assert key.extended_public_key in demo.PUBLIC_TEST_KEYS
    seed = Bip39SeedGenerator(TEST_MNEMONIC).Generate()
    account = Bip44.FromSeed(seed, Bip44Coins.TRON).Purpose().Coin().Account(0)
    assert account.PublicKey().ToExtended() == key.extended_public_key
    first = derive_address(key.extended_public_key, "tron", 0)
    assert first == account.Change(Bip44Changes.CHAIN_EXT).AddressIndex(0).PublicKey().ToAddress()
    assert first.startswith("T")


def test_loading_twice_keeps_one_row_per_asset_and_key():
    load_payments()
    load_payments()
    assert Asset.objects.count() == len(demo.ASSETS)
    assert sorted(DepositKey.objects.values_list("scheme", flat=True)) == ["btc", "evm", "tron"]
