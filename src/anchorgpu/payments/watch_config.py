"""Which node or explorer watches an asset, and the adapter that reads it."""

from __future__ import annotations

import os

from django.conf import settings

from anchorgpu.chains.base import ChainUnavailable, Watcher

from .addresses import Scheme
from .models import Asset


def env_name(asset: Asset) -> str:
    return "ANCHORGPU_WATCH_URL_" + asset.code.upper().replace("-", "_")


def watch_url(asset: Asset) -> str:
    """The environment wins over the admin, so a URL holding an API key need not be stored."""
    return (os.environ.get(env_name(asset)) or asset.watch_url or "").strip()


_URL_PROBLEMS = {"scheme": "must start with http:// or https://", "spaces": "must not contain spaces"}


def check_url(url: str) -> str | None:
    """Why ``url`` cannot be a watch URL ("scheme" or "spaces"), or None."""
    if not url.startswith(("http://", "https://")):
        return "scheme"
    if any(c.isspace() for c in url):
        return "spaces"
    return None


def watcher_for(asset: Asset, *, timeout: float | None = None) -> Watcher | None:
    """The adapter for ``asset``, or None when no URL is configured (an operator checks by hand).
    A configured but unusable URL raises ``ChainUnavailable`` like a node that is down."""
    url = watch_url(asset)
    if not url:
        return None
    problem = check_url(url)
    if problem:
        raise ChainUnavailable(f"the watch URL {_URL_PROBLEMS[problem]}", endpoint=env_name(asset))
    timeout = float(timeout or settings.ANCHORGPU_WATCH_TIMEOUT)
    if asset.scheme == Scheme.EVM:
        from anchorgpu.chains.evm import EvmWatcher

        if not asset.chain_id:
            raise ChainUnavailable("the asset has no EVM chain id", endpoint=asset.code)
        return EvmWatcher.for_url(url, chain_id=asset.chain_id, contract=asset.contract, network=asset.network,
                                  timeout=timeout, decimals=asset.decimals, finality=asset.finality)
    from anchorgpu.chains.esplora import BitcoinWatcher

    network = "testnet" if asset.scheme == Scheme.BTC_TESTNET else "bitcoin"
    return BitcoinWatcher(base_url=url, network=network, timeout=timeout)
