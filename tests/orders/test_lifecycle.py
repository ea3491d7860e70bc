"""Time-driven order changes: expired quotes, end-of-term warnings and term ends."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from anchorgpu import worker
from anchorgpu.allocation.models import Booking
from anchorgpu.allocation.periods import Period
from anchorgpu.allocation.selectors import units_free
from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.errors import Unavailable
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.lifecycle import orders_expire_due, terms_end_due, terms_warn_due
from anchorgpu.orders.models import Order, ProvisioningStep
from anchorgpu.orders.notify import emails_send_due
from anchorgpu.orders.provisioning import WIPE
from anchorgpu.orders.wipes import wipes_due
from anchorgpu.payments.services import payment_claim
from tests import shop

SECOND, HOUR = timedelta(seconds=1), timedelta(hours=1)
ALL_H200 = 16  # the demo fleet: two hosts of eight


@pytest.fixture
def shop_db(db):
    shop.load_shop()


def fresh(order: Order) -> Order:
    return Order.objects.select_related("booking", "quote").get(pk=order.pk)


def active_order() -> Order:
    order = shop.place(shop.customer())
    shop.pay(order)
    order = fresh(order)
    assert provision_due(now=order.starts_at + timedelta(minutes=1)) == 1
    order = fresh(order)
    assert order.state == "active"
    return order


def test_an_expired_quote_expires_the_order_and_frees_its_cards_for_another_customer(shop_db):
    start = (timezone.now() + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
    alice, bob = shop.customer(), shop.customer("bob@example.com")
    first = shop.place(alice, product="h200-141gb", quantity=ALL_H200, start=start)
    with pytest.raises(Unavailable):
        shop.place(bob, product="h200-141gb", quantity=ALL_H200, start=start)
    expires = first.quote.expires_at

    assert orders_expire_due(now=expires - SECOND) == 0
    assert fresh(first).state == "awaiting_payment"
    assert orders_expire_due(now=expires) == 1
    first = fresh(first)
    assert first.state == "expired"
    assert first.booking.state == Booking.State.RELEASED
    assert not first.booking.slots.filter(live=True).exists()
    assert orders_expire_due(now=expires + HOUR) == 0  # idempotent

    second = shop.place(bob, product="h200-141gb", quantity=ALL_H200, start=start, now=expires + SECOND)
    assert second.state == "awaiting_payment" and second.booking.quantity == ALL_H200


def test_a_claimed_payment_keeps_its_cards_for_the_grace_period_then_expires(shop_db):
    order = shop.place(shop.customer())
    payment_claim(order=order, actor="alice@example.com")
    order = fresh(order)
    assert order.state == "payment_claimed"
    grace_end = order.quote.expires_at + timedelta(minutes=60)  # the default grace after "I've paid"
    assert order.booking.expires_at == grace_end
    assert orders_expire_due(now=order.quote.expires_at + SECOND) == 0
    assert fresh(order).state == "payment_claimed"
    assert orders_expire_due(now=grace_end + SECOND) == 1
    order = fresh(order)
    assert order.state == "expired" and order.booking.state == Booking.State.RELEASED


def test_an_underpaid_order_stays_for_the_operator_but_its_hold_is_released(shop_db):
    order = shop.place(shop.customer())
    shop.pay(order, amount=order.quote.amount // 2)
    order = fresh(order)
    assert order.state == "underpaid" and order.booking.state == Booking.State.LIVE
    expires = order.quote.expires_at
    assert orders_expire_due(now=expires - SECOND) == 0
    assert orders_expire_due(now=expires) == 1
    order = fresh(order)
    assert order.state == "underpaid"
    assert order.booking.state == Booking.State.RELEASED
    assert orders_expire_due(now=expires + HOUR) == 0


def test_a_paid_order_is_not_expired(shop_db):
    order = shop.place(shop.customer())
    shop.pay(order)
    assert orders_expire_due(now=order.quote.expires_at + HOUR) == 0
    order = fresh(order)
    assert order.state == "paid" and order.booking.state == Booking.State.LIVE


def test_the_end_of_term_warning_is_sent_once_a_day_before(shop_db, django_capture_on_commit_callbacks,
                                                           mailoutbox):
    order = active_order()
    emails_send_due()  # the emails of the order's way to active
    mailoutbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert terms_warn_due(now=order.ends_at - 25 * HOUR) == 0
    assert emails_send_due() == 0 and mailoutbox == []
    warned_at = order.ends_at - 23 * HOUR
    with django_capture_on_commit_callbacks(execute=True):
        assert terms_warn_due(now=warned_at) == 1
    assert mailoutbox == []  # queued for the worker
    assert emails_send_due() == 1
    assert len(mailoutbox) == 1
    assert mailoutbox[0].to == [order.email]
    assert "your term ends on" in mailoutbox[0].subject and order.reference in mailoutbox[0].subject
    body = " ".join(mailoutbox[0].body.split())
    # It says what will be erased, the scratch disk with it, and how the processes are stopped.
    assert "your container and its /workspace volume" in body and "local NVMe disk, which is scratch space" in body
    assert "after a short grace period, killed" in body and "Copy your checkpoints" in body
    assert fresh(order).end_warned_at == warned_at
    with django_capture_on_commit_callbacks(execute=True):
        assert terms_warn_due(now=order.ends_at - 2 * HOUR) == 0  # the day's warning once (the hour's: test_reminders)
    assert emails_send_due() == 0 and len(mailoutbox) == 1
    assert AuditEntry.objects.filter(object_id=str(order.pk), action="term_warning").count() == 1


def test_the_term_end_releases_wipes_and_completes(shop_db):
    order = active_order()
    term = Period(order.starts_at, order.ends_at)
    devices = set(order.booking.slots.values_list("device_id", flat=True))

    def free_devices():
        return {d for unit in units_free(order.product, term, now=order.starts_at) for d in unit.devices}

    assert not devices & free_devices()
    assert terms_end_due(now=order.ends_at - SECOND) == 0
    assert terms_end_due(now=order.ends_at) == 1
    order = fresh(order)
    assert order.state == "completed"
    assert order.booking.state == Booking.State.RELEASED
    assert devices <= free_devices()
    # The wipe is due from the term's end and runs outside the term-end transaction: the worker's next sweep.
    assert order.wipe_due_at == order.ends_at and not ProvisioningStep.objects.filter(order=order, step=WIPE)
    assert wipes_due(now=order.ends_at - SECOND) == 0
    assert wipes_due(now=order.ends_at) == 1
    wipe = ProvisioningStep.objects.get(order=order, step=WIPE)
    assert wipe.started_at == wipe.finished_at == order.ends_at and wipe.detail["devices"]
    order = fresh(order)
    assert order.wipe_due_at is None and order.lease_owner == ""
    assert order.access_host  # the record of what was delivered is kept
    assert terms_end_due(now=order.ends_at + HOUR) == 0
    assert wipes_due(now=order.ends_at + HOUR) == 0  # recorded once


def test_a_paid_order_whose_term_passed_without_access_goes_to_the_operator(shop_db, caplog):
    order = shop.place(shop.customer())
    shop.pay(order)
    order = fresh(order)
    with caplog.at_level(logging.WARNING, logger="anchorgpu.orders.lifecycle"):
        assert terms_end_due(now=order.ends_at + HOUR) == 1
    order = fresh(order)
    assert order.state == "paid" and order.refund_due  # in the payment queue: refund, or a new term
    # A paid order keeps its booking until it is refunded (the database insists); its period is over, so it
    # holds back no card from anyone.
    assert order.booking.state == Booking.State.LIVE and order.booking.ends_at <= order.ends_at
    assert order.reference in caplog.text
    assert terms_end_due(now=order.ends_at + 2 * HOUR) == 0  # flagged once


def test_a_failed_order_can_be_retried_with_fresh_attempts_until_its_term_ends(shop_db):
    from anchorgpu.orders.errors import InvalidOrder, NotAllowedNow
    from anchorgpu.orders.fulfilment import order_retry_provisioning
    from anchorgpu.orders.models import Order

    order = shop.place(shop.customer())
    shop.pay(order)
    Order.objects.filter(pk=order.pk).update(state="failed", provisioning_attempts=3, last_error="health: down")
    with pytest.raises(InvalidOrder):
        order_retry_provisioning(order=order, actor="operator", reason=" ")
    order_retry_provisioning(order=order, actor="operator", reason="host repaired")
    order = fresh(order)
    assert order.state == "provisioning" and order.provisioning_attempts == 0 and order.last_error == ""
    Order.objects.filter(pk=order.pk).update(state="failed", ends_at=timezone.now() - HOUR,
                                             starts_at=timezone.now() - 4 * HOUR)
    with pytest.raises(NotAllowedNow, match="already ended"):
        order_retry_provisioning(order=order, actor="operator", reason="host repaired")


def test_the_worker_runs_every_sweep_once(transactional_db):
    # transactional: the worker closes stale connections, which would close the test's open transaction
    shop.load_shop()
    order = shop.place(shop.customer())
    shop.pay(order)
    results = worker.run_once()
    assert list(results) == ["chains_poll", "claims_recheck_due", "refunds_verify_due", "orders_expire_due",
                             "hold_expire_due",
                             "terms_end_due", "wipes_due", "move_wipes_due", "provision_due",
                             "terms_warn_due", "fault_credits_due", "late_access_credits_due", "emails_send_due",
                             "webhooks_send_due", "simulations_requeue_stale",
                             "simulations_purge_old", "rate_events_purge"]
    assert all(count >= 0 for count in results.values())
    assert results["provision_due"] == 1 and fresh(order).state == "active"
    # placed, paid, preparing access, active: queued by the services, sent by the same run
    assert results["emails_send_due"] == 4 and not order.emails.filter(sent_at__isnull=True).exists()

