"""The operators' fault pages: mark a host faulty and clear it from the admin, with a reason; bad input is a
message and a 4xx or the form again, never a 500; the order's page shows the credit and issues it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse
from django.utils import timezone

from anchorgpu.audit.models import AuditEntry
from anchorgpu.billing.models import CreditNote
from anchorgpu.fleet import services as fleet_services
from anchorgpu.fleet.models import Host, HostFault
from anchorgpu.orders.faults import host_mark_faulty
from anchorgpu.orders.models import Order, ProvisioningStep
from tests import shop

from .test_faults import active, host_of


@pytest.fixture
def running(db):
    shop.load_shop()
    return active(shop.customer(), 1)


def test_mark_faulty_needs_a_reason_and_writes_audit(admin_client, running):
    host = host_of(running)
    url = reverse("admin:fleet_hostfault_mark", args=[host.pk])
    page = admin_client.get(url)
    assert page.status_code == 200 and "Mark faulty" in page.content.decode()
    refused = admin_client.post(url, {"reason": "   ", "at_0": "", "at_1": ""})
    assert refused.status_code == 200 and "errornote" in refused.content.decode()
    assert not HostFault.objects.exists()
    future = timezone.now() + timedelta(days=1)
    refused = admin_client.post(url, {"reason": "x", "at_0": f"{future:%Y-%m-%d}", "at_1": f"{future:%H:%M:%S}"})
    assert refused.status_code == 200 and "future" in refused.content.decode()
    done = admin_client.post(url, {"reason": "GPU 0 lost", "at_0": "", "at_1": ""})
    assert done.status_code == 302 and done.url == reverse("admin:fleet_host_change", args=[host.pk])
    fault = HostFault.objects.get()
    assert fault.orders == [running.pk] and fault.marked_by == "admin"
    assert AuditEntry.objects.filter(action="host_mark_faulty", object_id=str(host.pk)).exists()
    again = admin_client.post(url, {"reason": "again", "at_0": "", "at_1": ""})
    assert again.status_code == 200 and "already marked faulty" in again.content.decode()
    page = admin_client.get(reverse("admin:fleet_host_change", args=[host.pk])).content.decode()
    assert "Clear fault" in page and "GPU 0 lost" in page


def test_clear_fault_from_its_page_credits_the_order(admin_client, running):
    host = host_of(running)
    now = timezone.now()  # the term as if it had started yesterday: the admin's clock is the real one
    Order.objects.filter(pk=running.pk).update(starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=2))
    fault = host_mark_faulty(host=host, actor="ops", reason="dead PSU", at=now - timedelta(hours=2))
    page = admin_client.get(reverse("admin:fleet_hostfault_change", args=[fault.pk])).content.decode()
    assert reverse("admin:fleet_hostfault_clear", args=[fault.pk]) in page and running.reference in page
    url = reverse("admin:fleet_hostfault_clear", args=[fault.pk])
    early = fault.started_at - timedelta(hours=1)
    refused = admin_client.post(url, {"reason": "fixed", "at_0": f"{early:%Y-%m-%d}", "at_1": f"{early:%H:%M:%S}"})
    assert refused.status_code == 200 and "after it started" in refused.content.decode()
    done = admin_client.post(url, {"reason": "PSU swapped", "at_0": "", "at_1": ""})
    assert done.status_code == 302
    assert Host.objects.get(pk=host.pk).sale_block == ""
    note = CreditNote.objects.get()
    assert note.invoice.order_id == running.pk and note.amount > 0
    again = admin_client.post(url, {"reason": "again", "at_0": "", "at_1": ""})
    assert again.status_code == 200 and "already cleared" in again.content.decode()


def test_missing_rows_and_the_list_action(admin_client, running):
    assert admin_client.get(reverse("admin:fleet_hostfault_mark", args=[999999])).status_code == 302
    assert admin_client.get(reverse("admin:fleet_hostfault_clear", args=[999999])).status_code == 302
    host = host_of(running)
    response = admin_client.post(reverse("admin:fleet_host_changelist"),
                                 {"action": "mark_faulty", ACTION_CHECKBOX_NAME: [host.pk]})
    assert response.status_code == 302 and response.url == reverse("admin:fleet_hostfault_mark", args=[host.pk])
    assert admin_client.get(reverse("admin:fleet_hostfault_changelist")).status_code == 200


def test_a_view_only_operator_cannot_mark(client, running):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    staff = get_user_model().objects.create_user(username="viewer", password="x" * 12, is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_host"))
    client.force_login(staff)
    host = host_of(running)
    assert client.post(reverse("admin:fleet_hostfault_mark", args=[host.pk]), {"reason": "x"}).status_code == 403
    assert not HostFault.objects.exists()


def test_the_fault_block_is_lifted_only_by_its_clear(running):
    host = host_of(running)
    host_mark_faulty(host=host, actor="ops", reason="fans")
    with pytest.raises(fleet_services.HostUpdateRefused, match="clear the fault"):
        fleet_services.host_update(host=Host.objects.get(pk=host.pk), actor="ops", changes={"sale_block": ""})
    assert Host.objects.get(pk=host.pk).sale_block == "Fault: fans"


def test_the_order_page_shows_the_credit_and_issues_it(admin_client, running):
    ProvisioningStep.objects.filter(order=running, step="deliver_access").update(
        finished_at=running.starts_at + timedelta(hours=1))
    page = admin_client.get(reverse("admin:orders_order_change", args=[running.pk])).content.decode()
    assert "Service credit" in page and "late access" in page
    url = reverse("admin:orders_order_issue_credit", args=[running.pk])
    assert url in page
    assert admin_client.post(url, {}).status_code == 302
    note = CreditNote.objects.get()
    assert note.invoice.order_id == running.pk
    order = Order.objects.get(pk=running.pk)
    assert order.refund_due  # owed back: the queue shows it
    assert admin_client.post(url, {}).status_code == 302  # again: nothing more
    assert CreditNote.objects.count() == 1
    page = admin_client.get(reverse("admin:orders_order_change", args=[running.pk])).content.decode()
    assert url not in page
