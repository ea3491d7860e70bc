"""An order paid, provisioned by the real provisioner on a real test host, logged into with the customer's key,
its cards and only its cards, the term ended, the login refused and the volume gone."""

from __future__ import annotations

from datetime import timedelta

import pytest

from anchorgpu.access.containers import container_name, volume_name
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.lifecycle import terms_end_due
from anchorgpu.orders.wipes import wipes_due
from anchorgpu.orders.models import Order, ProvisioningStep
from anchorgpu.orders.provisioning import PLAN
from tests import shop

from .shop_hosts import Login, bind_fleet, key_pair, login_refused, place

pytestmark = pytest.mark.django_db(transaction=True)

OTHER_CARD = ('mknod /tmp/other c 195 {minor} && ( : < /tmp/other ) 2>&1; echo "status $?"; rm -f /tmp/other')


def _paid(user, keys, n: int = 0, **kwargs) -> Order:
    order = place(user, keys, **kwargs)
    shop.pay(order, txid=shop.txid("btc", n))
    return Order.objects.get(pk=order.pk)


def _booked_indices(order: Order) -> list[int]:
    return sorted(order.booking.slots.values_list("device__index", flat=True))


def test_two_orders_on_one_host_each_see_only_their_cards_and_the_term_end_wipes(make_fleet, real_access, tmp_path):
    fleet = make_fleet(1, cards=4)
    test_host = fleet.hosts[0]
    shop.load_shop()
    (row,) = bind_fleet(fleet, real_access)
    alice, bob = key_pair(tmp_path, "alice"), key_pair(tmp_path, "bob")
    first = _paid(shop.customer("alice@example.com"), alice, quantity=1)
    second = _paid(shop.customer("bob@example.com"), bob, 1, quantity=2)

    provision_due()
    first, second = (Order.objects.get(pk=o.pk) for o in (first, second))
    assert (first.state, second.state) == ("active", "active"), (first.last_error, second.last_error)
    assert first.provisioner == "ssh"
    for order in (first, second):
        assert [s.step for s in ProvisioningStep.objects.filter(order=order).order_by("id")] == [p.value for p in PLAN]
    cards_first, cards_second = _booked_indices(first), _booked_indices(second)
    assert not set(cards_first) & set(cards_second)
    assert (first.access_host, first.access_user) == (test_host.address, "root")
    assert first.access_port != second.access_port

    health = ProvisioningStep.objects.get(order=second, step="health_check").detail["hosts"][row.name]
    assert health["seen_uuids"] == sorted(test_host.cards[i].uuid for i in cards_second)
    assert set(health["other_open"].values()) == {"denied"}
    assert health["problems"] == [] and health["cuda_version"] == "12.4.1"

    uuid_of = {c.index: c.uuid for c in test_host.cards}
    delivered = ProvisioningStep.objects.get(order=first, step="deliver_access").detail
    for order, keys, mine in ((first, alice, cards_first), (second, bob, cards_second)):
        with Login(order.access_host, order.access_port, order.access_user, keys) as login:
            status, listing = login.run("ls /dev")
            assert status == 0
            nodes = sorted(n for n in listing.split() if n.startswith("nvidia") and n[6:].isdigit())
            assert nodes == sorted(f"nvidia{i}" for i in mine)
            status, uuids = login.run("nvidia-smi --query-gpu=uuid --format=csv,noheader")
            assert sorted(uuids.split()) == sorted(uuid_of[i] for i in mine)
            # A booked node gets past the device cgroup (the driver is missing: "no such device"); another
            # order's card node, made inside, is refused by the cgroup.
            _status, mine_open = login.run(f": < /dev/nvidia{mine[0]}")
            assert "No such device" in mine_open
            other = next(i for i in range(len(test_host.cards)) if i not in mine)
            _status, denied = login.run(OTHER_CARD.format(minor=other))
            assert "Operation not permitted" in denied
            status, whoami = login.run("id -u; df -Pk /workspace | tail -1")
            assert whoami.split()[0] == "0"
            if order == first:
                assert login.host_key_fingerprint() == delivered["host_key"]
    # Bob's key does not open Alice's container.
    assert "Authentication" in login_refused(first.access_host, first.access_port, "root", bob)
    assert {c["Names"][0] for c in test_host.containers()} == {container_name(first.reference),
                                                                 container_name(second.reference)}

    terms_end_due(now=first.ends_at + timedelta(seconds=1))
    wipes_due(now=first.ends_at + timedelta(seconds=1))  # the worker's next sweep
    first = Order.objects.get(pk=first.pk)
    assert first.state == "completed"
    proof = ProvisioningStep.objects.get(order=first, step="wipe").detail
    assert proof["proven"] is True
    assert proof["hosts"][row.name]["login"] == "refused"
    assert login_refused(first.access_host, first.access_port, "root", alice) == "connection refused"
    assert container_name(first.reference) not in {c["Names"][0] for c in test_host.containers()}
    assert volume_name(first.reference) not in test_host.volumes()
    assert test_host.podman("container", "exists", container_name(first.reference)).returncode == 1
    # The other order is untouched.
    with Login(second.access_host, second.access_port, "root", bob) as login:
        assert login.run("true")[0] == 0
