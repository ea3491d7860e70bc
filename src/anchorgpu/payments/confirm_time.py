"""About how long an asset's confirmations take: a per-network rule of thumb, stated to the customer as an
estimate (blocks come at random; a Bitcoin block can take an hour). Pure: no Django, no clock.

The estimate is one block for the transfer to be included and one more block per confirmation after the
first, at the network's average block time, rounded up to whole minutes."""

from __future__ import annotations

import math
from datetime import timedelta

# Average seconds between blocks, by the asset's ``network`` (Asset.network).
BLOCK_SECONDS = {
    "bitcoin": 600, "bitcoin-testnet": 600, "testnet": 600, "testnet4": 600, "signet": 600,
    "ethereum": 12, "sepolia": 12, "holesky": 12, "hoodi": 12,
    "polygon": 2, "base": 2, "optimism": 2, "arbitrum": 1, "bsc": 3,
}
# A network not listed: by its address scheme ("btc": Bitcoin's ten minutes, "evm": Ethereum's twelve seconds).
SCHEME_BLOCK_SECONDS = {"btc": 600, "evm": 12}


def block_seconds(*, network: str, chain: str) -> int:
    return BLOCK_SECONDS.get((network or "").strip().lower(), SCHEME_BLOCK_SECONDS.get(chain, 600))


def confirmation_estimate(*, confirmations: int, network: str, chain: str) -> timedelta:
    """About how long from sending until ``confirmations`` confirmations (at least one minute)."""
    blocks = max(1, confirmations)
    seconds = blocks * block_seconds(network=network, chain=chain)
    return timedelta(minutes=max(1, math.ceil(seconds / 60)))
