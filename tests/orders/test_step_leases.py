"""Access steps run outside transactions, under a lease on the order (DESIGN §6, issue 24 item 6)."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from anchorgpu.audit.models import AuditEntry
from anchorgpu.fleet.models import Host
from anchorgpu.orders import step_lease
from anchorgpu.orders.fulfilment import order_step_retry, provision_due
from anchorgpu.orders.lifecycle import order_end_now, terms_end_due
from anchorgpu.orders.models import OperatorEvent, Order, ProvisioningStep
from anchorgpu.orders.provisioner import HostRefused, HostUnavailable, ProvisioningError, SimulatedProvisioner
from anchorgpu.orders.provisioning import PLAN, WIPE
from anchorgpu.orders.retry import MAX_UNREACHABLE, UNREACHABLE_BACKOFF, backoff
from anchorgpu.orders.wipes import wipes_due
from tests import shop
from tests.orders.test_fulfilment import paid_order, steps_of

MINUTE = timedelta(minutes=1)
STEPS = [step.value for step in PLAN]


@pytest.fixture
def shop_db(db):
    shop.load_shop()


def fresh(order: Order) -> Order:
    return Order.objects.get(pk=order.pk)


def row_is_free(order_pk: int) -> bool:
    """From a second connection: can the order's row be locked (PostgreSQL), or the database written to
    (SQLite, which locks the whole file), without waiting?"""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        other = sqlite3.connect(settings["TEST"]["NAME"] or settings["NAME"], timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            other.close()
    import psycopg

    with psycopg.connect(host=settings.get("HOST") or "127.0.0.1", port=settings.get("PORT") or 5432,
                         user=settings.get("USER") or "postgres", dbname=settings["NAME"]) as other:
        try:
            other.execute("SELECT id FROM orders_order WHERE id = %s FOR UPDATE NOWAIT", [order_pk])
            return True
        except psycopg.errors.LockNotAvailable:
            return False
        finally:
            other.rollback()


class Probing(SimulatedProvisioner):
    """Notes, inside each step, whether a transaction is open and whether the order's row is free."""

    name = "probing"

    def __init__(self):
        self.seen: list[tuple[str, bool, bool, str]] = []

    def run(self, step, order):
        held = Order.objects.get(pk=order.pk)
        self.seen.append((getattr(step, "value", step), connection.in_atomic_block, row_is_free(order.pk),
                          held.lease_step))
        return super().run(step, order)


@pytest.mark.django_db(transaction=True)
def test_every_step_and_the_wipe_run_with_no_transaction_open_and_the_row_free():
    shop.load_shop()
    order = paid_order()
    provisioner = Probing()
    assert provision_due(provisioner=provisioner) == 1
    order = fresh(order)
    assert order.state == "active"
    terms_end_due(now=order.ends_at)
    assert wipes_due(provisioner=provisioner, now=order.ends_at) == 1
    assert provisioner.seen == [(step, False, True, step) for step in [*STEPS, WIPE]]
    steps = steps_of(order)
    assert [s.step for s in steps] == [*STEPS, WIPE]
    assert all(s.started_at is not None and s.started_at <= s.finished_at for s in steps)
    assert fresh(order).lease_owner == ""


def test_a_lease_held_by_a_worker_elsewhere_is_waited_out_then_taken_over(shop_db, settings):
    order = paid_order()
    now = order.starts_at + MINUTE
    Order.objects.filter(pk=order.pk).update(lease_owner="other-machine:4242:abc", lease_step="allocate_devices",
                                             lease_started_at=now, lease_until=now + 10 * MINUTE)
    assert provision_due(now=now + 9 * MINUTE) == 0
    assert not steps_of(order) and fresh(order).state == "paid"
    assert provision_due(now=now + 10 * MINUTE) == 1  # expired: taken over, and the order carries on
    assert [s.step for s in steps_of(order)] == STEPS and fresh(order).state == "active"


