"""The host admin's discovery action and inventory table, against the replaying SSH host (replay_host.py:
nvidia-smi and podman replay output recorded on real machines; there is no GPU here)."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse

from anchorgpu.fleet.models import Host
from tests import factories as f

from .replay_host import ADDRESS

pytestmark = pytest.mark.django_db


def _connected(replay, product, name, *, port=None):
    h = f.host(product, cards=0)
    Host.objects.filter(pk=h.pk).update(name=name, ssh_address=ADDRESS, ssh_port=port or replay.port,
                                        ssh_user="root", host_key=replay.host_key)
    return Host.objects.get(pk=h.pk)


def _act(admin_client, hosts):
    return admin_client.post(reverse("admin:fleet_host_changelist"),
                             {"action": "read_inventory", ACTION_CHECKBOX_NAME: [h.pk for h in hosts]}, follow=True)


def test_the_action_reads_each_host_and_reports_errors_as_messages(admin_client, replay, ssh_settings):
    replay.use("l40s")
    h100 = f.product("h100-sxm", name="H100 SXM 80 GB", memory=80)
    good = _connected(replay, h100, "box-1")
    dead = _connected(replay, h100, "box-2", port=1)
    response = _act(admin_client, [good, dead])
    assert response.status_code == 200
    texts = [str(m) for m in response.context["messages"]]
    assert any(t.startswith("box-1: 1 card(s) read; not sold: Discovery: ") and "NVIDIA L40S" in t for t in texts)
    assert any(t.startswith("box-2 could not be read:") and "unreachable" in t for t in texts)
    page = admin_client.get(reverse("admin:fleet_host_change", args=[good.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "GPU-00000000-0000-0000-0000-000000000000" in html and "46068 MiB" in html and "595.80" in html
    assert "nvidia-ctk cdi generate" in html and "pin-host-key" in html


def test_the_change_page_of_a_host_never_read(admin_client):
    h = f.host(f.product("a100", name="A100 SXM 80 GB"), cards=1)
    page = admin_client.get(reverse("admin:fleet_host_change", args=[h.pk]))
    assert page.status_code == 200 and "Not read yet." in page.content.decode()


def test_the_operator_edits_the_ssh_fields_through_the_host_service(admin_client, replay):
    h = f.host(f.product("a100", name="A100 SXM 80 GB"), cards=0)
    data = {"name": h.name, "site": h.site_id, "product": h.product_id, "status": h.status, "notes": "",
            "ssh_address": "10.0.0.7", "ssh_port": 2222, "ssh_user": "gpu", "host_key": replay.host_key,
            "runtime": "docker", "sale_block": "", "devices-TOTAL_FORMS": 0, "devices-INITIAL_FORMS": 0,
            "devices-MIN_NUM_FORMS": 0, "devices-MAX_NUM_FORMS": 1000}
    response = admin_client.post(reverse("admin:fleet_host_change", args=[h.pk]), data)
    assert response.status_code == 302
    h.refresh_from_db()
    assert (h.ssh_address, h.ssh_port, h.ssh_user, h.runtime) == ("10.0.0.7", 2222, "gpu", "docker")
