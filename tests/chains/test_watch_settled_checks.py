"""How often settled transfers are looked at again, and a node that fails
those reads: it costs only that check, never the finding of new payments."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from anchorgpu.chains.base import ChainUnavailable
from anchorgpu.chains.evm import EvmWatcher
from anchorgpu.payments.models import Transfer
from anchorgpu.payments.settled_check import RECHECK_EVERY, RECHECK_FOR
from anchorgpu.payments.watch import watch_poll
from tests.chains.watch_support import ChainShop, fresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain(anvil_w3, anvil_url):
    return ChainShop(anvil_w3, url=anvil_url)


def test_a_settled_transfer_is_checked_again_once_its_interval_has_passed(chain):
    order = chain.paid()
    assert Transfer.objects.get(order=order).rechecked_at is None  # settled in this poll: not checked yet
    now = timezone.now()
    chain.mine(1)
    chain.poll("eth", now=now)
    first = Transfer.objects.get(order=order).rechecked_at
    assert first == now
    chain.mine(1)
    chain.poll("eth", now=now + RECHECK_EVERY / 2)
    assert Transfer.objects.get(order=order).rechecked_at == first  # checked a moment ago: left alone
    chain.mine(1)
    later = now + RECHECK_EVERY + timedelta(seconds=1)
    chain.poll("eth", now=later)
    row = Transfer.objects.get(order=order)
    assert row.rechecked_at == later and row.withdrawn_at is None and not fresh(order).chain_alert


def test_a_transfer_credited_longer_ago_than_the_window_is_no_longer_checked(chain):
    order = chain.paid()
    Transfer.objects.filter(order=order).update(created_at=timezone.now() - RECHECK_FOR - timedelta(minutes=1))
    chain.mine(1)
    chain.poll("eth")
    assert Transfer.objects.get(order=order).rechecked_at is None


class NoReceipts(EvmWatcher):
    """A node whose receipt reads fail (they are only needed for recorded transfers here)."""

    def locate(self, txids):
        raise ChainUnavailable("eth_getTransactionReceipt: 503 Service Unavailable")


def test_a_node_failing_the_settled_reads_still_finds_new_payments(chain, anvil_w3):
    settled = chain.paid()
    chain.mine(1)
    newcomer = chain.place("eth")
    chain.send(newcomer, newcomer.quote.amount)
    asset = chain.asset("eth")
    report = watch_poll(asset, watcher=NoReceipts.for_web3(anvil_w3, chain_id=asset.chain_id, network=asset.network))
    assert not report.ok and "settled transfers not checked" in report.error and "503" in report.error
    assert Transfer.objects.filter(order=newcomer).count() == 1  # found all the same
    row = Transfer.objects.get(order=settled)
    assert row.rechecked_at is None and row.withdrawn_at is None and not fresh(settled).chain_alert
