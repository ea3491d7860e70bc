"""Bitcoin orders watched through an Esplora-compatible explorer: recorded
testnet transactions paying addresses derived from the test account's vpub,
served by a local explorer, moving orders through the same evaluation."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from anchorgpu.audit.models import AuditEntry
from anchorgpu.chains.bitcoin import REGTEST_POW_LIMIT_BITS
from anchorgpu.chains.esplora import BitcoinWatcher
from anchorgpu.payments.claim_check import claim_check
from anchorgpu.payments.models import Asset, ClaimCheck, DepositKey, Quote, Rate, Transfer
from anchorgpu.payments.services import payment_claim
from anchorgpu.payments.watch import watch_poll
from tests import shop
from tests.chains.esplora_server import build_scenario, load_fixture
from tests.chains.watch_support import fresh

pytestmark = pytest.mark.django_db
O = ClaimCheck.Outcome
VPUB = load_fixture("tx_9fca06b2.json")["account_key"]
PAYMENT = "9fca06b2a6469d401f33ef86d29ea4cdd832c35e6384f5df663e9fd4a95df3ac"  # 1,000,000 sat to index 0
SECOND = "101d6d29a22043907181f7c3b32d06b6408ee5898b8e5c83ccc5efbed47375cb"  # 1,000,000 sat to index 0, same block
TO_INDEX_1 = "0ada6fe8491ccb96a9533a50a69a67472f7c0e996ba51e645516bed8bf11e48e"  # 100,000 sat to index 1
IN_MEMPOOL = "1204fb4785c2e31d5851036fe2684d198f8c5809143740a997f29ca23f2e472d"  # 100,000 sat to index 0


@pytest.fixture
def explorer():
    server, blocks, _recorded = build_scenario()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def testnet(settings):
    settings.ANCHORGPU_WATCH_LOOKBACK = 2  # the local explorer holds three blocks
    shop.load_shop()
    asset = Asset.objects.create(code="btc-testnet", symbol="tBTC", name="Bitcoin testnet", network="testnet",
                                 network_name="Bitcoin testnet", scheme="btc-testnet", decimals=8,
                                 confirmations_required=2, position=5)
    DepositKey.objects.create(scheme="btc-testnet", extended_public_key=VPUB, label="BIP84 test vector")
    Rate.objects.create(asset=asset, currency="USD", price=Decimal("90000"), source="test",
                        observed_at=timezone.now() - timedelta(minutes=1))
    return asset


def watcher(server) -> BitcoinWatcher:
    return BitcoinWatcher(base_url=server.url, network="testnet", timeout=5, pow_limit_bits=REGTEST_POW_LIMIT_BITS)


def order_for(amount: int, user):
    order = shop.place(user, asset="btc-testnet")
    Quote.objects.filter(pk=order.quote.pk).update(amount=amount, tolerance=0)
    return fresh(order)


def test_payments_to_derived_addresses_pay_and_underpay(explorer, testnet):
    alice = shop.customer()
    paid = order_for(2_000_000, alice)  # address index 0: two real payments of 1,000,000 sat arrive
    short = order_for(1_000_000, shop.customer("bob@example.com"))  # index 1: one real payment of 100,000 sat
    assert paid.quote.address == "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl"
    report = watch_poll(testnet, watcher=watcher(explorer))
    assert report.ok and report.found == 3 and report.scanned == (2500000, 2500002)
    rows = {(t.txid, t.index): t for t in Transfer.objects.all()}
    assert {k[0] for k in rows} == {PAYMENT, SECOND, TO_INDEX_1}
    assert all(t.confirmations == 2 and t.chain == "testnet" and t.source == "watcher" for t in rows.values())
    assert fresh(paid).state == "paid" and fresh(paid).invoice.crypto_amount == 2_000_000
    short = fresh(short)
    assert short.state == "underpaid" and sum(t.amount for t in short.transfers.all()) == 100_000


def test_a_claimed_transaction_in_the_mempool_is_recorded_unconfirmed(explorer, testnet):
    order = order_for(100_000, shop.customer())
    order = payment_claim(order=order, actor="alice", txid=IN_MEMPOOL)
    check = claim_check(order=order, watcher=watcher(explorer))
    assert (check.outcome, check.confirmations, check.required) == (O.FOUND, 0, 2)
    row = Transfer.objects.get(order=order)
    assert (row.amount, row.block_number, row.confirmations) == (100_000, None, 0)
    assert fresh(order).state == "payment_claimed"  # never counted before it has its confirmations


def test_data_that_does_not_hash_to_the_claimed_id_is_rejected(explorer, testnet):
    order = order_for(1_000_000, shop.customer())
    hex_ = explorer.transactions[PAYMENT]
    tampered = hex_.replace("40420f00", "80841e00", 1)  # 1,000,000 sat made into 2,000,000 in the output
    assert tampered != hex_
    explorer.override(f"/tx/{PAYMENT}/hex", body=tampered)
    order = payment_claim(order=order, actor="alice", txid=PAYMENT)
    check = claim_check(order=order, watcher=watcher(explorer))
    assert check.outcome == O.BAD_DATA
    assert not Transfer.objects.exists() and fresh(order).state == "payment_claimed"


def test_a_mempool_transfer_that_disappears_is_withdrawn(explorer, testnet):
    order = order_for(100_000, shop.customer())
    order = payment_claim(order=order, actor="alice", txid=IN_MEMPOOL)
    claim_check(order=order, watcher=watcher(explorer))
    watch_poll(testnet, watcher=watcher(explorer))  # (it also finds the two mined payments to this address)
    row = Transfer.objects.get(order=order, txid=IN_MEMPOOL)
    assert row.withdrawn_at is None  # still waiting in the mempool: kept
    del explorer.transactions[IN_MEMPOOL]  # double-spent, or replaced by fee
    report = watch_poll(testnet, watcher=watcher(explorer))
    assert report.ok and report.withdrawn == 1
    row.refresh_from_db()
    assert row.withdrawn_at is not None
    entry = AuditEntry.objects.get(object_id=str(order.pk), action="transfer_withdrawn")
    assert "never mined and the node no longer knows it" in entry.reason
    assert fresh(order).state == "paid"  # by the two mined payments, which stay
    assert Transfer.objects.filter(order=order, withdrawn_at__isnull=True).count() == 2
