"""A running term moved to another real test host: the old host's container and volume are wiped and its login
refused, access is prepared again on the new host's card, and the customer logs in there and sees only it."""

from __future__ import annotations

import pytest

from anchorgpu.access.containers import container_name, volume_name
from anchorgpu.allocation.selectors import current_slots
from anchorgpu.fleet.models import Device
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.models import Order
from anchorgpu.orders.move_wipes import move_wipes_due
from anchorgpu.orders.moves import order_move
from tests import shop

from .shop_hosts import Login, bind_fleet, key_pair, login_refused, place

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_moved_term_is_wiped_on_the_old_host_and_prepared_on_the_new_one(make_fleet, real_access, tmp_path):
    fleet = make_fleet(2, cards=2)
    shop.load_shop()
    rows = bind_fleet(fleet, real_access)
    alice = key_pair(tmp_path, "alice")
    order = place(shop.customer("alice@example.com"), alice, quantity=1)
    shop.pay(order)
    provision_due()
    order = Order.objects.get(pk=order.pk)
    assert order.state == "active", order.last_error
    (old_device,) = Device.objects.filter(slots__in=current_slots(order.booking_id))
    old_host = next(h for h, row in zip(fleet.hosts, rows, strict=True) if row.pk == old_device.host_id)
    new_row = next(row for row in rows if row.pk != old_device.host_id)
    new_host = fleet.hosts[rows.index(new_row)]
    before = (order.access_host, order.access_port)
    with Login(*before, "root", alice) as login:
        assert login.run("true")[0] == 0

    target = Device.objects.get(host=new_row, index=1)
    move = order_move(order=order, devices=[target.pk], actor="ops", reason="host maintenance")
    assert move_wipes_due() == 1
    move.refresh_from_db()
    proof = move.wipe_detail
    assert move.wiped_at is not None and proof["proven"] is True and list(proof["hosts"]) == [old_device.host.name]
    assert login_refused(*before, "root", alice) == "connection refused"
    assert old_host.podman("container", "exists", container_name(order.reference)).returncode == 1
    assert volume_name(order.reference) not in old_host.volumes()

    provision_due()
    order = Order.objects.get(pk=order.pk)
    assert order.state == "active", order.last_error
    assert order.access_host == new_host.address
    with Login(order.access_host, order.access_port, "root", alice) as login:
        status, uuids = login.run("nvidia-smi --query-gpu=uuid --format=csv,noheader")
        assert status == 0 and uuids.split() == [new_host.cards[1].uuid]
