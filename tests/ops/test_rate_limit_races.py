"""The limits hold when the attempts come at once: each request is a thread with its own connection,
released together by a barrier (see tests/allocation/test_race.py), against the real views. On SQLite
the writers take turns on the database's lock; on PostgreSQL on the keys' rows."""

from __future__ import annotations

import json
import threading

import pytest
from django.conf import settings
from django.contrib.auth import forms as auth_forms
from django.test import Client
from django.urls import reverse
from django.utils import translation

from anchorgpu.accounts import totp, two_factor, two_factor_views
from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.accounts.models import TwoFactorDevice
from anchorgpu.ops.models import RateEvent
from anchorgpu.ops.ratelimit import LIMITS
from anchorgpu.orders.models import Order
from tests import shop
from tests.allocation.test_race import run_together

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db_race]

PASSWORD = "pw-for-tests-only-races"


@pytest.fixture(autouse=True)
def limits_on(settings):
    settings.ANCHORGPU_RATE_LIMITS = True


def url(name: str, **kwargs) -> str:
    with translation.override("en"):
        return reverse(name, kwargs=kwargs)


def wrong_code(device: TwoFactorDevice) -> str:
    """Six digits that are none of the codes accepted now (the step before, now and after)."""
    step = totp.time_step(two_factor._now().timestamp())
    accepted = {totp.hotp(totp.secret_bytes(device.secret), step + d) for d in (-1, 0, 1)}
    return next(f"{n:06d}" for n in range(123456, 10**6) if f"{n:06d}" not in accepted)


def test_fifty_wrong_two_factor_codes_at_once_check_at_most_the_limit(monkeypatch):
    operator = shop.customer("ops@example.com", password=PASSWORD)
    device = TwoFactorDevice.objects.create(user=operator, secret=totp.new_secret())
    TwoFactorDevice.objects.filter(pk=device.pk).update(confirmed_at=two_factor._now())
    first = Client()
    assert first.post(url("login"), {"username": operator.username, "password": PASSWORD}).status_code == 302
    cookie = first.cookies[settings.SESSION_COOKIE_NAME].value
    checked, lock = [], threading.Lock()
    real_verify = two_factor_views.two_factor_verify

    def counting_verify(**kwargs):
        with lock:
            checked.append(kwargs["code"])
        return real_verify(**kwargs)

    monkeypatch.setattr(two_factor_views, "two_factor_verify", counting_verify)
    code = wrong_code(device)

    def attempt():
        client = Client()
        client.cookies[settings.SESSION_COOKIE_NAME] = cookie
        return client.post(url("login_code"), {"code": code}).status_code

    results = run_together([attempt] * 50)
    statuses = [value for outcome, value in results if outcome == "granted"]
    assert len(statuses) == 50, [value for outcome, value in results if outcome != "granted"]
    limit = LIMITS["two_factor"][0].count
    assert len(checked) == limit  # not 14 or 23: each code checked took its slot first
    assert statuses.count(400) == limit and statuses.count(429) == 50 - limit
    assert RateEvent.objects.filter(scope="2fa:account").count() == limit


def test_fifty_wrong_passwords_at_once_from_one_address_check_at_most_its_limit(monkeypatch):
    shop.customer()
    checked, lock = [], threading.Lock()
    real_authenticate = auth_forms.authenticate

    def counting_authenticate(request=None, **credentials):
        with lock:
            checked.append(credentials["username"])
        return real_authenticate(request, **credentials)

    monkeypatch.setattr(auth_forms, "authenticate", counting_authenticate)

    def attempt(n: int):
        def job():
            return Client().post(url("login"), {"username": f"user{n}@example.com", "password": "x"}).status_code
        return job

    results = run_together([attempt(n) for n in range(50)])
    statuses = [value for outcome, value in results if outcome == "granted"]
    limit = LIMITS["login"][0].count
    assert len(checked) == limit and statuses.count(200) == limit and statuses.count(429) == 50 - limit
    assert Client(REMOTE_ADDR="198.51.100.7").post(url("login"), {  # another address is not held up
        "username": "alice@example.com", "password": "correct horse battery"}).status_code == 302


def test_twenty_five_right_passwords_at_once_from_one_address_all_sign_in_and_leave_room():
    """Only failures count, also at once: the right passwords beyond the address's limit wait for the slots
    being checked to be given back instead of being refused, and an operator signs in afterwards."""
    for n in range(25):
        shop.customer(f"customer{n}@example.com", password=PASSWORD)

    def sign_in(n: int):
        def job():
            return Client().post(url("login"), {"username": f"customer{n}@example.com",
                                                "password": PASSWORD}).status_code
        return job

    results = run_together([sign_in(n) for n in range(25)])
    statuses = [value for outcome, value in results if outcome == "granted"]
    assert statuses == [302] * 25, results
    assert not RateEvent.objects.filter(scope="login:address").exists()
    operator = shop.customer("ops@example.com", password=PASSWORD)
    operator.is_staff = True
    operator.save()
    assert Client().post(url("login"), {"username": "ops@example.com", "password": PASSWORD}).status_code == 302


