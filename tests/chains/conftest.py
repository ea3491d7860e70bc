"""EVM chain fixtures: anvil (one node per session, a snapshot per test) and eth-tester (fresh per test).

None of them touch the database. Helpers to deploy the test token, mint, transfer and mine
are in ``tests.chains.evm_support``.
"""

from __future__ import annotations

import os

import pytest
from web3 import Web3
from web3.providers.eth_tester import EthereumTesterProvider

from tests.chains import evm_support


def _under_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _anvil_binary() -> str:
    """The anvil binary; a missing one skips the test with the install command -- except under CI, where it
    fails."""
    try:
        return evm_support.find_anvil()
    except evm_support.AnvilMissing as exc:
        if _under_ci():
            pytest.fail(f"{exc}. Under CI the anvil tests must run, not skip.", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def anvil_url():
    """The URL of an anvil node on 127.0.0.1 (chain id 31337, automine), running for the whole session.

    A missing binary skips the test with the install command -- except under CI, where it fails.
    """
    binary = _anvil_binary()
    node = evm_support.AnvilNode(binary)
    node.start()
    try:
        yield node.url
    finally:
        node.stop()


@pytest.fixture
def anvil_w3(anvil_url):
    """web3 on the session's anvil node; whatever the test mines is reverted afterwards."""
    w3 = evm_support.anvil_web3(anvil_url)
    snap = evm_support.snapshot(w3)
    # anvil's revert leaves its fee market where the test left it: after many empty blocks the base fee sinks
    # to its floor, and a transaction sent again after a reorg gets the very same hash. Put it back too.
    next_base_fee = w3.eth.fee_history(1, "latest")["baseFeePerGas"][-1]
    try:
        yield w3
    finally:
        evm_support.revert(w3, snap)
        w3.manager.request_blocking("anvil_setNextBlockBaseFeePerGas", [hex(next_base_fee)])


@pytest.fixture
def tester_w3():
    """web3 on a fresh in-process eth-tester chain."""
    return Web3(EthereumTesterProvider())


@pytest.fixture(params=["anvil", "eth-tester"])
def evm_w3(request):
    """Runs the test once on anvil and once on eth-tester."""
    return request.getfixturevalue("anvil_w3" if request.param == "anvil" else "tester_w3")


@pytest.fixture(scope="session")
def network_nodes():
    """One anvil node per EVM network of ``networks_support.NETWORKS``, each with that network's chain id,
    running for the whole session (stopped by their own processes' ids): slug -> URL."""
    from tests.chains.networks_support import NETWORKS, SLOTS_IN_AN_EPOCH

    binary = _anvil_binary()
    nodes = {}
    try:
        for network in NETWORKS:
            node = evm_support.AnvilNode(binary, chain_id=network.chain_id,
                                         extra_args=("--slots-in-an-epoch", str(SLOTS_IN_AN_EPOCH)))
            nodes[network.slug] = node
            node.start()
        yield {slug: node.url for slug, node in nodes.items()}
    finally:
        for node in nodes.values():
            node.stop()


def _anvil_kept(w3):
    """Snapshot a node and its fee market; returns the function that puts both back (see ``anvil_w3``)."""
    snap = evm_support.snapshot(w3)
    next_base_fee = w3.eth.fee_history(1, "latest")["baseFeePerGas"][-1]

    def back():
        evm_support.revert(w3, snap)
        w3.manager.request_blocking("anvil_setNextBlockBaseFeePerGas", [hex(next_base_fee)])
    return back


@pytest.fixture
def anvil_networks(network_nodes):
    """slug -> (web3, URL) on the session's nodes; whatever the test mines is reverted afterwards."""
    chains = {slug: (evm_support.anvil_web3(url), url) for slug, url in network_nodes.items()}
    restore = [_anvil_kept(w3) for w3, _url in chains.values()]
    try:
        yield chains
    finally:
        for back in restore:
            back()


@pytest.fixture
def tester_networks():
    """slug -> (web3, "") on one fresh in-process eth-tester chain per network."""
    from tests.chains.networks_support import NETWORKS

    return {network.slug: (Web3(EthereumTesterProvider()), "") for network in NETWORKS}


@pytest.fixture(params=["anvil", "eth-tester"])
def evm_networks(request):
    """Runs the test once on anvil nodes and once on eth-tester chains."""
    return request.getfixturevalue("anvil_networks" if request.param == "anvil" else "tester_networks")
