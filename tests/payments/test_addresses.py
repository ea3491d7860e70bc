"""Deposit addresses from extended public keys, checked against the published test vectors."""

import pytest
from bip_utils import Bip39SeedGenerator, Bip84, Bip84Coins

from anchorgpu.payments.addresses import AddressError, check_account_key, derive_address

# BIP84's test vector, account 0 of the mnemonic "abandon … about".
ZPUB = ("zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz"
        "2AGutZYs")
BTC_RECEIVE = ["bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g"]
# BIP44 coin 60, account 0 of the same mnemonic; its first address is the widely published one.
XPUB_ETH = ("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3yZdUsT8"
            "ddYM3PwnATt")
ETH_FIRST = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"
MNEMONIC = "abandon " * 11 + "about"


def test_bip84_vectors():
    assert [derive_address(ZPUB, "btc", i) for i in range(2)] == BTC_RECEIVE


def test_bip44_ethereum_vector_and_checksum_case():
    assert derive_address(XPUB_ETH, "evm", 0) == ETH_FIRST


def test_fresh_indexes_give_distinct_addresses():
    addresses = {derive_address(ZPUB, "btc", i) for i in range(50)}
    assert len(addresses) == 50


def _zprv() -> str:
    seed = Bip39SeedGenerator(MNEMONIC).Generate()
    return Bip84.FromSeed(seed, Bip84Coins.BITCOIN).Purpose().Coin().Account(0).PrivateKey().ToExtended()


@pytest.mark.parametrize("key, scheme, index, words", [
    (None, "btc", 0, "PRIVATE"),  # the account's zprv
    ("zpub-not-a-key", "btc", 0, "Not a valid"),
    (ZPUB, "evm", 0, "Not a valid"),  # a zpub is no Ethereum key
    (ZPUB, "btc", -1, "index"),
    (ZPUB, "btc", 2**31, "index"),
])
def test_refusals(key, scheme, index, words):
    with pytest.raises(AddressError) as caught:
        derive_address(key or _zprv(), scheme, index)
    assert words in str(caught.value)


def test_only_the_account_level_key_is_accepted():
    seed = Bip39SeedGenerator(MNEMONIC).Generate()
    coin_level = Bip84.FromSeed(seed, Bip84Coins.BITCOIN).Purpose().Coin().PublicKey().ToExtended()
    with pytest.raises(AddressError, match="account-level"):
        check_account_key(coin_level, "btc")
    check_account_key(ZPUB, "btc")