def test_wrong_and_right_passwords_at_once_from_one_address_check_at_most_the_limit_of_wrong_ones(monkeypatch):
    """Credential stuffing from one address with some right guesses among them: at most the limit's worth of
    wrong passwords is checked, and every right one that was checked signs in."""
    for n in range(5):
        shop.customer(f"known{n}@example.com", password=PASSWORD)
    wrong, lock = [], threading.Lock()
    real_authenticate = auth_forms.authenticate

    def counting_authenticate(request=None, **credentials):
        user = real_authenticate(request, **credentials)
        if user is None:
            with lock:
                wrong.append(credentials["username"])
        return user

    monkeypatch.setattr(auth_forms, "authenticate", counting_authenticate)

    def attempt(n: int):
        def job():
            username, password = ((f"known{n}@example.com", PASSWORD) if n < 5 else (f"user{n}@example.com", "x"))
            return Client().post(url("login"), {"username": username, "password": password}).status_code
        return job

    results = run_together([attempt(n) for n in range(45)])
    statuses = [value for outcome, value in results if outcome == "granted"]
    limit = LIMITS["login"][0].count
    assert len(statuses) == 45 and len(wrong) <= limit
    assert statuses.count(200) == len(wrong) and statuses.count(429) == 45 - len(wrong) - statuses.count(302)
    assert RateEvent.objects.filter(scope="login:address").count() == len(wrong)
    assert not RateEvent.objects.filter(undecided=True).exists()


def test_thirty_wrong_passwords_at_once_on_one_account_leave_at_most_ten_unguarded(monkeypatch):
    """From thirty addresses (no address limit is reached): each attempt takes the account's slot before its
    password is checked, so only the first ten can find the window open; the others are under attack, and of
    them only the e-mailed codes' limit (3) reach the code step (a decoy here: the passwords are wrong), the
    rest get 429."""
    shop.customer()
    waits, lock = [], threading.Lock()
    real_note = two_factor_views.rate_note

    def watching_note(request, action, **kwargs):
        taken, wait = real_note(request, action, **kwargs)
        with lock:
            waits.append(wait)
        return taken, wait

    monkeypatch.setattr(two_factor_views, "rate_note", watching_note)

    def guess(n: int):
        def job():
            return Client(REMOTE_ADDR=f"203.0.113.{n + 1}").post(
                url("login"), {"username": "alice@example.com", "password": f"guess-{n}"}).status_code
        return job

    results = run_together([guess(n) for n in range(30)])
    statuses = sorted(value for _outcome, value in results)
    per_account, codes = LIMITS["login_account"][0].count, LIMITS["login_code_email"][0].count
    assert statuses == [200] * per_account + [302] * codes + [429] * (30 - per_account - codes)
    assert len(waits) == 30 and waits.count(0) == per_account


def order_body() -> dict:
    return {"product": "h100-sxm-80gb", "quantity": 1, "term": 3, "start": None, "environment": "pytorch-cuda124",
            "options": [], "name": "Alice Example", "email": "alice@example.com", "company": "", "country": "PT",
            "billing_address": "", "vat_id": "", "ssh_keys": [shop.ED25519], "asset": "btc", "accept": True}


def api_order(secret: str, key: str):
    def job():
        response = Client().post(url("api-orders"), data=json.dumps(order_body()), content_type="application/json",
                                 headers={"Authorization": f"Bearer {secret}", "Idempotency-Key": key})
        return response.status_code, response.json()
    return job


def test_forty_concurrent_orders_of_one_account_place_at_most_the_limit():
    shop.load_shop()  # 32 H100 cards: a start for each of the forty, so only the limit can refuse
    alice = shop.customer()
    _token, secret = api_token_create(user=alice, name="race")
    results = run_together([api_order(secret, f"key-{n}") for n in range(40)])
    answers = [value for outcome, value in results if outcome == "granted"]
    assert len(answers) == 40, [value for outcome, value in results if outcome != "granted"]
    limit = LIMITS["order"][0].count
    statuses = sorted(status for status, _body in answers)
    assert statuses == [201] * limit + [429] * (40 - limit), [body for status, body in answers if status >= 500]
    assert Order.objects.filter(user=alice).count() == limit
    assert {body["error"]["code"] for status, body in answers if status == 429} == {"rate_limited"}


def test_twenty_concurrent_retries_of_one_key_make_one_order_and_are_never_refused():
    shop.load_shop()
    alice = shop.customer()
    _token, secret = api_token_create(user=alice, name="race")
    results = run_together([api_order(secret, "the-same-key")] * 20)
    answers = [value for outcome, value in results if outcome == "granted"]
    assert len(answers) == 20
    statuses = sorted(status for status, _body in answers)
    assert statuses == [200] * 19 + [201], [body for _status, body in answers]
    assert len({body["reference"] for _status, body in answers}) == 1
    assert Order.objects.filter(user=alice).count() == 1
    assert RateEvent.objects.filter(scope="order:account").count() == 1  # one order made, one counted
