"""The six cases an operator hears about (underpaid, paid late with the cards gone, wrong asset, reorganised,
access preparation failed, refund due): each raised by the service that makes the change, once per event,
in the same transaction, as an email to the operators (and a webhook delivery per configured URL)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.db import transaction
from django.utils import timezone

from anchorgpu.chains.base import LookupOutcome, TxLookup
from anchorgpu.fleet.models import Host
from anchorgpu.orders.fulfilment import MAX_FAILURES, provision_due
from anchorgpu.orders.models import OperatorEvent, Order, OrderEmail, WebhookDelivery
from anchorgpu.orders.notify import emails_send_due
from anchorgpu.orders.transitions import order_lock
from anchorgpu.payments.chain_alerts import chain_alert_raise
from anchorgpu.payments.claim_check import claim_check
from anchorgpu.payments.services import payment_claim
from tests import shop

pytestmark = pytest.mark.django_db
K = OperatorEvent.Kind
UNKNOWN_TOKEN = "0x" + "12" * 20


@pytest.fixture
def user(settings):
    settings.ANCHORGPU_OPERATOR_EMAILS = "ops@anchorgpu.example"
    settings.ANCHORGPU_OPERATOR_WEBHOOK_URLS = ["https://hooks.example/anchorgpu", "https://other.example/in"]
    settings.ANCHORGPU_OPERATOR_WEBHOOK_SECRET = "s" * 8 + "0123456789abcdefghijklmnopqrstuv"
    shop.load_shop()
    return shop.customer()


def events(order, kind=None):
    rows = OperatorEvent.objects.filter(order=order)
    return list(rows.filter(kind=kind) if kind else rows)


def told(event):
    """The event's email to the operators and its webhook deliveries, as queued."""
    [email] = OrderEmail.objects.filter(event=event, kind=OrderEmail.Kind.OPERATOR_ALERT)
    urls = sorted(WebhookDelivery.objects.filter(event=event).values_list("url", flat=True))
    return email, urls


class OneAnswer:
    """A watcher whose chain knows the pasted id as ``outcome``."""

    def __init__(self, outcome, detail):
        self.found = TxLookup(outcome, tip=100, detail=detail)

    def lookup(self, txid, address):
        return self.found


