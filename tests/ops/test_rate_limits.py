"""Log-in, sign-up, password reset, "I've paid" and order creation are rate-limited per address and per
account, with 429 and Retry-After, on the pages and in the API; other visitors are not affected."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth import SESSION_KEY
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from anchorgpu.ops.models import RateEvent, RateKey
from anchorgpu.ops.ratelimit import LIMITS, rate_events_purge
from anchorgpu.orders.models import Order
from anchorgpu.web.api_tokens import api_token_create
from tests import shop
from tests.web.test_checkout import form_data

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def limits_on(settings):
    settings.ANCHORGPU_RATE_LIMITS = True


def url(name, **kwargs):
    with translation.override("en"):
        return reverse(name, kwargs=kwargs)


def test_failed_log_ins_per_address_refuse_that_address_and_keep_what_was_typed(client):
    shop.load_shop()
    shop.customer()
    for _ in range(30):  # right passwords give their slot back: they never fill the window
        assert client.post(url("login"), {"username": "alice@example.com",
                                          "password": "correct horse battery"}).status_code == 302
        client.logout()
    per_address = LIMITS["login"][0].count
    for n in range(per_address):
        assert client.post(url("login"), {"username": f"user{n}@example.com", "password": "x"}).status_code == 200
    refused = client.post(url("login"), {"username": "alice@example.com", "password": "correct horse battery"})
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= LIMITS["login"][0].seconds
    page = refused.content.decode()
    assert "Too many failed log-ins came from your IP address" in page
    assert 'value="alice@example.com"' in page and "correct horse battery" not in page
    # Someone else, from another address, logs in to their own account at once.
    shop.customer("bob@example.com")
    other = Client(REMOTE_ADDR="198.51.100.7")
    assert other.post(url("login"), {"username": "bob@example.com", "password": "correct horse battery"}).status_code \
        == 302
    assert not RateEvent.objects.filter(key__contains="example.com").exists()  # keys are hashes, never e-mails


def test_the_forwarded_address_is_believed_only_when_the_deployment_says_a_proxy_appends_it(client, settings):
    shop.load_shop()
    for n in range(LIMITS["login"][0].count):
        client.post(url("login"), {"username": f"user{n}@example.com", "password": "x"})
    attempt = {"username": "carol@example.com", "password": "x"}
    assert settings.ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY is False  # the default
    assert client.post(url("login"), attempt, HTTP_X_FORWARDED_FOR="192.0.2.44").status_code == 429  # written by it
    settings.ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY = True
    assert client.post(url("login"), attempt, HTTP_X_FORWARDED_FOR="192.0.2.44").status_code == 200  # the proxy's
    for n in range(LIMITS["login"][0].count):
        Client(HTTP_X_FORWARDED_FOR="192.0.2.45").post(url("login"), {"username": f"u{n}@example.com", "password": "x"})
    behind = Client(HTTP_X_FORWARDED_FOR="192.0.2.44, 192.0.2.45")  # only the last hop, appended by the proxy, counts
    assert behind.post(url("login"), attempt).status_code == 429


def test_ten_wrong_passwords_from_ten_addresses_do_not_keep_the_owner_out(mailoutbox):
    shop.load_shop()
    alice = shop.customer()
    per_account = LIMITS["login_account"][0].count
    for n in range(per_account):
        guesser = Client(REMOTE_ADDR=f"203.0.113.{n + 1}")
        assert guesser.post(url("login"), {"username": "Alice@Example.com ", "password": f"guess-{n}"}).status_code \
            == 200
    owner = Client(REMOTE_ADDR="198.51.100.50")
    step = owner.post(url("login"), {"username": "alice@example.com", "password": "correct horse battery"})
    assert step.status_code == 302 and step.url == url("login_code")  # a second factor is asked, not a lock-out
    assert SESSION_KEY not in owner.session and len(mailoutbox) == 1 and mailoutbox[0].to == [alice.email]
    code = re.search(r"^(\d{6})$", mailoutbox[0].body, re.MULTILINE).group(1)
    page = owner.get(url("login_code")).content.decode()
    assert "we have sent a 6-digit code" in page
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    assert owner.post(url("login_code"), {"code": wrong}).status_code == 400 and SESSION_KEY not in owner.session
    signed_in = owner.post(url("login_code"), {"code": code})
    assert signed_in.status_code == 302 and int(owner.session[SESSION_KEY]) == alice.pk
    assert owner.post(url("login_code"), {"code": code}).status_code == 302  # spent: the session is signed in now
    # A guesser who found the password still meets the code, which only the mailbox has.
    thief = Client(REMOTE_ADDR="203.0.113.99")
    assert thief.post(url("login"), {"username": "alice@example.com", "password": "correct horse battery"}).url \
        == url("login_code")
    assert SESSION_KEY not in thief.session


def test_an_account_under_attack_on_a_shop_without_email_waits(settings, client):
    settings.ANCHORGPU_EMAIL_DISABLED = True
    shop.load_shop()
    shop.customer()
    for n in range(LIMITS["login_account"][0].count):
        Client(REMOTE_ADDR=f"203.0.113.{n + 1}").post(url("login"), {"username": "alice@example.com", "password": "x"})
    refused = client.post(url("login"), {"username": "alice@example.com", "password": "correct horse battery"})
    assert refused.status_code == 429 and SESSION_KEY not in client.session
    assert 1 <= int(refused["Retry-After"]) <= LIMITS["login_account"][0].seconds
    assert "this shop sends none: try again in 15 minutes" in refused.content.decode()


def test_sign_up_and_password_reset(client):
    shop.load_shop()
    for n in range(LIMITS["signup"][0].count):
        client.post(url("signup"), {"email": f"new{n}@example.com", "password1": "x", "password2": "y"})
    late = client.post(url("signup"), {"email": "late@example.com", "name": "Late Comer", "password1": "pw-typed"})
    assert late.status_code == 429 and int(late["Retry-After"]) > 0
    page = late.content.decode()  # the form again, with what was typed but the password
    assert "this was refused. Try again in 60 minutes" in page and 'value="late@example.com"' in page
    assert 'value="Late Comer"' in page and "pw-typed" not in page
    for _ in range(LIMITS["password_reset"][1].count):
        assert client.post(url("password_reset"), {"email": "alice@example.com"}).status_code == 302
    refused = client.post(url("password_reset"), {"email": "alice@example.com"})
    assert refused.status_code == 429 and 'value="alice@example.com"' in refused.content.decode()
    assert client.get(url("password_reset")).status_code == 200  # only attempts (POSTs) count


def test_ive_paid_and_orders_on_the_pages_and_in_the_api(client):
    shop.load_shop()
    alice = shop.customer()
    client.force_login(alice)
    order = shop.place(alice)
    claim = url("order_claim_payment", reference=order.reference)
    for _ in range(LIMITS["claim"][0].count):
        client.post(claim, {"txid": ""})
    refused = client.post(claim, {"txid": "a1" * 32})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    page = refused.content.decode()  # the order page again, with the transaction id typed
    assert order.reference in page and "this was refused. Try again in 10 minutes" in page and "a1" * 32 in page

    _token, secret = api_token_create(user=alice, name="cli")
    api = Client(REMOTE_ADDR="203.0.113.20")
    headers = {"Authorization": f"Bearer {secret}"}
    paid = api.post(url("api-order-paid", reference=order.reference), data="{}", content_type="application/json",
                    headers=headers)
    assert paid.status_code == 429 and paid.json()["error"]["code"] == "rate_limited"  # the same account
    assert int(paid["Retry-After"]) > 0 and "try again in" in paid.json()["error"]["message"]



def test_orders_count_only_when_placed_and_a_retry_is_never_refused(client):
    shop.load_shop()
    alice = shop.customer()
    client.force_login(alice)
    checkout = url("checkout", slug="h100-sxm-80gb")
    for _ in range(LIMITS["order"][0].count + 1):  # form errors are not orders
        assert client.post(checkout, form_data(quantity="0", submission="web-typo")).status_code == 400
    first = client.post(checkout, form_data(submission="web-first"))
    assert first.status_code == 302 and RateEvent.objects.filter(scope="order:account").count() == 1

    _token, secret = api_token_create(user=alice, name="cli")
    api = Client(REMOTE_ADDR="203.0.113.20")
    headers = {"Authorization": f"Bearer {secret}", "Idempotency-Key": "k-1"}
    body = json.dumps(api_order_body())
    made = api.post(url("api-orders"), data=body, content_type="application/json", headers=headers)
    assert made.status_code == 201
    RateEvent.objects.bulk_create([RateEvent(scope="order:account", key=_account_key(alice), at=timezone.now())
                                   for _ in range(LIMITS["order"][0].count)])  # the window is full now
    for _ in range(5):  # retries of an order that exists are answered, never refused
        again = api.post(url("api-orders"), data=body, content_type="application/json", headers=headers)
        assert again.status_code == 200 and again.json()["reference"] == made.json()["reference"]
    assert client.post(checkout, form_data(submission="web-first")).url == first.url
    refused = api.post(url("api-orders"), data=body, content_type="application/json",
                       headers={**headers, "Idempotency-Key": "k-2"})
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    page = client.post(checkout, form_data(submission="web-second", name="Alice Typed-This"))
    assert page.status_code == 429 and int(page["Retry-After"]) > 0
    text = page.content.decode()
    assert "Nothing was ordered this time" in text and 'value="Alice Typed-This"' in text and "web-second" in text
    assert Order.objects.filter(user=alice).count() == 2  # the page's first, the API's k-1


def api_order_body() -> dict:
    return {"product": "h100-sxm-80gb", "quantity": 1, "term": 3, "start": None, "environment": "pytorch-cuda124",
            "options": [], "name": "Alice Example", "email": "alice@example.com", "company": "", "country": "PT",
            "billing_address": "", "vat_id": "", "ssh_keys": [shop.ED25519], "asset": "btc", "accept": True}


def _account_key(user) -> str:
    import hashlib
    import hmac

    from django.conf import settings

    return hmac.new(settings.SECRET_KEY.encode(), f"order:account:{user.pk}".encode(), hashlib.sha256).hexdigest()


def test_old_attempts_stop_counting_and_are_purged():
    now = timezone.now()
    RateEvent.objects.create(scope="login:address", key="k", at=now - timedelta(days=2))
    RateEvent.objects.create(scope="login:address", key="k", at=now)
    RateKey.objects.create(scope="login:address", key="old", used_at=now - timedelta(days=2))
    RateKey.objects.create(scope="login:address", key="k", used_at=now)
    assert rate_events_purge(now=now) == 1 and RateEvent.objects.count() == 1
    assert list(RateKey.objects.values_list("key", flat=True)) == ["k"]  # a key unused for a day goes too
