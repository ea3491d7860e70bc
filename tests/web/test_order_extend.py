"""The order page's "Extend this term" and the reminder banner (issue 25)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.lifecycle import terms_end_due
from anchorgpu.orders.models import Order
from anchorgpu.payments.models import Asset
from tests import shop

pytestmark = pytest.mark.django_db


def running(user, **kw) -> Order:
    order = shop.place(user, **kw)
    shop.pay(order)
    provision_due()
    return Order.objects.get(pk=order.pk)


def url(name, order) -> str:
    return reverse(name, kwargs={"reference": order.reference})


def test_the_order_page_offers_the_extension_with_its_price_and_places_it(client, alice):
    order = running(alice)
    text = client.get(url("order", order)).content.decode()
    assert "Extend this term" in text and 'id="extend"' in text
    assert "3 days, until" in text and "USD" in text
    btc = Asset.objects.get(code="btc")
    response = client.post(url("order_extend", order), {"days": "3", "asset": btc.code})
    ext = Order.objects.get(extends=order)
    assert response.status_code == 302 and response["Location"] == url("order", ext)
    text = client.get(url("order", ext)).content.decode()
    assert "This order adds 3 days, on the same cards, to the term of" in text and order.reference in text
    assert ext.quote.address in text  # its own payment
    parent = client.get(url("order", order)).content.decode()
    assert ext.reference in parent and "waiting for its payment" in parent


def test_bad_days_another_customers_order_and_an_ended_order_are_refused(client, alice):
    order = running(alice)
    btc = Asset.objects.get(code="btc")
    assert client.post(url("order_extend", order), {"days": "5", "asset": btc.code}).status_code == 400
    bob = shop.customer("bob@example.com")
    other = shop.place(bob, product="a100-sxm-80gb")
    assert client.post(url("order_extend", other), {"days": "3", "asset": btc.code}).status_code == 404
    terms_end_due(now=order.ends_at)
    response = client.post(url("order_extend", order), {"days": "3", "asset": btc.code})
    assert response.status_code == 409 and "has not ended" in response.content.decode()
    assert not Order.objects.filter(extends=order).exists()


def test_the_banner_a_day_before_the_end(client, alice, monkeypatch):
    order = running(alice, options=("checkpoint-storage-1tb",))
    from django.utils import timezone

    later = order.ends_at - timedelta(hours=5)
    monkeypatch.setattr(timezone, "now", lambda: later)
    text = " ".join(client.get(url("order", order)).content.decode().split())
    assert "Your term ends within a day" in text
    assert "your container and its /workspace volume, and the host's local NVMe scratch disk" in text
    assert "Your off-machine checkpoint storage is object storage at the site" in text
    assert 'href="#extend"' in text


def test_the_timelines_tell_the_extension(client, alice):
    order = running(alice)
    btc = Asset.objects.get(code="btc")
    client.post(url("order_extend", order), {"days": "3", "asset": btc.code})
    ext = Order.objects.get(extends=order)
    shop.pay(ext, txid=shop.txid("btc", 1))
    parent = " ".join(client.get(url("order", order)).content.decode().split())
    assert f"Extension {ext.reference} placed: 3 days" in parent and "Extended by 3 days" in parent
    own = " ".join(client.get(url("order", ext)).content.decode().split())
    assert f"Status: added to order {order.reference}." in own and "Invoice INV-" in own
