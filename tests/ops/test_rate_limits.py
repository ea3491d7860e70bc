"""Log-in, sign-up, password reset, "I've paid" and order creation are rate-limited per address and per
account, with 429 and Retry-After, on the pages and in the API; other visitors are not affected."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from anchorgpu.ops.models import RateEvent
from anchorgpu.ops.ratelimit import LIMITS, rate_events_purge
from anchorgpu.web.api_tokens import api_token_create
from tests import shop

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def limits_on(settings):
    settings.ANCHORGPU_RATE_LIMITS = True


def url(name, **kwargs):
    with translation.override("en"):
        return reverse(name, kwargs=kwargs)


def test_log_in_attempts_per_account_then_per_address(client):
    shop.load_shop()
    shop.customer()
    per_account = LIMITS["login"][1].count
    for _ in range(per_account):
        assert client.post(url("login"), {"username": "alice@example.com", "password": "wrong"}).status_code == 200
    refused = client.post(url("login"), {"username": "alice@example.com", "password": "correct horse battery"})
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= LIMITS["login"][1].seconds
    assert "Too many attempts" in refused.content.decode()
    # Someone else, from another address, logs in to their own account at once.
    other = Client(REMOTE_ADDR="198.51.100.7")
    shop.customer("bob@example.com")
    ok = other.post(url("login"), {"username": "bob@example.com", "password": "correct horse battery"})
    assert ok.status_code == 302
    # The same address guessing across accounts meets the per-address limit.
    per_address = LIMITS["login"][0].count
    for n in range(per_address - per_account):
        client.post(url("login"), {"username": f"user{n}@example.com", "password": "x"})
    assert client.post(url("login"), {"username": "carol@example.com", "password": "x"}).status_code == 429
    assert not RateEvent.objects.filter(key__contains="example.com").exists()  # keys are hashes, never e-mails


def test_sign_up_and_password_reset(client):
    shop.load_shop()
    for n in range(LIMITS["signup"][0].count):
        client.post(url("signup"), {"email": f"new{n}@example.com", "password1": "x", "password2": "y"})
    assert client.post(url("signup"), {"email": "late@example.com"}).status_code == 429
    for _ in range(LIMITS["password_reset"][1].count):
        assert client.post(url("password_reset"), {"email": "alice@example.com"}).status_code == 302
    assert client.post(url("password_reset"), {"email": "alice@example.com"}).status_code == 429
    assert client.get(url("password_reset")).status_code == 200  # only attempts (POSTs) count


def test_ive_paid_and_orders_on_the_pages_and_in_the_api(client):
    shop.load_shop()
    alice = shop.customer()
    client.force_login(alice)
    order = shop.place(alice)
    claim = url("order_claim_payment", reference=order.reference)
    for _ in range(LIMITS["claim"][0].count):
        client.post(claim, {"txid": ""})
    refused = client.post(claim, {"txid": ""})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0

    _token, secret = api_token_create(user=alice, name="cli")
    api = Client(REMOTE_ADDR="203.0.113.20")
    headers = {"Authorization": f"Bearer {secret}"}
    paid = api.post(url("api-order-paid", reference=order.reference), data="{}", content_type="application/json",
                    headers=headers)
    assert paid.status_code == 429 and paid.json()["error"]["code"] == "rate_limited"  # the same account
    assert int(paid["Retry-After"]) > 0 and "try again in" in paid.json()["error"]["message"]

    RateEvent.objects.filter(scope="order:account").delete()
    now = timezone.now()
    RateEvent.objects.bulk_create([RateEvent(scope="order:account", key=_account_key(alice), at=now)
                                   for _ in range(LIMITS["order"][0].count)])
    body = {"product": "h100-sxm-80gb", "quantity": 1, "term": 3, "start": None, "environment": "pytorch-cuda124",
            "options": [], "name": "Alice Example", "email": "alice@example.com", "company": "", "country": "PT",
            "billing_address": "", "vat_id": "", "ssh_keys": [shop.ED25519], "asset": "btc", "accept": True}
    created = api.post(url("api-orders"), data=json.dumps(body), content_type="application/json",
                       headers={**headers, "Idempotency-Key": "k-1"})
    assert created.status_code == 429
    checkout = client.post(url("checkout", slug="h100-sxm-80gb"), {"quantity": "1"})
    assert checkout.status_code == 429


def _account_key(user) -> str:
    import hashlib
    import hmac

    from django.conf import settings

    return hmac.new(settings.SECRET_KEY.encode(), f"order:account:{user.pk}".encode(), hashlib.sha256).hexdigest()


def test_old_attempts_stop_counting_and_are_purged():
    now = timezone.now()
    RateEvent.objects.create(scope="login:address", key="k", at=now - timedelta(days=2))
    RateEvent.objects.create(scope="login:address", key="k", at=now)
    assert rate_events_purge(now=now) == 1 and RateEvent.objects.count() == 1
