"""The payment queue and the order's admin page say what the automatic check of a claimed transaction found,
in words and in the operator's language, never as the check's raw detail."""

from __future__ import annotations

import pytest
from django.urls import reverse

from anchorgpu.chains.base import LookupOutcome, TxLookup
from anchorgpu.payments.claim_check import claim_check
from anchorgpu.payments.services import payment_claim
from tests import shop

pytestmark = pytest.mark.django_db
QUEUE = reverse("admin:orders_paymentqueueentry_changelist")
TOKEN = "0x" + "34" * 20


class OneAnswer:
    def __init__(self, outcome, detail=None):
        self.found = TxLookup(outcome, tip=100, detail=detail or {})

    def lookup(self, txid, address):
        return self.found


@pytest.fixture
def claimed():
    shop.load_shop()
    return payment_claim(order=shop.place(shop.customer(), asset="eth"), actor="alice", txid=shop.TXID_EVM)


@pytest.mark.parametrize(("outcome", "detail", "words"), [
    (LookupOutcome.WRONG_ASSET, {"contract": TOKEN}, f"wrong token: contract {TOKEN} is not ETH"),
    (LookupOutcome.OTHER_ADDRESS, {}, "pays another address, not this order&#x27;s"),
    (LookupOutcome.NOT_FOUND, {}, "not found on Ethereum mainnet"),
    (LookupOutcome.PENDING, {}, "known, not yet in a block"),
    (LookupOutcome.FAILED, {}, "reverted on chain: nothing was transferred"),
    (LookupOutcome.BAD_DATA, {}, "the node&#x27;s data does not match the id: not trusted"),
])
def test_the_queue_says_the_verdict_in_words(admin_client, claimed, outcome, detail, words):
    claim_check(order=claimed, watcher=OneAnswer(outcome, detail))
    page = admin_client.get(QUEUE).content.decode()
    assert words in page
    assert "{&#x27;" not in page and "{'" not in page  # no raw dict
    assert f"{shop.TXID_EVM[:10]}…{shop.TXID_EVM[-6:]}" in page  # the id, shortened, its whole in the title
    order_page = admin_client.get(reverse("admin:orders_order_change", args=[claimed.pk])).content.decode()
    assert words in order_page and "{&#x27;contract" not in order_page


def test_a_claim_not_checked_yet_says_so(admin_client, claimed):
    assert "not checked yet" in admin_client.get(QUEUE).content.decode()


@pytest.mark.parametrize(("language", "words"), [
    ("pt", f"token errado: o contrato {TOKEN} não é ETH"),
    ("fr", f"mauvais jeton\u00a0: le contrat {TOKEN} n&#x27;est pas ETH"),
    ("ko", f"잘못된 토큰: 컨트랙트 {TOKEN}은(는) ETH이(가) 아님"),
])
def test_the_verdict_is_in_the_operators_language(admin_client, claimed, language, words):
    claim_check(order=claimed, watcher=OneAnswer(LookupOutcome.WRONG_ASSET, {"contract": TOKEN}))
    admin_client.cookies["django_language"] = language
    page = admin_client.get(QUEUE, HTTP_ACCEPT_LANGUAGE=language).content.decode()
    assert words in page


def test_the_queue_has_the_columns_an_operator_decides_with(admin_client, claimed):
    page = admin_client.get(QUEUE).content.decode()
    for column in ("field-order_link", "field-what_to_do", "field-claim", "field-due", "field-received",
                   "field-shortfall", "field-age", "field-tools"):
        assert column in page, column
    assert "orders/admin/queue.css" in page
