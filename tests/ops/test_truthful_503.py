"""A lost database connection answers 503 saying what is known: a read changed nothing; a write may have
been saved (here the order was committed and the connection went after it), and sending it again the same
way returns the order it placed instead of placing a second one."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.test import Client
from django.urls import reverse
from django.utils import translation

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.api import orders as api_orders
from anchorgpu.orders.models import Order
from anchorgpu.web import order_views
from tests import shop
from tests.web.test_api_orders import Api, order_body
from tests.web.test_checkout import checkout_url, form_data

pytestmark = pytest.mark.django_db


def fails_once(real):
    """``real``, except that its first call meets a database gone away (after the order's commit)."""
    calls = []

    def wrapper(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args, **kwargs)
    return wrapper


def test_the_checkout_page_says_the_order_may_be_placed_and_the_same_form_finds_it(monkeypatch):
    shop.load_shop()
    client = Client()
    client.force_login(shop.customer())
    token = client.get(checkout_url()).context["form"].initial["submission"]
    monkeypatch.setattr(order_views, "redirect", fails_once(order_views.redirect))

    lost = client.post(checkout_url(), form_data(submission=token))

    assert lost.status_code == 503 and lost["Retry-After"] == "5"
    page = lost.content.decode()
    assert "nothing was saved" not in page and "no order was placed" not in page
    assert "we cannot tell whether what you sent was saved: it may have been" in page
    assert "press the same button again" in page
    with translation.override("en"):
        assert f'href="{reverse("orders")}"' in page
    assert Order.objects.count() == 1  # it was placed
    again = client.post(checkout_url(), form_data(submission=token))  # the customer presses the button again
    order = Order.objects.get()
    assert again.status_code == 302 and again.url == reverse("order", kwargs={"reference": order.reference})
    assert Order.objects.count() == 1


def test_the_api_says_the_order_may_be_placed_and_the_same_key_returns_it(monkeypatch):
    shop.load_shop()
    api = Api(Client(), api_token_create(user=shop.customer(), name="test")[1])
    monkeypatch.setattr(api_orders, "order_answer", fails_once(api_orders.order_answer))

    lost = api.post("/api/v1/orders", order_body(), key="after-the-commit")

    assert lost.status_code == 503 and lost["Retry-After"] == "5"
    error = lost.json()["error"]
    assert error["code"] == "database_unavailable" and "nothing was saved" not in error["message"]
    assert "it may have been" in error["message"] and "with the same Idempotency-Key" in error["message"]
    retried = api.post("/api/v1/orders", order_body(), key="after-the-commit")
    assert retried.status_code == 200 and retried["Idempotent-Replayed"] == "true"
    assert retried.json()["reference"] == Order.objects.get().reference and Order.objects.count() == 1


def test_a_read_says_nothing_was_changed_and_another_write_says_to_look_first(monkeypatch):
    shop.load_shop()
    alice = shop.customer()
    client = Client()
    client.force_login(alice)
    monkeypatch.setattr(order_views, "render", fails_once(order_views.render))
    read = client.get(reverse("orders"))
    assert read.status_code == 503 and "Nothing was changed: this page only reads" in read.content.decode()
    assert 'href="' not in read.content.decode()  # no link to follow for a read

    order = shop.place(alice)
    api = Api(Client(), api_token_create(user=alice, name="test")[1])
    monkeypatch.setattr(api_orders, "order_cancel", fails_once(api_orders.order_cancel))
    lost = api.post(f"/api/v1/orders/{order.reference}/cancel", {})
    assert lost.status_code == 503
    assert "look at the order before you send it again" in lost.json()["error"]["message"]
