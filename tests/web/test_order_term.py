"""The order page says when an as-soon-as-possible term runs, and offers a late payment the earliest free
start when its cards were taken (issue 20, item 4)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.models import Order
from tests import shop

pytestmark = pytest.mark.django_db

MINUTE, HOUR = timedelta(minutes=1), timedelta(hours=1)


def page(client, order) -> str:
    response = client.get(reverse("order", kwargs={"reference": order.reference}))
    assert response.status_code == 200
    return response.content.decode()


def test_an_asap_order_says_its_term_starts_when_access_is_ready(client):
    shop.load_shop()
    user = shop.customer()
    client.force_login(user)
    order = shop.place(user, term_days=7)
    text = page(client, order)
    assert "7 days from the moment your access is ready" in text
    shop.pay(order)
    assert "your term starts when it is ready" in page(client, order)
    provision_due()
    active = Order.objects.get(pk=order.pk)
    text = page(client, active)
    assert "days from the moment your access is ready (at the earliest" not in text  # fixed: its dates shown
    assert active.starts_at.strftime("%H:%M") in text and "term-late" not in text


def test_a_dated_order_shows_its_dates(client):
    shop.load_shop()
    user = shop.customer()
    client.force_login(user)
    start = (timezone.now() + timedelta(days=2)).replace(second=0, microsecond=0)
    order = shop.place(user, start=start)
    text = page(client, order)
    assert "days from the moment your access is ready (at the earliest" not in text and start.strftime("%H:%M") in text


def test_a_late_payment_without_cards_is_offered_the_earliest_start_and_can_take_it(client):
    shop.load_shop()
    user = shop.customer()
    client.force_login(user)
    t0 = timezone.now().replace(microsecond=0)  # the late events below happen in the hours to come
    order = shop.place(user, product="h200-141gb", quantity=16, term_days=3, now=t0)
    rival = shop.place(shop.customer("bob@example.com"), product="h200-141gb", quantity=16, term_days=3,
                       now=t0 + 3 * HOUR)
    shop.pay(order, now=t0 + 3 * HOUR + MINUTE, seen_at=t0 + 3 * HOUR)
    assert Order.objects.get(pk=order.pk).state == "paid_late"
    text = page(client, order)
    assert "Start my term at the earliest free time" in text and "refund address" in text.lower()

    other = shop.customer("eve@example.com")
    client.force_login(other)
    url = reverse("order_take_start", kwargs={"reference": order.reference})
    assert client.post(url).status_code == 404  # not hers
    client.force_login(user)
    response = client.post(url, follow=True)
    assert response.status_code == 200
    taken = Order.objects.get(pk=order.pk)
    assert taken.state == "paid" and taken.starts_at >= rival.booking.starts_at + timedelta(days=3)
    assert "Your term is booked again" in response.content.decode()
    again = client.post(url, follow=True)  # a second press: refused with a message, nothing changes
    assert again.status_code == 200 and Order.objects.get(pk=order.pk).booking_id == taken.booking_id
