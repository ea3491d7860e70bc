"""Access preparation: ``fulfilment.provision_due`` with the simulated provisioner."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from anchorgpu.audit.models import AuditEntry
from anchorgpu.fleet.models import Host
from anchorgpu.orders.fulfilment import MAX_FAILURES, provision_due
from anchorgpu.orders.models import Order, ProvisioningStep
from anchorgpu.orders.notify import emails_send_due
from anchorgpu.orders.provisioner import ProvisioningError, SimulatedProvisioner, get_provisioner
from anchorgpu.orders.provisioning import PLAN, Step
from tests import shop

MINUTE = timedelta(minutes=1)
STEPS = [step.value for step in PLAN]


class Counting(SimulatedProvisioner):
    """Counts the calls that completed, per (order, step)."""

    def __init__(self, pause: float = 0.0):
        self.done: Counter = Counter()
        self.pause = pause
        self._lock = threading.Lock()

    def run(self, step, order):
        time.sleep(self.pause)
        detail = super().run(step, order)
        with self._lock:
            self.done[(order.pk, getattr(step, "value", step))] += 1
        return detail


class CrashOnce(Counting):
    """Crashes at the third step, the first time only."""

    def __init__(self, error: BaseException):
        super().__init__()
        self.error = error

    def install_ssh_keys(self, order):
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return super().install_ssh_keys(order)


def paid_order(start=None, txid: str | None = None, user=None) -> Order:
    order = shop.place(user or shop.customer(), start=start)
    shop.pay(order, txid=txid)
    order = Order.objects.get(pk=order.pk)
    assert order.state == "paid"
    return order


def steps_of(order: Order) -> list[ProvisioningStep]:
    return list(ProvisioningStep.objects.filter(order=order).order_by("id"))


@pytest.fixture
def shop_db(db):
    shop.load_shop()


def test_the_default_provisioner_is_the_simulated_one(settings):
    assert isinstance(get_provisioner(), SimulatedProvisioner)
    settings.ANCHORGPU_PROVISIONER = "tests.orders.test_fulfilment.Counting"
    assert isinstance(get_provisioner(), Counting)


def test_a_paid_order_is_provisioned_step_by_step_to_active(shop_db, django_capture_on_commit_callbacks,
                                                            mailoutbox):
    order = paid_order()
    provisioner = Counting()
    with django_capture_on_commit_callbacks(execute=True):
        assert provision_due(provisioner=provisioner) == 1  # the real clock: the term started at placing
    order.refresh_from_db()
    assert order.state == "active"
    steps = steps_of(order)
    assert [s.step for s in steps] == STEPS
    times = [s.finished_at for s in steps]
    assert all(times) and times == sorted(times)
    assert provisioner.done == Counter({(order.pk, step): 1 for step in STEPS})
    assert order.provisioner == "simulated"
    assert order.access_host.endswith(".sim.anchorgpu.example") and order.access_host.startswith("fra1-h100-")
    assert (order.access_port, order.access_user) == (22000 + order.pk % 10000, "anchor")
    detail = {s.step: s.detail for s in steps}
    assert len(detail["allocate_devices"]["devices"]) == 1
    assert detail["install_ssh_keys"]["fingerprints"] == [order.ssh_keys.get().fingerprint]
    assert detail["prepare_environment"]["environment"] == "pytorch-cuda124"
    audited = AuditEntry.objects.filter(object_id=str(order.pk), action="provisioning_step")
    assert sorted(audited.values_list("to_state", flat=True)) == sorted(STEPS)
    moves = list(AuditEntry.objects.filter(object_id=str(order.pk), action="order_state")
                 .order_by("id").values_list("to_state", flat=True))
    assert moves[-2:] == ["provisioning", "active"]
    queued = list(order.emails.values_list("kind", "state"))  # "preparing access", then "active", last
    assert queued[-2:] == [("state_changed", "provisioning"), ("state_changed", "active")]
    assert mailoutbox == []  # the worker sends them
    assert emails_send_due() == len(queued)
    assert [m.to for m in mailoutbox] == [[order.email]] * len(queued)
    # Nothing more to do: a second sweep changes nothing.
    assert provision_due(provisioner=provisioner) == 0
    assert sum(provisioner.done.values()) == len(STEPS)


def test_a_term_that_has_not_started_is_not_provisioned_yet(shop_db):
    start = (timezone.now() + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    order = paid_order(start=start)
    assert provision_due(now=start - MINUTE) == 0
    order.refresh_from_db()
    assert order.state == "paid" and not steps_of(order)
    assert provision_due(now=start) == 1
    order.refresh_from_db()
    assert order.state == "active"


def test_a_paid_order_whose_term_is_over_is_not_provisioned(shop_db):
    order = paid_order()
    assert provision_due(now=order.ends_at) == 0
    order.refresh_from_db()
    assert order.state == "paid" and not steps_of(order)


@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("power cut")], ids=["interrupt", "error"])
def test_a_crash_between_steps_resumes_without_repeating_finished_steps(transactional_db, error):
    shop.load_shop()
    order = paid_order()
    provisioner = CrashOnce(error)
    first, second = order.starts_at + MINUTE, order.starts_at + 10 * MINUTE
    if isinstance(error, KeyboardInterrupt):
        with pytest.raises(KeyboardInterrupt):
            provision_due(provisioner=provisioner, now=first)
    else:
        assert provision_due(provisioner=provisioner, now=first) == 1
    order.refresh_from_db()
    assert order.state == "provisioning"
    assert [(s.step, s.finished_at) for s in steps_of(order)] == [("allocate_devices", first),
                                                                 ("prepare_environment", first)]
    if isinstance(error, RuntimeError):  # an error is a failed attempt; an interrupt is not recorded
        assert order.provisioning_attempts == 1 and "RuntimeError: power cut" in order.last_error
    else:
        assert order.provisioning_attempts == 0 and order.last_error == ""

    assert provision_due(provisioner=provisioner, now=second) == 1
    order.refresh_from_db()
    assert order.state == "active"
    assert [(s.step, s.finished_at) for s in steps_of(order)] == [
        ("allocate_devices", first), ("prepare_environment", first), ("install_ssh_keys", second),
        ("health_check", second), ("deliver_access", second)]
    assert provisioner.done == Counter({(order.pk, step): 1 for step in STEPS})


def test_a_failing_health_check_three_times_fails_the_order(shop_db):
    order = paid_order()
    Host.objects.filter(devices__slots__booking=order.booking).update(status=Host.Status.MAINTENANCE)
    provisioner = Counting()
    for attempt in range(1, MAX_FAILURES + 1):
        assert provision_due(provisioner=provisioner, now=order.starts_at + attempt * MINUTE) == 1
        order.refresh_from_db()
        assert order.provisioning_attempts == attempt
        assert order.last_error.startswith("health_check: host(s) not active: fra1-h100-")
        assert order.state == ("failed" if attempt == MAX_FAILURES else "provisioning")
    assert [s.step for s in steps_of(order)] == STEPS[:3]  # the steps before it finished once
    assert provision_due(provisioner=provisioner, now=order.starts_at + 9 * MINUTE) == 0
    assert AuditEntry.objects.filter(object_id=str(order.pk), action="provisioning_error").count() == MAX_FAILURES
    assert sum(provisioner.done.values()) == 3


def test_a_failing_first_step_starts_provisioning_and_records_the_error(shop_db):
    class NoDevices(SimulatedProvisioner):
        def allocate_devices(self, order):
            raise ProvisioningError("inventory service down")

    order = paid_order()
    assert provision_due(provisioner=NoDevices(), now=order.starts_at) == 1
    order.refresh_from_db()
    assert (order.state, order.provisioning_attempts) == ("provisioning", 1)
    assert order.last_error == "allocate_devices: inventory service down"
    assert not steps_of(order)


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_never_run_a_step_twice():
    shop.load_shop()
    user = shop.customer()
    orders = [paid_order(user=user, txid=f"{i + 1:02x}" * 32) for i in range(6)]
    now = max(o.starts_at for o in orders) + MINUTE
    provisioner = Counting(pause=0.005)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker():
        try:
            connection.ensure_connection()
            barrier.wait(timeout=30)
            provision_due(provisioner=provisioner, now=now)
        except BaseException as exc:  # noqa: BLE001 - checked below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads) and not errors
    provision_due(provisioner=provisioner, now=now)  # finishes whatever a skipped claim left
    assert set(Order.objects.filter(pk__in=[o.pk for o in orders]).values_list("state", flat=True)) == {"active"}
    assert provisioner.done == Counter({(o.pk, step): 1 for o in orders for step in STEPS})
    assert ProvisioningStep.objects.count() == len(orders) * len(STEPS)


def test_the_step_names_match_the_provisioner_methods():
    for step in Step:
        assert callable(getattr(SimulatedProvisioner, step.value))
