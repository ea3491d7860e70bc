"""How long an asset's confirmations take, as the order page states it: one block per confirmation at the
network's average block time (an estimate), in whole minutes."""

from __future__ import annotations

from datetime import timedelta

from anchorgpu.payments.confirm_time import block_seconds, confirmation_estimate


def test_bitcoin_blocks_come_about_every_ten_minutes():
    assert confirmation_estimate(confirmations=2, network="bitcoin", chain="btc") == timedelta(minutes=20)
    assert confirmation_estimate(confirmations=6, network="bitcoin", chain="btc") == timedelta(hours=1)


def test_ethereum_blocks_every_twelve_seconds_rounded_up_to_minutes():
    assert confirmation_estimate(confirmations=12, network="ethereum", chain="evm") == timedelta(minutes=3)
    assert confirmation_estimate(confirmations=1, network="Ethereum", chain="evm") == timedelta(minutes=1)


def test_an_unknown_network_takes_its_schemes_block_time_and_zero_means_one_block():
    assert block_seconds(network="some-l2", chain="evm") == 12
    assert block_seconds(network="", chain="btc") == 600
    assert confirmation_estimate(confirmations=0, network="bitcoin", chain="btc") == timedelta(minutes=10)


def test_under_a_finality_tag_the_wait_is_the_networks_time_to_tag_a_block():
    finalized = {network: confirmation_estimate(confirmations=1, network=network, chain=chain, finality="finalized")
                 for network, chain in (("tron", "tron"), ("base", "evm"), ("arbitrum", "evm"), ("polygon", "evm"),
                                        ("bsc", "evm"), ("ethereum", "evm"))}
    assert finalized == {"tron": timedelta(minutes=1), "base": timedelta(minutes=20),
                         "arbitrum": timedelta(minutes=20), "polygon": timedelta(minutes=1),
                         "bsc": timedelta(minutes=1), "ethereum": timedelta(minutes=13)}
    # Confirmations after the first count blocks on top of the tagged one; "safe" comes before "finalized".
    assert confirmation_estimate(confirmations=21, network="tron", chain="tron", finality="finalized") == \
        timedelta(minutes=2)
    assert confirmation_estimate(confirmations=1, network="base", chain="evm", finality="safe") < finalized["base"]
    # An EVM network not listed takes Ethereum's figure; depth is what it was.
    assert confirmation_estimate(confirmations=1, network="some-l2", chain="evm", finality="finalized") == \
        timedelta(minutes=13)
    assert confirmation_estimate(confirmations=12, network="ethereum", chain="evm", finality="depth") == \
        timedelta(minutes=3)