def test_a_lease_left_by_a_dead_process_on_this_machine_is_taken_over_at_once(shop_db):
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid runs nothing now
    order = paid_order()
    now = order.starts_at + MINUTE
    owner = f"{step_lease._machine()}:{gone.pid}:feed"
    Order.objects.filter(pk=order.pk).update(lease_owner=owner, lease_step="allocate_devices",
                                             lease_started_at=now, lease_until=now + 15 * MINUTE)
    assert step_lease.holder_gone(owner)
    assert provision_due(now=now + MINUTE) == 1
    assert fresh(order).state == "active"
    # A live process on this machine (this one, running a step under the lease) is not presumed gone.
    mine = step_lease.take(fresh(order), "wipe", now)
    assert not step_lease.holder_gone(mine)
    step_lease.forget(mine)
    assert step_lease.holder_gone(mine)  # this process no longer runs it: an abandoned lease of its own


def test_a_worker_whose_lease_was_taken_over_drops_its_result(shop_db):
    class Overtaken(SimulatedProvisioner):
        def allocate_devices(self, order):
            detail = super().allocate_devices(order)
            # Meanwhile the lease expired and another worker took the step over.
            Order.objects.filter(pk=order.pk).update(lease_owner="other-machine:1:beef")
            return detail

    order = paid_order()
    assert provision_due(provisioner=Overtaken(), now=order.starts_at + MINUTE) == 0
    order = fresh(order)
    assert not steps_of(order) and order.lease_owner == "other-machine:1:beef"
    assert not AuditEntry.objects.filter(object_id=str(order.pk), action="provisioning_step").exists()


def test_a_failed_step_waits_its_back_off_before_the_next_try(shop_db):
    class FlakyOnce(SimulatedProvisioner):
        calls = 0

        def prepare_environment(self, order):
            FlakyOnce.calls += 1
            if FlakyOnce.calls == 1:
                raise ProvisioningError("registry answered 503")
            return super().prepare_environment(order)

    order = paid_order()
    at = order.starts_at + MINUTE
    assert provision_due(provisioner=FlakyOnce(), now=at) == 1
    order = fresh(order)
    assert order.retry_at == at + backoff(1) and order.provisioning_attempts == 1 and order.lease_owner == ""
    assert provision_due(provisioner=FlakyOnce(), now=at + backoff(1) - timedelta(seconds=1)) == 0
    assert FlakyOnce.calls == 1
    assert provision_due(provisioner=FlakyOnce(), now=at + backoff(1)) == 1
    assert fresh(order).state == "active" and fresh(order).retry_at is None


class Unreachable(SimulatedProvisioner):
    def install_ssh_keys(self, order):
        raise HostUnavailable("ssh: connect to fra1-h100-01 port 22: Connection timed out", host="fra1-h100-01")


def test_a_host_that_stays_unreachable_sends_the_order_to_the_operators_with_the_reason(shop_db):
    order = paid_order()
    at = order.starts_at + MINUTE
    for attempt in range(1, MAX_UNREACHABLE + 1):
        assert provision_due(provisioner=Unreachable(), now=at) == 1
        order = fresh(order)
        assert order.unreachable_attempts == attempt and order.provisioning_attempts == 0
        if attempt < MAX_UNREACHABLE:
            assert order.state == "provisioning" and order.retry_at == at + backoff(attempt, UNREACHABLE_BACKOFF)
            at = order.retry_at
    assert order.state == "failed"
    failed = AuditEntry.objects.get(object_id=str(order.pk), action="order_state", to_state="failed")
    assert failed.reason.startswith(f"host fra1-h100-01 unreachable {MAX_UNREACHABLE} times: ssh: connect")
    event = OperatorEvent.objects.get(order=order, kind="order.provisioning_failed")
    assert "host fra1-h100-01 unreachable" in event.text


