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
