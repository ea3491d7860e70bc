""" "I've paid" with a hash, checked at once: found (n of N), unknown, another
address, the wrong token, a hash replayed for a second order."""

from __future__ import annotations

from datetime import timedelta

import pytest

from anchorgpu.payments.claim_check import claim_check, claims_recheck_due, describe
from anchorgpu.payments.models import ClaimCheck, Transfer
from anchorgpu.payments.services import payment_claim
from tests import shop
from tests.chains import evm_support as evm
from tests.chains.watch_support import CONFIRMATIONS, ChainShop, fresh

pytestmark = pytest.mark.django_db
O = ClaimCheck.Outcome


@pytest.fixture
def chain(evm_w3):
    return ChainShop(evm_w3)


def claim(chain: ChainShop, order, txid: str) -> ClaimCheck:
    order = payment_claim(order=order, actor=order.user.username, txid=txid)
    return claim_check(order=order, watcher=chain.watcher(order.quote.asset))


def test_a_claimed_hash_that_pays_the_order_is_recorded_at_once(chain):
    order = chain.place("usdc-ethereum")
    txid = chain.send(order, order.quote.amount)
    check = claim(chain, order, txid)
    assert (check.outcome, check.confirmations, check.required) == (O.FOUND, 1, CONFIRMATIONS)
    assert describe(check, order.quote.asset).endswith("1 of 3 confirmations so far. It counts once it has all of "
                                                       "them.")
    assert Transfer.objects.get(order=order).txid == txid
    assert fresh(order).state == "payment_claimed"

    chain.mine(CONFIRMATIONS - 1)
    assert claims_recheck_due(every=timedelta(0), factory=chain.watcher) == 1
    check.refresh_from_db()
    assert (check.outcome, check.confirmations, check.checks) == (O.FOUND, CONFIRMATIONS, 2)
    assert fresh(order).state == "paid" and Transfer.objects.count() == 1
    assert "confirmed (3 of 3" in describe(check, order.quote.asset)


def test_refusals_say_precisely_why(chain, evm_w3):
    fake = evm.deploy_token(evm_w3, symbol="USDC")
    evm.mint(evm_w3, fake, chain.payer, 10**12)
    usdc = chain.place("usdc-ethereum")
    other = chain.place("usdc-ethereum")
    eth = chain.place("eth")

    unknown = claim(chain, usdc, "0x" + "ab" * 32)
    assert unknown.outcome == O.NOT_FOUND
    assert "No transaction with this id is known on Ethereum mainnet (ERC-20)" in describe(unknown, usdc.quote.asset)

    elsewhere = chain.send(other, 5_000_000)  # pays another order's address
    assert claim(chain, usdc, elsewhere).outcome == O.OTHER_ADDRESS

    lookalike = chain.send(usdc, usdc.quote.amount, token=fake)
    wrong = claim(chain, usdc, lookalike)
    assert wrong.outcome == O.WRONG_ASSET and wrong.detail == {"contract": fake.lower(), "sent": ""}
    assert f"from contract {fake.lower()}, which is not the USDC we accept" in describe(wrong, usdc.quote.asset)

    coin = evm.send_eth(evm_w3, chain.payer, usdc.quote.address, 10**15)
    sent_eth = claim(chain, usdc, coin)
    assert sent_eth.outcome == O.WRONG_ASSET and sent_eth.detail == {"sent": "ETH"}
    assert "in ETH, not in USDC" in describe(sent_eth, usdc.quote.asset)

    token_to_eth_order = chain.send(eth, 1_000_000, token=chain.token)
    assert claim(chain, eth, token_to_eth_order).detail == {"contract": chain.token.lower(), "sent": "USDC"}
    # none of it counts, and the claims stay for the customer to correct
    assert not Transfer.objects.filter(order__in=[usdc, eth]).exists()
    assert fresh(usdc).state == fresh(eth).state == "payment_claimed"
    assert fresh(usdc).claim_checks.count() == 4  # one row per hash given


def test_a_hash_replayed_for_a_second_order_credits_only_the_first(chain):
    first = chain.place("eth")
    second = chain.place("eth", user=chain.customer)
    txid = chain.send(first, first.quote.amount)
    chain.mine(CONFIRMATIONS)
    chain.poll("eth")
    assert fresh(first).state == "paid"
    replay = claim(chain, second, txid)
    # It pays the first order's address, so for the second it pays "another address"…
    assert replay.outcome == O.OTHER_ADDRESS
    # …and even a transaction that pays both addresses credits each transfer once.
    assert Transfer.objects.filter(txid=txid).count() == 1 and fresh(second).state == "payment_claimed"


def test_a_transfer_already_credited_elsewhere_is_named_as_such(chain, evm_w3):
    """An operator credited a transfer to the wrong order by hand; the order it really paid cannot take it too."""
    first = chain.place("usdc-ethereum")
    second = chain.place("usdc-ethereum")
    txid = chain.send(first, first.quote.amount)
    log_index = evm_w3.eth.get_transaction_receipt(txid)["logs"][0]["logIndex"]
    shop.pay(second, txid=txid, index=log_index, confirmations=1)
    check = claim(chain, first, txid)
    assert check.outcome == O.ALREADY_CREDITED
    assert describe(check, first.quote.asset).startswith("This transaction is already credited to another order")
    assert list(Transfer.objects.filter(txid=txid).values_list("order", flat=True)) == [second.pk]
    assert fresh(first).state == "payment_claimed"
