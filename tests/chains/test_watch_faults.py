"""What goes wrong on chain and around it: a transfer whose block is replaced
before it has its confirmations, a node that is down or answers garbage, a
hash from another network. Against real anvil nodes over HTTP."""

from __future__ import annotations

import pytest

from anchorgpu.audit.models import AuditEntry
from anchorgpu.payments.claim_check import claim_check, claim_check_after_claim, describe
from anchorgpu.payments.models import Asset, ClaimCheck, Transfer, WatchState
from anchorgpu.payments.services import payment_claim
from anchorgpu.payments.watch import watch_poll
from anchorgpu.worker import run_once
from tests.chains import evm_support as evm
from tests.chains.junk_node import MODES, JunkNode
from tests.chains.watch_support import CONFIRMATIONS, ChainShop, fresh

pytestmark = pytest.mark.django_db
O = ClaimCheck.Outcome


@pytest.fixture
def chain(anvil_w3, anvil_url):
    return ChainShop(anvil_w3, url=anvil_url)


@pytest.mark.parametrize("code", ["eth", "usdc-ethereum"])
def test_a_transfer_whose_block_is_replaced_is_withdrawn_before_it_counts(chain, anvil_w3, code):
    order = chain.place(code)
    snap = evm.snapshot(anvil_w3)
    txid = chain.send(order, order.quote.amount)
    chain.mine(1)
    assert watch_poll(chain.asset(code)).found == 1  # through the configured URL this time
    row = Transfer.objects.get(order=order)
    assert row.confirmations == 2 and row.withdrawn_at is None

    evm.revert(anvil_w3, snap)  # the blocks holding the payment are replaced by others
    chain.mine(CONFIRMATIONS + 1)
    report = watch_poll(chain.asset(code))
    assert report.ok and report.withdrawn == 1
    row.refresh_from_db()
    assert row.withdrawn_at is not None and row.confirmations == 0
    assert fresh(order).state == "awaiting_payment"  # it never counted
    entry = AuditEntry.objects.get(object_id=str(order.pk), action="transfer_withdrawn")
    assert entry.data["block_hash"] == row.block_hash and "was replaced" in entry.reason

    # The customer pays again; the new transfer counts and the withdrawn one still does not.
    again = chain.send(order, order.quote.amount)
    chain.mine(CONFIRMATIONS)
    watch_poll(chain.asset(code))
    order = fresh(order)
    assert order.state == "paid" and again != txid
    assert order.invoice.crypto_amount == order.quote.amount and not order.refund_due


def test_a_payment_in_a_block_that_replaced_one_already_read_is_found(chain, anvil_w3):
    order = chain.place("eth")
    snap = evm.snapshot(anvil_w3)
    chain.mine(1)  # an empty block at height H+1, read by the poll
    first = watch_poll(chain.asset("eth"))
    height = anvil_w3.eth.block_number
    assert first.scanned[1] == height
    evm.revert(anvil_w3, snap)
    txid = chain.send(order, order.quote.amount)  # the new block at H+1 carries the payment
    assert anvil_w3.eth.get_transaction_receipt(txid)["blockNumber"] == height
    report = watch_poll(chain.asset("eth"))
    assert report.scanned == (height, height) and report.found == 1  # only the replaced block is read again
    assert Transfer.objects.get(order=order).txid == txid
    quiet = watch_poll(chain.asset("eth"))
    assert quiet.scanned is None and quiet.round_trips == 1  # no new block: one read of the tip


def junk_or_down(request):
    if request.param == "down":
        return "down", _closed_port()
    node = JunkNode(request.param).start()
    request.addfinalizer(node.stop)
    return request.param, node.url


def _closed_port() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v3/SECRETKEY123"


@pytest.fixture(params=["down", *MODES])
def bad_node(request):
    return junk_or_down(request)


REASONS = {"down": "connection refused", "html": "the answer is not JSON-RPC",
           "rpc_error": "eth_chainId failed in a batch: {'code': -32000, 'message': 'header not found'}",
           "bad_block": "malformed latest block: not a quantity: 0xzz", "http_500": "HTTP 500",
           "short_batch": "asked 2 questions in a batch, got 1 answers"}


def test_a_node_that_is_down_or_talks_garbage_decides_nothing(chain, bad_node, caplog):
    mode, url = bad_node
    order = chain.place("eth")
    txid = chain.send(order, order.quote.amount)  # a real payment, on the real node
    chain.mine(CONFIRMATIONS)
    Asset.objects.filter(code="eth").update(watch_url=url)
    order = payment_claim(order=order, actor="alice", txid=txid)

    check = claim_check_after_claim(order)
    assert check.outcome == O.UNAVAILABLE
    assert "could not reach the Ethereum mainnet node just now" in describe(check, order.quote.asset)
    for attempt in (1, 2):
        report = watch_poll(chain.asset("eth"))
        assert not report.ok and report.recorded == 0
        state = WatchState.objects.get(asset__code="eth")
        assert state.errors_in_row == attempt and state.last_success_at is None and state.last_error
        assert "SECRETKEY123" not in state.last_error  # the key in the URL is never shown or logged
        assert REASONS[mode] in state.last_error
    assert "SECRETKEY123" not in caplog.text
    assert fresh(order).state == "payment_claimed" and not Transfer.objects.exists()

    # The node is back: the same poll finds the payment.
    Asset.objects.filter(code="eth").update(watch_url=chain.url)
    report = watch_poll(chain.asset("eth"))
    assert report.ok and WatchState.objects.get(asset__code="eth").errors_in_row == 0
    assert fresh(order).state == "paid"


def test_a_hash_from_another_network_is_named(chain):
    other = evm.AnvilNode(evm.find_anvil(), chain_id=999)
    other.start()
    try:
        w3b = evm.anvil_web3(other.url)
        Asset.objects.create(code="eth-b", symbol="ETH", name="Ether", network="testnet-b",
                             network_name="Test network B", scheme="evm", chain_id=999, decimals=18,
                             confirmations_required=1, watch_url=other.url, position=9)
        order = chain.place("eth")
        txid = evm.send_eth(w3b, w3b.eth.accounts[1], order.quote.address, order.quote.amount)
        order = payment_claim(order=order, actor="alice", txid=txid)
        check = claim_check(order=order)
    finally:
        other.stop()
    assert check.outcome == O.WRONG_NETWORK and check.detail == {"network": "Test network B"}
    assert describe(check, order.quote.asset).startswith(
        "This transaction is on Test network B, not on Ethereum mainnet, which this order accepts.")
    assert not Transfer.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_worker_finds_payments_and_rechecks_claims(anvil_w3, anvil_url):
    # transactional: the worker closes stale connections between sweeps
    chain = ChainShop(anvil_w3, url=anvil_url)
    paid_silently = chain.place("usdc-ethereum")
    claimed = chain.place("eth")
    chain.send(paid_silently, paid_silently.quote.amount)
    txid = chain.send(claimed, claimed.quote.amount)
    payment_claim(order=claimed, actor="alice", txid=txid)
    chain.mine(CONFIRMATIONS)
    results = run_once()
    assert results["chains_poll"] == 2 and results["claims_recheck_due"] == 0  # the poll already paid it
    for order in (fresh(paid_silently), fresh(claimed)):
        # paid by the first sweep, then provisioned by a later one of the same round
        assert order.paid_at is not None and order.state == "active"
