"""Fixtures and names for the TRON tests: a shape server per test, the USDT contract and a look-alike."""

from __future__ import annotations

import pytest

from anchorgpu.chains.tron_address import to_hex20
from tests.chains.tron_node import TronNode

# TRON mainnet USDT (Tether's TRC-20 contract), Base58Check and the 20-byte form TRON's JSON-RPC uses.
USDT = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
USDT_HEX = to_hex20(USDT)
# Another TRC-20 contract (Nile testnet USDT, from java-tron's ApiUtilTest): a different token on this chain.
OTHER = "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf"
OTHER_HEX = to_hex20(OTHER)
PAYER = "0x" + "5a" * 20


@pytest.fixture
def tron_node():
    """A started shape server with USDT (6 decimals) and the other token deployed; stopped at teardown."""
    node = TronNode().start()
    node.chain.deploy(USDT_HEX, 6)
    node.chain.deploy(OTHER_HEX, 6)
    try:
        yield node
    finally:
        node.stop()
