"""The API's extension operations (issue 25): read what can be bought, extend, and the 4xx answers."""

from __future__ import annotations

import pytest
from django.urls import reverse

from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.lifecycle import terms_end_due
from anchorgpu.orders.models import Order
from tests import shop
from tests.web.test_api_orders import alice, api, bob_api, error  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def running(user) -> Order:
    order = shop.place(user)
    shop.pay(order)
    provision_due()
    return Order.objects.get(pk=order.pk)


def paths(order):
    ref = order.reference
    return (reverse("api-order-extension", kwargs={"reference": ref}),
            reverse("api-order-extend", kwargs={"reference": ref}))


def test_read_the_options_then_extend(api, alice):  # noqa: F811
    order = running(alice)
    read, extend = paths(order)
    answer = api.get(read).json()
    assert answer["extendable"] and answer["days"] == [3, 7, 30] and set(answer["prices"]) == {"3", "7", "30"}
    assert answer["refusal"] is None and answer["starts_at"].endswith("Z")
    made = api.post(extend, {"days": 7, "asset": "btc"})
    assert made.status_code == 201, made.content
    ext = made.json()
    assert ext["extends"] == order.reference and ext["term"] == 7 and ext["state"] == "awaiting_payment"
    assert ext["total"] == answer["prices"]["7"] and ext["quote"]["address"]
    assert made["Location"] == reverse("api-order", kwargs={"reference": ext["reference"]})
    again = api.get(read).json()
    assert not again["extendable"] and again["refusal"] == "pending" and again["pending"] == ext["reference"]
    parent = api.get(reverse("api-order", kwargs={"reference": order.reference})).json()
    assert parent["extensions"] == [ext["reference"]] and parent["extends"] is None
    error(api.post(extend, {"days": 3, "asset": "btc"}), 409, "pending")


def test_bad_input_is_a_4xx(api, bob_api, alice):  # noqa: F811
    order = running(alice)
    read, extend = paths(order)
    error(api.post(extend, {"days": 5, "asset": "btc"}), 400, "bad_days")
    error(api.post(extend, {"days": "three", "asset": "btc"}), 400)
    error(api.post(extend, {"days": 3, "asset": "nope"}), 400, "bad_asset")
    error(api.post(extend, {"days": 3}), 400)
    error(api.post(extend, {"days": 3, "asset": "btc", "extra": 1}), 400)
    error(bob_api.get(read), 404)
    error(bob_api.post(extend, {"days": 3, "asset": "btc"}), 404)
    terms_end_due(now=order.ends_at)
    answer = api.get(read).json()
    assert answer["refusal"] == "not_extendable" and "has not ended" in answer["message"]
    error(api.post(extend, {"days": 3, "asset": "btc"}), 409, "not_extendable")
