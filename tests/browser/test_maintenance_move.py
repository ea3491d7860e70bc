"""The operator puts a host into maintenance over a paid, running term and moves that term to other cards from
the admin; the customer's order page then shows the move, with the new cards and what happened to the data."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from anchorgpu.allocation.models import Booking
from anchorgpu.allocation.selectors import current_slots
from anchorgpu.fleet.models import Device, Host
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.models import Order
from anchorgpu.orders.move_wipes import move_wipes_due
from tests import shop

pytestmark = pytest.mark.django_db(transaction=True)


def _cards(order: Order) -> set[str]:
    return set(Device.objects.filter(slots__in=current_slots(order.booking_id)).values_list("uid", flat=True))


def test_the_operator_moves_a_paid_term_out_of_a_maintenance_window(live_server, browser, shot):
    shop.load_shop()
    alice = shop.customer()
    order = shop.activate(shop.place(alice))
    old_cards = _cards(order)
    host = Host.objects.get(devices__uid__in=old_cards)
    get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-for-tests-only-1")

    context = browser.new_context(viewport={"width": 1366, "height": 900}, locale="en-GB")
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "ops")
    page.fill("#id_password", "pw-for-tests-only-1")
    page.click("form.account-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")

    page.goto(f"{live_server.url}/admin/fleet/host/{host.pk}/maintenance/")
    start = timezone.now() + timedelta(minutes=10)
    end = start + timedelta(days=1)
    page.fill("#id_start_0", f"{start:%Y-%m-%d}")
    page.fill("#id_start_1", f"{start:%H:%M:%S}")
    page.fill("#id_end_0", f"{end:%Y-%m-%d}")
    page.fill("#id_end_1", f"{end:%H:%M:%S}")
    page.fill("#id_reason", "replace a power supply")
    page.click("#content-main form input[type=submit]")
    window = Booking.objects.get(kind=Booking.Kind.MAINTENANCE, host=host)
    page.wait_for_url(re.compile(rf".*/admin/allocation/booking/{window.pk}/change/"))
    assert order.reference in page.locator("ul.messagelist").inner_text()
    listed = page.locator(".field-bookings_to_move")
    assert order.reference in listed.inner_text() and "to " in listed.inner_text()
    shot(page, "window")

    listed.locator("a.move-link").click()
    page.wait_for_url(re.compile(r".*/moves/\?booking=.*"))
    assert "Nothing on the old machine's disks is copied" in page.inner_text("#content-main")
    page.fill("#id_reason", "host in maintenance: moved to other cards")
    page.click("#move_form input[type=submit]")
    page.wait_for_url(re.compile(rf".*/admin/allocation/booking/{window.pk}/change/"))
    assert page.locator("ul.messagelist li.success").count() == 1, page.content()
    assert "nothing to move" in page.locator(".field-bookings_to_move").inner_text()
    shot(page, "moved")
    context.close()

    order.refresh_from_db()
    new_cards = _cards(order)
    assert order.state == "provisioning" and not new_cards & old_cards
    move_wipes_due()
    provision_due()
    order.refresh_from_db()
    assert order.state == "active"

    client = Client()
    client.force_login(alice)
    customer = browser.new_context(locale="en-GB")
    customer.add_cookies([{"name": settings.SESSION_COOKIE_NAME,
                           "value": client.cookies[settings.SESSION_COOKIE_NAME].value, "url": live_server.url}])
    mine = customer.new_page()
    mine.goto(f"{live_server.url}/en/orders/{order.reference}/")
    moves = mine.locator("#moves")
    text = moves.inner_text()
    assert "Your term was moved" in text
    for uid in old_cards | new_cards:
        assert uid in text
    assert "nothing on the old machine's disks is copied to the new cards" in text
    shot(mine, "customer")
    customer.close()