def test_a_refused_host_fails_the_order_at_once_is_taken_off_sale_and_alerts_the_operators(shop_db):
    host = Host.objects.filter(product__slug="h100-sxm-80gb").order_by("name").first()

    class Mismatch(SimulatedProvisioner):
        def allocate_devices(self, order):
            name = order.booking.slots.first().device.host.name
            raise HostRefused(f"{name}: the host key is not the pinned one", host=name, block_host=True)

    order = paid_order()
    assert provision_due(provisioner=Mismatch(), now=order.starts_at + MINUTE) == 1
    order = fresh(order)
    refused = order.booking.slots.first().device.host
    assert order.state == "failed" and order.provisioning_attempts == 1 and order.retry_at is None
    assert "the host key is not the pinned one" in refused.sale_block and order.reference in refused.sale_block
    assert AuditEntry.objects.filter(object_type="fleet.host", object_id=str(refused.pk),
                                     action="host_sale_block").count() == 1
    kinds = set(OperatorEvent.objects.filter(order=order).values_list("kind", flat=True))
    assert kinds == {"order.provisioning_failed", "host.refused"}
    alert = OperatorEvent.objects.get(order=order, kind="host.refused")
    assert refused.name in alert.text and alert.payload["data"]["host"]["name"] == refused.name
    assert host is not None


def test_the_next_order_on_the_same_cards_waits_for_the_previous_wipe_without_counting_a_failure(shop_db):
    class HostDown(SimulatedProvisioner):
        def wipe(self, order):
            raise HostUnavailable("ssh: no route to host", host="")

    first = shop.activate(shop.place(shop.customer(), product="h200-141gb", quantity=16))
    order_end_now(order=first, actor="operator", reason="customer asked to stop early")
    assert wipes_due(provisioner=HostDown()) == 1  # the wipe failed: it will be tried again
    bob = shop.customer("bob@example.com")
    second = shop.place(bob, product="h200-141gb", quantity=16)
    shop.pay(second, txid="cd" * 32)
    assert provision_due() == 0
    second = fresh(second)
    uid = first.booking.slots.order_by("device__host__name", "device__index").first().device.uid
    assert second.state == "paid" and not steps_of(second) and second.provisioning_attempts == 0
    assert second.last_error == f"allocate_devices: waiting for order {first.reference}'s wipe on {uid}"
    assert provision_due() == 0 and fresh(second).provisioning_attempts == 0  # still waiting, still not counted
    assert wipes_due(now=fresh(first).retry_at) == 1
    assert ProvisioningStep.objects.filter(order=first, step=WIPE).exists()
    assert provision_due() == 1
    second = fresh(second)
    assert second.state == "active" and second.last_error == ""


def test_the_operator_clears_a_stuck_lease_and_the_back_off(shop_db):
    order = paid_order()
    now = timezone.now()
    Order.objects.filter(pk=order.pk).update(state="provisioning", lease_owner="other-machine:7:dead",
                                             lease_step="allocate_devices", lease_started_at=now,
                                             lease_until=now + 10 * MINUTE, retry_at=now + 5 * MINUTE)
    with pytest.raises(Exception, match="Say why"):
        order_step_retry(order=order, actor="operator", reason=" ")
    order_step_retry(order=order, actor="operator", reason="the worker's machine was lost")
    order = fresh(order)
    assert order.lease_owner == "" and order.retry_at is None
    entry = AuditEntry.objects.get(object_id=str(order.pk), action="step_retry")
    assert entry.data["lease"].startswith("allocate_devices by other-machine:7:dead")
    assert provision_due() == 1 and fresh(order).state == "active"