def test_underpaid(user):
    order = shop.place(user)
    shop.pay(order, amount=order.quote.amount // 2)
    [event] = events(order)
    assert event.kind == K.UNDERPAID and event.key.startswith("audit:")
    email, urls = told(event)
    assert urls == ["https://hooks.example/anchorgpu", "https://other.example/in"]
    half = order.quote.amount // 2
    assert f"received {half}, short by {order.quote.amount - half} base units" in email.note
    data = event.payload["data"]["order"]
    assert event.payload["type"] == "order.underpaid" and event.payload["id"] == event.event_id
    assert data["reference"] == order.reference and data["state"] == "underpaid"
    assert data["amount_due"] == str(order.quote.amount) and data["received"] == str(half)
    assert data["shortfall"] == str(order.quote.amount - half) and data["asset"] == "btc"
    assert event.payload["created_at"].endswith("Z") and data["quote_expires_at"].endswith("Z")
    assert "email" not in data  # the customer's address stays in the shop
    mail.outbox.clear()
    emails_send_due()
    [sent] = [m for m in mail.outbox if m.to == ["ops@anchorgpu.example"]]
    assert sent.subject == f"AnchorGPU alert: order {order.reference}, underpaid"
    assert "waits in the payment queue" in sent.body and event.event_id in sent.body


def test_paid_late_with_the_cards_taken_is_one_event_and_a_recheck_adds_none(user):
    from anchorgpu.payments.services import payment_recheck_capacity

    order = shop.place(user, product="h200-141gb", quantity=16, term_days=7)
    late = order.quote.expires_at + timedelta(minutes=1)
    shop.order_for_all_h200(shop.customer("bob@example.com"), now=late)
    shop.pay(order, seen_at=late, now=late + timedelta(minutes=1))
    assert Order.objects.get(pk=order.pk).state == "paid_late"
    [event] = events(order)
    assert event.kind == K.PAID_LATE and "cards were taken" in event.text
    assert event.payload["data"]["order"]["refund_due"] is True
    payment_recheck_capacity(order=order, actor="operator")  # still no cards: nothing new to tell
    assert Order.objects.get(pk=order.pk).state == "paid_late" and len(events(order)) == 1


def test_paid_late_with_the_cards_still_free_needs_nobody(user):
    order = shop.place(user)
    late = order.quote.expires_at + timedelta(minutes=30)
    shop.pay(order, seen_at=late, now=late)
    assert Order.objects.get(pk=order.pk).state == "paid" and events(order) == []


@pytest.mark.parametrize(("outcome", "detail", "words"), [
    (LookupOutcome.WRONG_ASSET, {"contract": UNKNOWN_TOKEN}, f"wrong token: contract {UNKNOWN_TOKEN} is not ETH"),
    (LookupOutcome.WRONG_ASSET, {"native": True}, "wrong token: it sends ETH, not USDC"),
])
def test_wrong_asset_once_per_claimed_transaction(user, outcome, detail, words):
    asset = "eth" if "contract" in detail else "usdc-ethereum"
    order = shop.place(user, asset=asset)
    order = payment_claim(order=order, actor="alice", txid=shop.TXID_EVM)
    watcher = OneAnswer(outcome, detail)
    claim_check(order=order, watcher=watcher)
    claim_check(order=order, watcher=watcher)  # the worker's recheck sees the same: not news
    [event] = events(order)
    assert event.kind == K.WRONG_ASSET and event.key == f"{shop.TXID_EVM}:wrong_asset"
    assert words in event.text and shop.TXID_EVM in event.text
    assert event.payload["data"]["verdict"] == "wrong_asset" and event.payload["data"]["txid"] == shop.TXID_EVM


def test_other_verdicts_wait_in_the_queue_without_an_alert(user):
    order = shop.place(user, asset="eth")
    order = payment_claim(order=order, actor="alice", txid=shop.TXID_EVM)
    claim_check(order=order, watcher=OneAnswer(LookupOutcome.OTHER_ADDRESS, {}))
    claim_check(order=order, watcher=OneAnswer(LookupOutcome.NOT_FOUND, {}))
    assert events(order) == []


def test_reorged_once_per_finding(user):
    order = shop.place(user, asset="eth")
    shop.pay(order)
    subject = "evm:0xabc:0 in block 7 (0xdef)"
    for _ in range(2):  # the same reorganisation seen by two polls
        with transaction.atomic():
            chain_alert_raise(order=order_lock(order), subject=subject, actor="chain-watcher", now=timezone.now(),
                              text=f"Transfer {subject} is no longer on chain.")
    [event] = events(order)
    assert event.kind == K.REORGED and event.key == subject and event.payload["data"]["subject"] == subject
    assert len(told(event)[1]) == 2


def test_provisioning_failed(user):
    order = shop.place(user)
    shop.pay(order)
    order = Order.objects.get(pk=order.pk)
    Host.objects.filter(devices__slots__booking=order.booking).update(status=Host.Status.MAINTENANCE)
    for attempt in range(1, MAX_FAILURES + 1):
        provision_due(now=order.starts_at + attempt * timedelta(minutes=1))
    assert Order.objects.get(pk=order.pk).state == "failed"
    [event] = events(order)
    assert event.kind == K.PROVISIONING_FAILED
    assert f"access preparation failed {MAX_FAILURES} times" in event.text
    assert "Last error: health_check: host(s) not active" in event.text


def test_refund_due_each_time_the_flag_rises(user):
    order = shop.place(user)
    shop.pay(order, amount=order.quote.amount + 5_000)
    [event] = events(order, K.REFUND_DUE)
    assert event.key == "#1" and "5000 base units were received that the order does not keep" in event.text
    assert event.payload["data"]["order"]["excess"] == "5000"
    shop.pay(order, amount=1_000, txid="c3" * 32)  # more arrives while the flag is up: the same refund
    assert len(events(order, K.REFUND_DUE)) == 1


def test_a_rolled_back_change_tells_nobody(user):
    order = shop.place(user)
    with pytest.raises(RuntimeError), transaction.atomic():
        shop.pay(order, amount=order.quote.amount // 2)
        assert len(events(order)) == 1
        raise RuntimeError("the change fails after the event was raised")
    assert events(order) == [] and not OrderEmail.objects.filter(kind=OrderEmail.Kind.OPERATOR_ALERT).exists()
    assert not WebhookDelivery.objects.exists()


def test_without_webhook_urls_only_the_email_is_queued(user, settings):
    settings.ANCHORGPU_OPERATOR_WEBHOOK_URLS = []
    order = shop.place(user)
    shop.pay(order, amount=1)
    [event] = events(order)
    assert told(event)[1] == []


def test_a_claimed_transaction_on_another_network_is_a_wrong_asset_too(user, monkeypatch):
    from anchorgpu.payments import claim_check as checks

    monkeypatch.setattr(checks, "_elsewhere", lambda asset, txid, address, timeout: "Polygon PoS")
    order = payment_claim(order=shop.place(user, asset="eth"), actor="alice", txid=shop.TXID_EVM)
    claim_check(order=order, watcher=OneAnswer(LookupOutcome.NOT_FOUND, {}))
    [event] = events(order)
    assert event.kind == K.WRONG_ASSET and event.key == f"{shop.TXID_EVM}:wrong_network"
    assert "wrong network: on Polygon PoS, not Ethereum mainnet" in event.text
