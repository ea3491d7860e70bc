"""About how long an asset's confirmations take: a per-network rule of thumb, stated to the customer as an
estimate (blocks come at random; a Bitcoin block can take an hour). Pure: no Django, no clock.

The estimate is one block for the transfer to be included and one more block per confirmation after the
first, at the network's average block time, rounded up to whole minutes. Under a finality tag ("safe" or
"finalized", ``Asset.finality``) it is the time the network takes to tag a block, plus a block per
confirmation after the first."""

from __future__ import annotations

import math
from datetime import timedelta

# Average seconds between blocks, by the asset's ``network`` (Asset.network).
BLOCK_SECONDS = {
    "bitcoin": 600, "bitcoin-testnet": 600, "testnet": 600, "testnet4": 600, "signet": 600,
    "ethereum": 12, "sepolia": 12, "holesky": 12, "hoodi": 12,
    "polygon": 2, "base": 2, "optimism": 2, "arbitrum": 1, "bsc": 3, "tron": 3,
}
# A network not listed: by its address scheme ("btc": Bitcoin's ten minutes, "evm": Ethereum's twelve seconds).
SCHEME_BLOCK_SECONDS = {"btc": 600, "evm": 12, "tron": 3}
# About how long after a block is made the node tags it, in seconds. Ethereum: "safe" once its epoch is
# justified (about one epoch of 32 slots), "finalized" two epochs on. An optimistic rollup (Base, OP,
# Arbitrum One): "safe" once its batch is posted to Ethereum, "finalized" once that Ethereum block is
# finalized, about 20 minutes in all. Polygon PoS: a milestone finalizes blocks within seconds. BNB Smart
# Chain: fast finality votes finalize a block about two blocks on. TRON: a block is solidified once 19 of the
# 27 super representatives have built on it, about 19 blocks of three seconds.
TAG_SECONDS = {
    "safe": {"ethereum": 7 * 60, "sepolia": 7 * 60, "holesky": 7 * 60, "hoodi": 7 * 60,
             "base": 5 * 60, "optimism": 5 * 60, "arbitrum": 5 * 60, "polygon": 10, "bsc": 6, "tron": 60},
    "finalized": {"ethereum": 13 * 60, "sepolia": 13 * 60, "holesky": 13 * 60, "hoodi": 13 * 60,
                  "base": 20 * 60, "optimism": 20 * 60, "arbitrum": 20 * 60, "polygon": 10, "bsc": 6, "tron": 60},
}
# A tagged network not listed: Ethereum's figure for an EVM network, TRON's for TRON.
SCHEME_TAG_NETWORK = {"evm": "ethereum", "tron": "tron"}


def block_seconds(*, network: str, chain: str) -> int:
    return BLOCK_SECONDS.get((network or "").strip().lower(), SCHEME_BLOCK_SECONDS.get(chain, 600))


def confirmation_estimate(*, confirmations: int, network: str, chain: str, finality: str = "depth") -> timedelta:
    """About how long from sending until ``confirmations`` confirmations (at least one minute); with a finality
    tag, counted from the tagged block."""
    blocks = max(1, confirmations)
    seconds = blocks * block_seconds(network=network, chain=chain)
    tagged = TAG_SECONDS.get(finality)
    if tagged is not None and chain in SCHEME_TAG_NETWORK:
        lag = tagged.get((network or "").strip().lower(), tagged[SCHEME_TAG_NETWORK[chain]])
        seconds = lag + (blocks - 1) * block_seconds(network=network, chain=chain)
    return timedelta(minutes=max(1, math.ceil(seconds / 60)))