def test_a_host_refused_with_no_order_alerts_the_operators_about_the_host_alone(shop_db, settings, mailoutbox):
    from django.db import transaction

    from anchorgpu.orders.models import OrderEmail, WebhookDelivery
    from anchorgpu.orders.notify import emails_send_due
    from anchorgpu.orders.operator_events import on_host_refused

    settings.ANCHORGPU_OPERATOR_EMAILS = "ops@example.com"
    settings.ANCHORGPU_OPERATOR_WEBHOOK_URLS = ["https://hooks.example.com/anchorgpu"]
    host = Host.objects.order_by("name").first()
    host.sale_block = "discovery: 7 cards found, 8 in the fleet record"
    with transaction.atomic():
        event = on_host_refused(host=host, why="the host key is not the pinned one")
        assert on_host_refused(host=host, why="the host key is not the pinned one") is None  # once per finding
    assert event.order is None and event.host == host and event.kind == "host.refused"
    assert event.payload["data"]["host"]["name"] == host.name and "order" not in event.payload["data"]
    assert WebhookDelivery.objects.filter(event=event).count() == 1
    email = OrderEmail.objects.get(event=event)
    assert email.order is None
    assert emails_send_due() == 1
    sent = mailoutbox[-1]
    assert sent.to == ["ops@example.com"] and f"host {host.name}" in sent.subject
    assert "the host key is not the pinned one" in sent.body and f"/admin/fleet/host/{host.pk}/" in sent.body


def test_a_failed_order_whose_term_is_over_has_its_machine_wiped(shop_db):
    order = paid_order()
    Host.objects.filter(devices__slots__booking=order.booking).update(status=Host.Status.MAINTENANCE)
    at = order.starts_at
    for _attempt in range(3):
        at += 10 * MINUTE
        provision_due(now=at)
    order = fresh(order)
    assert order.state == "failed" and [s.step for s in steps_of(order)] == STEPS[:3]
    assert terms_end_due(now=order.ends_at - MINUTE) == 0 and fresh(order).wipe_due_at is None  # may be retried
    assert terms_end_due(now=order.ends_at) == 1
    assert fresh(order).wipe_due_at == order.ends_at
    assert wipes_due(now=order.ends_at) == 1
    assert ProvisioningStep.objects.filter(order=order, step=WIPE).count() == 1
    assert terms_end_due(now=order.ends_at + MINUTE) == 0


def test_a_refused_host_at_the_wipe_alerts_at_once_without_retrying(shop_db):
    from anchorgpu.orders.retry import MAX_WIPE_FAILURES

    class KeyChanged(SimulatedProvisioner):
        def wipe(self, order):
            name = order.booking.slots.first().device.host.name
            raise HostRefused(f"{name}: the host key is not the pinned one", host=name, block_host=True)

    order = shop.activate(shop.place(shop.customer()))
    order_end_now(order=order, actor="operator", reason="customer asked")
    assert wipes_due(provisioner=KeyChanged()) == 1
    order = fresh(order)
    assert order.wipe_attempts == MAX_WIPE_FAILURES and order.wipe_due_at is not None
    assert wipes_due(provisioner=KeyChanged(), now=timezone.now() + timedelta(days=1)) == 0  # not retried
    kinds = set(OperatorEvent.objects.filter(order=order).values_list("kind", flat=True))
    assert {"order.wipe_failed", "host.refused"} <= kinds
    assert order.booking.slots.first().device.host.sale_block


def test_a_step_still_running_when_the_term_ends_is_dropped_and_the_wipe_waits_for_its_lease(shop_db):
    class SlowWhileTheTermEnds(SimulatedProvisioner):
        def prepare_environment(self, order):
            detail = super().prepare_environment(order)
            # While this step runs remotely, the term ends: the order fails and its wipe is due...
            assert terms_end_due(now=order.ends_at) == 1
            held = fresh(order)
            assert held.state == "failed" and held.wipe_due_at == order.ends_at
            # ...but the wipe does not start while this worker still holds the order's lease.
            assert wipes_due(now=order.ends_at) == 0 and held.lease_step == "prepare_environment"
            return detail

    order = paid_order()
    # The steps start a minute before the term's end, so the lease is still good when the term ends.
    assert provision_due(provisioner=SlowWhileTheTermEnds(), now=order.ends_at - MINUTE) == 1
    order = fresh(order)
    assert [s.step for s in steps_of(order)] == ["allocate_devices"]  # the late result was not recorded
    assert order.lease_owner == ""
    assert wipes_due(now=order.ends_at) == 1
    assert ProvisioningStep.objects.filter(order=order, step=WIPE).exists()
