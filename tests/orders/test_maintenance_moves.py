"""A maintenance window over paid terms offers moves, moves them, and is then honoured; one that cannot be
honoured says so (both passes)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from anchorgpu.allocation.models import Booking
from anchorgpu.allocation.periods import Period, merge
from anchorgpu.allocation.selectors import current_slots
from anchorgpu.fleet.models import Device, Host
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.maintenance import maintenance_enter, maintenance_hits, maintenance_move_all
from anchorgpu.orders.models import Move, OperatorEvent, Order
from anchorgpu.orders.move_wipes import move_wipes_due
from tests import shop
from tests.fleet.test_admin import _maintenance_post

pytestmark = pytest.mark.django_db
DAY = timedelta(days=1)


@pytest.fixture
def alice(db):
    shop.load_shop()
    return shop.customer()


def host_of(order: Order) -> Host:
    return Host.objects.filter(devices__slots__in=current_slots(order.booking_id)).distinct().get()


def covered(window: Booking, device: Device, span: Period) -> bool:
    pieces = merge(Period(s, e) for s, e in window.slots.filter(device=device).values_list("starts_at", "ends_at"))
    return not span.minus(pieces)


def test_maintenance_over_paid_terms_offers_moves_and_is_then_fully_booked(alice):
    first = shop.activate(shop.place(alice, quantity=2))
    second = shop.place(shop.customer("bob@example.com"))
    shop.pay(second, txid=shop.txid("btc", 1))
    provision_due()
    second = Order.objects.get(pk=second.pk)
    host = host_of(first)
    assert host_of(second) == host  # the best fit fills one host first
    now = timezone.now().replace(microsecond=0)
    result, hits = maintenance_enter(host=host, start=now, end=now + 2 * DAY, actor="ops", reason="psu swap", now=now)
    window = result.booking
    assert {h.booking.pk for h in hits} == {first.booking_id, second.booking_id}
    assert all(h.proposal.possible and h.text == "" for h in hits)
    for hit in hits:  # never onto the host in maintenance
        assert not Device.objects.filter(pk__in=hit.proposal.to_devices, host=host).exists()
    busy = set(current_slots(first.booking_id).values_list("device_id", flat=True))
    for device in host.devices.all():  # cut around the terms: the busy cards get no part of the window
        assert window.slots.filter(device=device).exists() == (device.pk not in busy and not
                                                                current_slots(second.booking_id)
                                                                .filter(device=device).exists())
    later = timezone.now()
    outcomes = maintenance_move_all(window=window, actor="ops", now=later)
    assert [o.error for o in outcomes] == ["", ""]
    assert Move.objects.count() == 2
    assert maintenance_hits(window=window, now=later) == []
    span = Period(later.replace(microsecond=0), now + 2 * DAY)
    assert all(covered(window, device, span) for device in host.devices.all())  # the window is honoured
    for order in (first, second):
        order.refresh_from_db()
        assert order.state == "provisioning" and host_of(order) != host
        move = order.moves.get()
        assert move.reason.startswith(f"maintenance of host {host.name}")
    move_wipes_due()
    provision_due()
    assert set(Order.objects.filter(pk__in=[first.pk, second.pk]).values_list("state", flat=True)) == {"active"}


def test_a_window_that_cannot_be_honoured_says_so(alice):
    everything = shop.order_for_all_h200(alice, now=timezone.now())
    shop.pay(everything)
    everything = Order.objects.get(pk=everything.pk)
    host = Host.objects.filter(product__slug="h200-141gb").order_by("name").first()
    now = timezone.now().replace(microsecond=0)
    result, hits = maintenance_enter(host=host, start=now + DAY, end=now + 2 * DAY, actor="ops", reason="bios",
                                     now=now)
    assert len(hits) == 1 and not hits[0].proposal.possible
    assert hits[0].text.startswith("No other cards are free for this term: the window cannot be honoured for this "
                                   "booking.")
    assert not result.booking.slots.exists()  # the window stays cut around the term
    event = OperatorEvent.objects.get(order=everything, kind=OperatorEvent.Kind.MAINTENANCE_CONFLICT)
    assert "cannot be honoured" in event.text and host.name in event.text
    assert maintenance_move_all(window=result.booking, actor="ops", now=now)[0].error.startswith(
        "No other cards are free for this term")


def test_the_operator_moves_a_term_out_of_maintenance_in_the_admin(alice, admin_client):
    order = shop.activate(shop.place(alice))
    host = host_of(order)
    start = timezone.now() + timedelta(minutes=5)
    response = admin_client.post(reverse("admin:fleet_host_maintenance", args=[host.pk]),
                                 _maintenance_post(start, start + DAY), follow=True)
    assert response.status_code == 200
    window = Booking.objects.get(kind=Booking.Kind.MAINTENANCE, host=host)
    page = response.content.decode()
    assert "proposes a move" in page and "Move…" in page and "Move all…" in page
    moves_url = reverse("admin:allocation_booking_moves", args=[window.pk])
    page = admin_client.get(f"{moves_url}?booking={order.booking_id}").content.decode()
    assert order.reference in page and "Cards" in page
    busy = Device.objects.filter(host=host).exclude(slots__booking=order.booking).first()
    refused = admin_client.post(moves_url, {"booking": order.booking_id, "reason": "", "cards": busy.uid})
    assert refused.status_code == 200 and "is not free from" in refused.content.decode()
    done = admin_client.post(moves_url, {"booking": order.booking_id, "reason": "", "cards": ""}, follow=True)
    assert done.redirect_chain[-1][0] == reverse("admin:allocation_booking_change", args=[window.pk])
    assert "was moved" in done.content.decode() and "nothing to move" in done.content.decode()
    order.refresh_from_db()
    assert order.state == "provisioning" and host_of(order) != host
