"""Real ``anchorgpu worker`` processes with the real provisioner, killed with SIGKILL inside each step (before
the step's remote work and after it, before the step is recorded) and restarted: each order ends active exactly
once, each step is recorded once, and the host holds exactly one container and one volume per order, none
orphaned. Written against what the worker does, not how: the same test holds for steps run inside a transaction
and for steps run outside one under a lease."""

from __future__ import annotations

import random
import time
from collections import Counter
from datetime import timedelta

import pytest

from anchorgpu.access.containers import container_name, volume_name
from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.lifecycle import terms_end_due
from anchorgpu.orders.wipes import wipes_due
from anchorgpu.orders.models import Order, ProvisioningStep
from anchorgpu.orders.provisioning import PLAN
from tests import shop
from tests.faults.provisioners import marks
from tests.faults.workers import wait_for

from .pausing import RealWorkers
from .shop_hosts import bind_fleet, key_pair, place

# db_race: the shop's invariants are scanned afterwards too (tests/conftest.py), as after the other fault tests.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db_race]
STEPS = [step.value for step in PLAN]


def _states(orders) -> set[str]:
    return set(Order.objects.filter(pk__in=[o.pk for o in orders]).values_list("state", flat=True))


def test_a_worker_killed_inside_each_step_and_restarted_leaves_one_container_per_order(make_fleet, real_access,
                                                                                      tmp_path):
    fleet = make_fleet(1, cards=4)
    test_host = fleet.hosts[0]
    shop.load_shop()
    bind_fleet(fleet, real_access)
    keys = key_pair(tmp_path, "alice")
    user = shop.customer()
    orders = []
    for n in range(2):
        order = place(user, keys)
        shop.pay(order, txid=shop.txid("btc", n))
        orders.append(order)
    log = tmp_path / "marks.log"
    workers = RealWorkers(tmp_path, log, fleet.operator_key, pause=0.4)
    first = orders[0].pk
    try:
        for step in STEPS:
            for event in ("enter", "remote"):  # before the remote work, then after it and before the record
                worker = workers.start()
                wait_for(lambda w=worker, s=step, e=event: any(
                    m.event == e and m.pid == w.pid and m.order == first and m.step == s for m in marks(log)),
                    timeout=120, what=f"a worker at {event} of {step}", workers=workers)
                worker.kill()
        rng = random.Random(11)
        for _ in range(3):  # and at random moments, a podman command on the host possibly under way
            worker = workers.start()
            time.sleep(rng.uniform(2.0, 6.0))
            worker.kill()
        worker = workers.start()
        wait_for(lambda: _states(orders) == {"active"}, timeout=180, what="every order to be active",
                 workers=workers)
        # Stopped only once it sweeps: a worker still starting has no SIGTERM handler yet (the workers killed
        # before it may have made every order active already).
        wait_for(worker.ready, what="the last worker to sweep", workers=workers)
        assert worker.stop() == 0, workers.outputs()
    finally:
        workers.kill_all()

    killed_inside = {(m.pid, m.step) for m in marks(log) if m.event == "remote" and m.order == first} - {
        (m.pid, m.step) for m in marks(log) if m.event == "exit" and m.order == first}
    assert {step for _pid, step in killed_inside} == set(STEPS), "the kills after the remote work did not land"
    for order in orders:
        recorded = [s.step for s in ProvisioningStep.objects.filter(order=order).order_by("id")]
        assert recorded == STEPS, (order.reference, recorded)
        changes = list(AuditEntry.objects.filter(object_id=str(order.pk), action="order_state")
                       .values_list("to_state", flat=True))
        assert Counter(changes)["active"] == 1, changes
    on_host = test_host.containers()
    names = Counter(c["Names"][0] for c in on_host)
    assert names == Counter({container_name(o.reference): 1 for o in orders}), names
    assert all(c["State"] == "running" for c in on_host)
    assert sorted(test_host.volumes()) == sorted(volume_name(o.reference) for o in orders)

    # The term ends: nothing of either order is left on the host.
    ended = max(Order.objects.get(pk=o.pk).ends_at for o in orders) + timedelta(seconds=1)
    terms_end_due(now=ended)
    wipes_due(now=ended)
    assert _states(orders) == {"completed"}
    assert test_host.containers() == [] and test_host.volumes() == []
