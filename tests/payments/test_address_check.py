"""Refund addresses a customer types: checked per network, canonical form returned."""

import pytest

from anchorgpu.payments.address_check import AddressCheckError, check_address
from anchorgpu.payments.uri import payment_uri, whole_units

ETH = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"  # BIP44 vector, EIP-55 checksummed


@pytest.mark.parametrize("text, scheme, expected", [
    (ETH, "evm", ETH),
    (ETH.lower(), "evm", ETH),  # all lower case carries no checksum: accepted, returned checksummed
    ("0x" + ETH[2:].upper(), "evm", ETH),
    ("bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", "btc", "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"),
    ("BC1QCR8TE4KR609GCAWUTMRZA0J4XV80JY8Z306FYU", "btc", "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"),
    ("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", "btc", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"),
    ("3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy", "btc", "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy"),
])
def test_good_addresses(text, scheme, expected):
    assert check_address(f"  {text} ", scheme) == expected


@pytest.mark.parametrize("text, scheme, fragment", [
    ("", "evm", "Give an address"),
    (ETH[:-1], "evm", "40 hexadecimal"),
    (ETH[:-1] + "5", "evm", "checksum"),  # one wrong digit in a checksummed address
    ("0x" + "0" * 40, "evm", "zero address"),
    ("bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyv", "btc", "checksum"),
    ("tb1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", "btc", "not a valid Bitcoin address"),
    ("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3", "btc", "not a valid Bitcoin address"),
    (ETH, "btc", "not a valid Bitcoin address"),
    ("x" * 200, "btc", "too long"),
])
def test_bad_addresses(text, scheme, fragment):
    with pytest.raises(AddressCheckError, match=fragment):
        check_address(text, scheme)


def test_payment_uris_carry_the_exact_amount():
    assert whole_units(150_000, 8) == "0.0015" and whole_units(10**18, 18) == "1" and whole_units(0, 6) == "0"
    assert payment_uri(scheme="btc", address="bc1qx", amount=150_000, decimals=8) == "bitcoin:bc1qx?amount=0.0015"
    assert (payment_uri(scheme="evm", address=ETH, amount=2 * 10**18 + 1, decimals=18, chain_id=1)
            == f"ethereum:{ETH}@1?value=2000000000000000001")
    token = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"
    assert (payment_uri(scheme="evm", address=ETH, amount=2_500_000, decimals=6, chain_id=1, contract=token)
            == f"ethereum:{token}@1/transfer?address={ETH}&uint256=2500000")
