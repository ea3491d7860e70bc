"""Issue 24's fault test: a real ``anchorgpu worker`` killed with SIGKILL inside each access step in turn, and
inside the wipe, then restarted. The step's remote work runs outside any transaction under a lease, so a kill
leaves the lease and whatever the step had made on the host; the next worker on this machine takes the dead
worker's lease over at once, repeats the step, finds what it had made and carries on. Both databases.

The workers run the ledger provisioner (``provisioners.Ledger``): each step writes what it made for the order
to a ledger file before its pause, or "found" when a repeat finds it there.
"""

from __future__ import annotations

from collections import Counter

import pytest

from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.lifecycle import order_end_now
from anchorgpu.orders.models import Order, ProvisioningStep
from anchorgpu.orders.provisioning import PLAN, WIPE
from tests import shop
from tests.faults.provisioners import ledger, marks
from tests.faults.workers import Workers, wait_for
from tests.orders.test_fulfilment import paid_order

pytestmark = pytest.mark.django_db(transaction=True)
STEPS = [step.value for step in PLAN]


def test_a_worker_killed_inside_each_step_and_the_wipe_ends_active_once_and_makes_nothing_twice(tmp_path):
    shop.load_shop()
    order = paid_order()
    log, book = tmp_path / "marks.log", tmp_path / "ledger.log"
    workers = Workers(tmp_path, log, pause=0.6, provisioner="tests.faults.provisioners.Ledger", ledger=book)
    killed: list[tuple[int, str]] = []

    def made_by(pid: int, step: str) -> bool:
        return any(p == pid and o == order.pk and s == step for p, o, s, _what in ledger(book))

    try:
        for step in [*STEPS, WIPE]:
            worker = workers.start()
            if step == WIPE:  # the term ends early: the wipe is due at once and is the worker's to do
                wait_for(lambda: Order.objects.get(pk=order.pk).state == "active", what="the order to be active",
                         workers=workers)
                order_end_now(order=Order.objects.get(pk=order.pk), actor="operator", reason="fault test")
            # Inside the step: it has made its thing on the host and is still at work, nothing recorded yet.
            wait_for(lambda w=worker, s=step: made_by(w.pid, s), what=f"a worker inside {step}", workers=workers)
            worker.kill()
            killed.append((worker.pid, step))
            assert not ProvisioningStep.objects.filter(order=order, step=step).exists()
        worker = workers.start()
        wait_for(lambda: ProvisioningStep.objects.filter(order=order, step=WIPE).exists(),
                 what="the wipe to be recorded", workers=workers)
        wait_for(worker.ready, what="the last worker to sweep", workers=workers)
        assert worker.stop() == 0, workers.outputs()
    finally:
        workers.kill_all()

    order = Order.objects.get(pk=order.pk)
    assert order.state == "completed" and order.lease_owner == "" and order.wipe_due_at is None
    moves = list(AuditEntry.objects.filter(object_id=str(order.pk), action="order_state")
                 .order_by("id").values_list("to_state", flat=True))
    assert moves.count("active") == 1 and moves.count("provisioning") == 1 and moves[-1] == "completed"
    recorded = Counter(ProvisioningStep.objects.filter(order=order).values_list("step", flat=True))
    assert recorded == Counter([*STEPS, WIPE])
    entries = ledger(book)
    created = Counter((o, s) for _p, o, s, what in entries if what == "created")
    assert created == Counter({(order.pk, s): 1 for s in [*STEPS, WIPE]}), entries  # nothing made twice
    for pid, step in killed:  # each killed step was repeated by another worker, which found its thing
        assert any(p != pid and s == step and what == "found" for p, _o, s, what in entries), (step, entries)
    # No worker started a step again once its record was committed.
    for row in ProvisioningStep.objects.filter(order=order):
        starts = [m.at for m in marks(log) if m.event == "enter" and m.order == order.pk and m.step == row.step]
        assert max(starts) < row.finished_at.timestamp(), (row.step, starts, row.finished_at)
