"""The real provisioner against test hosts that misbehave: a changed host key, a missing image, a host that
vanishes in the middle of a step, cards that disagree with the fleet record; and steps run again after a crash
(found, not made twice; a container made with another configuration is made again)."""

from __future__ import annotations

import pytest

from anchorgpu.access import containers
from anchorgpu.access.provisioner import SSHProvisioner
from anchorgpu.catalog.models import Environment
from anchorgpu.fleet.models import Device
from anchorgpu.orders.models import Order
from anchorgpu.orders.provisioner import HostRefused, HostUnavailable
from tests import shop

from .shop_hosts import ENVIRONMENT, bind_fleet, key_pair, place

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def one_host(make_fleet, real_access, tmp_path):
    fleet = make_fleet(1, cards=2)
    shop.load_shop()
    (row,) = bind_fleet(fleet, real_access)
    order = place(shop.customer(), key_pair(tmp_path, "alice"))
    shop.pay(order)
    return fleet.hosts[0], row, Order.objects.get(pk=order.pk)


def _order_containers(test_host, order) -> list[dict]:
    return test_host.containers(label=f"anchorgpu.order={order.reference}")


def test_a_changed_host_key_is_refused_and_blocks_the_host(one_host):
    test_host, row, order = one_host
    test_host.restart_sshd_with_new_key()
    with pytest.raises(HostRefused) as refused:
        SSHProvisioner().allocate_devices(order)
    assert refused.value.block_host is True
    assert refused.value.host == row.name
    assert order.reference in str(refused.value) and "not the pinned one" in str(refused.value)
    assert _order_containers(test_host, order) == []


def test_a_missing_image_is_refused_before_anything_is_made(one_host):
    test_host, row, order = one_host
    Environment.objects.filter(slug=ENVIRONMENT).update(image="localhost/not-on-this-host:1.0")
    provisioner = SSHProvisioner()
    assert provisioner.allocate_devices(order)["hosts"][row.name]["host_reports"] == 2
    with pytest.raises(HostRefused) as refused:
        provisioner.prepare_environment(order)
    assert refused.value.block_host is False
    assert "does not have image localhost/not-on-this-host:1.0" in str(refused.value)
    assert order.reference in str(refused.value) and row.name in str(refused.value)
    assert _order_containers(test_host, order) == []
    assert containers.volume_name(order.reference) not in test_host.volumes()


def test_cards_that_disagree_with_the_fleet_record_are_refused_and_block_the_host(one_host):
    test_host, row, order = one_host
    device = order.booking.slots.get().device
    Device.objects.filter(pk=device.pk).update(gpu_uuid="GPU-00000000-0000-0000-0000-000000000000")
    with pytest.raises(HostRefused) as refused:
        SSHProvisioner().allocate_devices(order)
    assert refused.value.block_host is True
    assert f"gpu{device.index} GPU-00000000-0000-0000-0000-000000000000" in str(refused.value)
    assert order.reference in str(refused.value)


class CutsTheLink(SSHProvisioner):
    """Deletes the host's link once the container exists, while the step still has work to do on the host."""

    def __init__(self, test_host):
        self.test_host = test_host

    def _wait_for_sshd(self, conn, part, spec, where):
        self.test_host.cut()
        return super()._wait_for_sshd(conn, part, spec, where)


def test_a_host_that_vanishes_in_the_middle_of_a_step_is_unavailable(one_host):
    test_host, row, order = one_host
    provisioner = CutsTheLink(test_host)
    provisioner.allocate_devices(order)
    with pytest.raises(HostUnavailable) as gone:
        provisioner.prepare_environment(order)
    assert gone.value.host == row.name
    assert order.reference in str(gone.value) and "prepare_environment" in str(gone.value)
    # And the next attempt cannot even connect.
    with pytest.raises(HostUnavailable):
        SSHProvisioner().prepare_environment(order)


