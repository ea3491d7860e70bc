"""The two reminders before a term ends (issue 25 item 4): 24 hours and 1 hour before, each once per end,
re-armed by an extension; what they say (what is erased, how to extend, where the off-machine storage is)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.extensions import order_extend
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.lifecycle import terms_warn_due
from anchorgpu.orders.models import Order, OrderEmail
from anchorgpu.orders.notify import emails_send_due
from anchorgpu.orders.reminders import end_reminder
from anchorgpu.payments.models import Asset
from tests import shop

HOUR = timedelta(hours=1)


@pytest.fixture
def shop_db(db):
    shop.load_shop()


def running(**kw) -> Order:
    order = shop.place(shop.customer(), **kw)
    shop.pay(order)
    provision_due()
    order = Order.objects.get(pk=order.pk)
    assert order.state == "active"
    return order


def kinds(order) -> list[str]:
    return list(OrderEmail.objects.filter(order=order, kind__startswith="term_ending").order_by("id")
                .values_list("kind", flat=True))


def test_a_day_before_then_an_hour_before_each_once(shop_db, mailoutbox):
    order = running()
    emails_send_due()
    mailoutbox.clear()
    assert terms_warn_due(now=order.ends_at - 25 * HOUR) == 0
    assert terms_warn_due(now=order.ends_at - 23 * HOUR) == 1
    assert terms_warn_due(now=order.ends_at - 2 * HOUR) == 0
    assert terms_warn_due(now=order.ends_at - 50 * 60 * timedelta(seconds=1)) == 1
    assert terms_warn_due(now=order.ends_at - 10 * 60 * timedelta(seconds=1)) == 0
    assert kinds(order) == ["term_ending", "term_ending_hour"]
    assert AuditEntry.objects.filter(object_id=str(order.pk), action="term_warning").count() == 2
    assert emails_send_due() == 2
    hour = mailoutbox[1]
    assert "ends within the hour" in hour.subject
    body = " ".join(hour.body.split())
    assert "your container and its /workspace volume" in body and "local NVMe disk, which is scratch space" in body
    assert "Extend the term by 3, 7, 30 days on the order page" in body and "#extend" in body
    assert "off-machine checkpoint storage" not in body


def test_a_worker_that_was_down_sends_only_the_hours_reminder(shop_db):
    order = running()
    assert terms_warn_due(now=order.ends_at - 30 * 60 * timedelta(seconds=1)) == 1
    assert terms_warn_due(now=order.ends_at - 20 * 60 * timedelta(seconds=1)) == 0
    assert kinds(order) == ["term_ending_hour"]


def test_an_extension_re_arms_both_reminders(shop_db):
    order = running()
    assert terms_warn_due(now=order.ends_at - 23 * HOUR) == 1
    assert terms_warn_due(now=order.ends_at - HOUR) == 1
    ext = order_extend(order=order, days=3, actor="alice@example.com", asset=Asset.objects.get(code="btc"))
    shop.pay(ext, txid=shop.txid("btc", 1))
    order = Order.objects.get(pk=order.pk)
    assert order.end_warned_at is None and order.end_warned_hour_at is None
    assert terms_warn_due(now=order.ends_at - 23 * HOUR) == 1
    assert terms_warn_due(now=order.ends_at - HOUR) == 1
    assert kinds(order) == ["term_ending", "term_ending_hour"] * 2


def test_the_reminder_says_where_the_off_machine_storage_is(shop_db, mailoutbox):
    order = running(options=("checkpoint-storage-1tb",))
    reminder = end_reminder(order, now=order.ends_at - HOUR)
    assert reminder.storage_site and reminder.storage_until == order.ends_at + timedelta(days=14)
    emails_send_due()
    mailoutbox.clear()
    terms_warn_due(now=order.ends_at - 23 * HOUR)
    emails_send_due()
    body = " ".join(mailoutbox[0].body.split())
    assert "You bought off-machine checkpoint storage: it is object storage at the site" in body


def test_the_reminder_says_when_it_cannot_be_extended(shop_db, mailoutbox):
    order = running(product="h200-141gb", quantity=16)
    bob = shop.place(shop.customer("bob@example.com"), product="h200-141gb", quantity=16, start=order.ends_at)
    shop.pay(bob, txid=shop.txid("btc", 3))
    reminder = end_reminder(Order.objects.get(pk=order.pk), now=order.ends_at - HOUR)
    assert not reminder.extend.possible and "cards are booked from" in reminder.extend_refusal
    assert end_reminder(order, now=order.ends_at - 25 * HOUR) is None
