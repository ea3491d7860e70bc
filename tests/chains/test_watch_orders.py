"""The watcher finds payments to open orders and moves them through the
same evaluation an operator's record goes through: exact, short, over and
late payments in ETH and in a token, on anvil and on eth-tester."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from anchorgpu.allocation.models import Booking
from anchorgpu.audit.models import AuditEntry
from anchorgpu.payments.models import Quote, Transfer, WatchState
from tests.chains.watch_support import CONFIRMATIONS, ChainShop, fresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain(evm_w3):
    return ChainShop(evm_w3)


def states(order) -> list[str]:
    return list(AuditEntry.objects.filter(object_id=str(order.pk), action="order_state")
                .order_by("id").values_list("to_state", flat=True))


@pytest.mark.parametrize("code", ["eth", "usdc-ethereum"])
def test_an_exact_payment_counts_once_it_has_its_confirmations(chain, code):
    order = chain.place(code)
    quote = order.quote
    txid = chain.send(order, quote.amount)
    report = chain.poll(code)
    assert report.ok and report.found == 1 and report.watched == 1
    row = Transfer.objects.get(order=order)
    assert (row.txid, row.amount, row.confirmations, row.source) == (txid, quote.amount, 1, "watcher")
    block = chain.w3.eth.get_block(row.block_number)
    assert row.block_hash == block["hash"].to_0x_hex()
    # dated by its block (eth-tester's clock runs a few seconds ahead: never later than the poll)
    assert block["timestamp"] - 10 < row.seen_at.timestamp() <= block["timestamp"]
    assert fresh(order).state == "awaiting_payment"  # 1 of 3: not yet

    chain.mine(CONFIRMATIONS - 1)
    report = chain.poll(code)
    assert report.recorded == 1  # the same transfer, updated
    order = fresh(order)
    assert order.state == "paid" and order.invoice.crypto_amount == quote.amount
    assert Transfer.objects.get(order=order).confirmations == CONFIRMATIONS
    assert Transfer.objects.count() == 1  # found twice, recorded once


@pytest.mark.parametrize("code", ["eth", "usdc-ethereum"])
def test_a_short_payment_leaves_the_order_underpaid(chain, code):
    order = chain.place(code)
    quote = order.quote
    short = quote.amount - quote.tolerance - 1
    chain.send(order, short)
    chain.mine(CONFIRMATIONS)
    chain.poll(code)
    order = fresh(order)
    assert order.state == "underpaid"
    assert Transfer.objects.get(order=order).amount == short


@pytest.mark.parametrize("code", ["eth", "usdc-ethereum"])
def test_an_overpayment_is_paid_and_the_excess_is_owed_back(chain, code):
    order = chain.place(code)
    extra = order.quote.amount // 10
    chain.send(order, order.quote.amount + extra)
    chain.mine(CONFIRMATIONS)
    chain.poll(code)
    order = fresh(order)
    assert order.state == "paid" and order.refund_due
    assert order.excess == {"units": str(extra), "asset": code}


@pytest.mark.parametrize("code", ["eth", "usdc-ethereum"])
def test_a_payment_after_expiry_is_late_and_rechecks_the_cards(chain, code):
    order = chain.place(code)
    gone = timezone.now() - timedelta(minutes=1)  # the quote and the hold on the cards ran out a minute ago
    Quote.objects.filter(pk=order.quote.pk).update(expires_at=gone)
    Booking.objects.filter(pk=order.booking_id).update(expires_at=gone)
    chain.send(order, order.quote.amount)
    chain.mine(CONFIRMATIONS)
    chain.poll(code)
    order = fresh(order)
    assert states(order)[-2:] == ["paid_late", "paid"]  # the cards were still free: booked again
    assert order.booking.kind == "confirmed" and order.booking_id != Booking.objects.order_by("id").first().pk


def test_payments_in_a_second_transfer_add_up(chain):
    order = chain.place("eth")
    half = order.quote.amount // 2
    chain.send(order, half)
    chain.send(order, order.quote.amount - half)
    chain.mine(CONFIRMATIONS)
    chain.poll("eth")
    assert fresh(order).state == "paid" and Transfer.objects.filter(order=order).count() == 2


def test_a_look_alike_token_pays_nothing(chain, evm_w3):
    from tests.chains import evm_support as evm

    fake = evm.deploy_token(evm_w3, symbol="USDC")
    evm.mint(evm_w3, fake, chain.payer, 10**15)
    order = chain.place("usdc-ethereum")
    chain.send(order, order.quote.amount, token=fake)
    chain.mine(CONFIRMATIONS)
    report = chain.poll("usdc-ethereum")
    assert report.ok and report.found == 0
    assert fresh(order).state == "awaiting_payment" and not Transfer.objects.exists()


def test_coin_sent_by_no_visible_transaction_is_flagged_for_an_operator(chain, evm_w3, monkeypatch):
    monkeypatch.setattr("anchorgpu.payments.watch.BALANCE_EVERY_BLOCKS", 1)
    order = chain.place("eth")
    chain.send(order, order.quote.amount // 4)
    chain.poll("eth")
    assert fresh(order).quote.unattributed == 0  # all of it explained by the transfer found
    if hasattr(evm_w3.provider, "ethereum_tester"):
        return  # eth-tester cannot set a balance; anvil can, as a contract's internal transfer would
    evm_w3.manager.request_blocking("anvil_setBalance", [order.quote.address, hex(order.quote.amount)])
    chain.mine(1)
    chain.poll("eth")
    quote = fresh(order).quote
    assert quote.unattributed == order.quote.amount - order.quote.amount // 4
    assert fresh(order).state == "awaiting_payment"  # never counted without a transaction


def test_the_watch_state_records_the_poll(chain):
    chain.place("eth")
    report = chain.poll("eth")
    state = WatchState.objects.get(asset__code="eth")
    assert state.tip == chain.w3.eth.block_number and state.next_block == state.tip + 1
    assert state.lag_blocks == 0 and state.errors_in_row == 0 and state.watched == 1
    assert state.calls == report.calls > 0 and state.last_success_at is not None
    again = chain.poll("eth")
    assert again.scanned is None  # no new block: nothing is read again
