"""What the operator sees and does about an order's access (issue 24, item 7): each step with its start, end,
duration and output, the lease holder and the next try; retry a step, re-check health, wipe now."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.access_checks import order_health_recheck
from anchorgpu.orders.errors import NotAllowedNow
from anchorgpu.orders.lifecycle import order_end_now
from anchorgpu.orders.models import Order, ProvisioningStep
from anchorgpu.orders.provisioner import HostUnavailable, SimulatedProvisioner
from anchorgpu.orders.provisioning import WIPE
from anchorgpu.orders.queue import PaymentQueueEntry
from anchorgpu.orders.retry import MAX_WIPE_FAILURES
from anchorgpu.orders.wipes import order_wipe_now, wipes_due
from tests import shop

pytestmark = pytest.mark.django_db


@pytest.fixture
def active():
    shop.load_shop()
    return shop.activate(shop.place(shop.customer()))


def fresh(order) -> Order:
    return Order.objects.get(pk=order.pk)


def page(client, order) -> str:
    response = client.get(reverse("admin:orders_order_change", args=[order.pk]))
    assert response.status_code == 200
    return response.content.decode()


class Down(SimulatedProvisioner):
    name = "down"

    def health_check(self, order):
        raise HostUnavailable("ssh: connect to fra1-h100-01: No route to host", host="fra1-h100-01")

    def wipe(self, order):
        raise HostUnavailable("ssh: connect to fra1-h100-01: No route to host", host="fra1-h100-01")


def test_the_order_page_shows_each_step_with_start_end_duration_and_output(admin_client, active):
    html = page(admin_client, active)
    steps = list(active.steps.order_by("id"))
    assert len(steps) == 5 and all(s.started_at for s in steps)
    assert "Access steps" in html and "Duration" in html and "Allocate the cards" in html
    assert steps[0].started_at.strftime("%Y-%m-%d %H:%M:%S") in html
    assert "&quot;devices&quot;: [" in html  # the output, pretty-printed
    assert "Re-check health" in html and "Wipe now" not in html


def test_the_lease_holder_and_next_try_are_shown_and_retry_the_step_clears_them(admin_client):
    shop.load_shop()
    order = shop.place(shop.customer())
    shop.pay(order)
    now = timezone.now()
    Order.objects.filter(pk=order.pk).update(state="provisioning", lease_owner="gpu-worker-2:311:c0ffee",
                                             lease_step="prepare_environment", lease_started_at=now,
                                             lease_until=now + timedelta(minutes=15),
                                             retry_at=now + timedelta(minutes=2))
    html = page(admin_client, order)
    assert "held by gpu-worker-2:311:c0ffee" in html and "Next try not before" in html
    url = reverse("admin:orders_order_retry_step", args=[order.pk])
    assert admin_client.post(url, {"reason": ""}).status_code == 200
    assert admin_client.post(url, {"reason": "that worker's machine is gone"}).status_code == 302
    order = fresh(order)
    assert order.lease_owner == "" and order.retry_at is None
    assert AuditEntry.objects.get(object_id=str(order.pk), action="step_retry").actor == "admin"


def test_re_check_health_records_what_the_check_said_ok_or_not(admin_client, active):
    url = reverse("admin:orders_order_health_recheck", args=[active.pk])
    assert admin_client.post(url, {"reason": "customer says a card is slow"}).status_code == 302
    entry = AuditEntry.objects.get(object_id=str(active.pk), action="health_recheck")
    assert entry.data["ok"] is True and entry.data["detail"]["devices"] == 1 and entry.actor == "admin"
    failed = order_health_recheck(order=active, actor="operator", reason="again", provisioner=Down())
    assert failed.data["ok"] is False and "No route to host" in failed.data["error"]
    assert fresh(active).state == "active"  # a re-check changes nothing else
    html = page(admin_client, active)
    assert "Health re-check (by admin)" in html and "No route to host" in html
    assert ProvisioningStep.objects.filter(order=active, step="health_check").count() == 1


def test_wipe_now_wipes_an_ended_order_whose_wipe_was_failing(admin_client, active):
    with pytest.raises(NotAllowedNow, match="end its term"):
        order_wipe_now(order=active, actor="operator", reason="too early")
    order_end_now(order=active, actor="operator", reason="customer asked")
    at = fresh(active).wipe_due_at
    for _attempt in range(MAX_WIPE_FAILURES):
        wipes_due(provisioner=Down(), now=at + timedelta(days=1))
        at = fresh(active).retry_at or at
    order = fresh(active)
    assert order.wipe_attempts == MAX_WIPE_FAILURES and PaymentQueueEntry.objects.filter(pk=order.pk).exists()
    html = page(admin_client, order)
    assert "could not be wiped" in html and "Wipe now" in html and "Wipe the disks: failed attempt" in html
    wiped, error = order_wipe_now(order=order, actor="operator", reason="host back", provisioner=Down())
    assert not wiped and "No route to host" in error and fresh(order).wipe_attempts == MAX_WIPE_FAILURES + 1
    url = reverse("admin:orders_order_wipe_now", args=[order.pk])
    assert admin_client.post(url, {"reason": "host repaired"}).status_code == 302
    order = fresh(order)
    wipe = ProvisioningStep.objects.get(order=order, step=WIPE)
    assert wipe.detail["devices"] and order.wipe_due_at is None and not PaymentQueueEntry.objects.filter(
        pk=order.pk).exists()
    assert AuditEntry.objects.filter(object_id=str(order.pk), action="wipe_now").count() == 2
    assert admin_client.post(url, {"reason": "again"}).status_code == 200  # already wiped: refused on the form
    assert ProvisioningStep.objects.filter(order=order, step=WIPE).count() == 1