def test_each_step_run_again_finds_what_it_made_and_a_container_of_another_config_is_made_again(one_host):
    test_host, row, order = one_host
    provisioner = SSHProvisioner()
    provisioner.allocate_devices(order)
    first = provisioner.prepare_environment(order)["hosts"][row.name]
    assert first["action"] == "made"
    made = _order_containers(test_host, order)
    assert len(made) == 1
    again = provisioner.prepare_environment(order)["hosts"][row.name]
    assert again["action"] == "found" and again["host_key"] == first["host_key"]
    assert [c["Id"] for c in _order_containers(test_host, order)] == [made[0]["Id"]]
    for _ in range(2):
        provisioner.install_ssh_keys(order)
        provisioner.health_check(order)
        provisioner.deliver_access(order)
    # A container left by an attempt with another configuration (here: made by hand, without the digest label).
    name = containers.container_name(order.reference)
    test_host.podman("rm", "-f", name, check=True)
    test_host.podman("create", "--name", name, "--label", f"anchorgpu.order={order.reference}",
                     "localhost/anchorgpu-test:cuda12.4", "sleep", "600", check=True)
    redone = provisioner.prepare_environment(order)["hosts"][row.name]
    assert redone["action"] == "made again"
    assert len(_order_containers(test_host, order)) == 1
    proof = provisioner.wipe(order)
    assert proof["proven"] and _order_containers(test_host, order) == []
    assert provisioner.wipe(order)["proven"]  # a wipe run again proves it again


class CrashesMidWipe(SSHProvisioner):
    """Removes the container, then dies before the volume (as a worker killed in the middle of a wipe would)."""

    def __init__(self, test_host):
        self.test_host = test_host

    def wipe(self, order):
        self.test_host.podman("rm", "-f", containers.container_name(order.reference), check=True)
        raise RuntimeError("the worker died here")


def test_a_wipe_cut_short_is_finished_and_proven_by_the_next_sweep(one_host):
    from datetime import timedelta

    from anchorgpu.orders.fulfilment import provision_due
    from anchorgpu.orders.lifecycle import terms_end_due
    from anchorgpu.orders.models import ProvisioningStep
    from anchorgpu.orders.wipes import wipes_due

    test_host, row, order = one_host
    provision_due()
    order = Order.objects.get(pk=order.pk)
    assert order.state == "active", order.last_error
    after = order.ends_at + timedelta(seconds=1)
    terms_end_due(now=after)  # the term ends and the cards are released; the wipe is due
    wipes_due(now=after, provisioner=CrashesMidWipe(test_host))
    order = Order.objects.get(pk=order.pk)
    assert order.state == "completed" and order.wipe_due_at is not None  # the wipe was not proven: still due
    assert not ProvisioningStep.objects.filter(order=order, step="wipe").exists()
    assert containers.volume_name(order.reference) in test_host.volumes()
    wipes_due(now=after + timedelta(hours=1))  # past the back-off
    order = Order.objects.get(pk=order.pk)
    assert order.state == "completed" and order.wipe_due_at is None
    wipes = list(ProvisioningStep.objects.filter(order=order, step="wipe"))
    assert len(wipes) == 1 and wipes[0].detail["proven"] is True
    assert wipes[0].detail["hosts"][row.name]["login"] == "refused"
    assert _order_containers(test_host, order) == [] and test_host.volumes() == []


def test_the_worker_keeps_what_went_wrong_with_the_host_on_the_order(one_host):
    from anchorgpu.orders.fulfilment import provision_due

    test_host, row, order = one_host
    test_host.restart_sshd_with_new_key()
    provision_due()
    order = Order.objects.get(pk=order.pk)
    assert order.state != "active" and not order.steps.exists()
    assert row.name in order.last_error and "not the pinned one" in order.last_error
    test_host.cut()
    provision_due()
    order = Order.objects.get(pk=order.pk)
    assert order.state != "active" and not order.steps.exists()
    assert row.name in order.last_error and order.reference in order.last_error
