"""What a payment QR code holds on each kind of network: EIP-681 with the chain id on an EVM L2, so a wallet
cannot send the token on another chain; on TRON, which has no payment URI that wallets agree on, the bare
deposit address (the amount is typed by hand)."""

from __future__ import annotations

from anchorgpu.payments.demo import USDC_BASE, USDT_BSC
from anchorgpu.payments.uri import carries_amount, payment_uri

EVM_TO = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"
TRON_TO = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"


def test_an_l2_token_transfer_names_the_chain_the_contract_and_the_exact_base_units():
    uri = payment_uri(scheme="evm", address=EVM_TO, amount=25_000_000, decimals=6, chain_id=8453, contract=USDC_BASE)
    assert uri == f"ethereum:{USDC_BASE}@8453/transfer?address={EVM_TO}&uint256=25000000"
    # BNB Chain's 18-decimal USDT: the amount stays whole base units, however many digits.
    bsc = payment_uri(scheme="evm", address=EVM_TO, amount=25 * 10**18, decimals=18, chain_id=56, contract=USDT_BSC)
    assert bsc.endswith("@56/transfer?address=" + EVM_TO + "&uint256=25000000000000000000")
    assert carries_amount("evm") and carries_amount("btc")


def test_a_tron_code_holds_the_address_alone():
    uri = payment_uri(scheme="tron", address=TRON_TO, amount=25_000_000, decimals=6, chain_id=728126428,
                      contract="TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t")
    assert uri == TRON_TO
    assert not carries_amount("tron")
