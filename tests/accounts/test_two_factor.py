"""Operators' two-factor sign-in: enrolment, the code step after the password, recovery codes, turning it
off, the admin's door (required or not), customers untouched, the code step's rate limit, the audit log."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.contrib.auth import SESSION_KEY, get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from anchorgpu.accounts import totp, two_factor
from anchorgpu.accounts.models import RecoveryCode, TwoFactorDevice
from anchorgpu.audit.models import AuditEntry
from anchorgpu.ops.models import RateEvent
from anchorgpu.ops.ratelimit import LIMITS
from anchorgpu.production import admin_two_factor_required
from tests import shop
from tests.ops.test_rate_limits import page_text

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-only-2fa"


def url(name: str) -> str:
    with translation.override("en"):
        return reverse(name)


@pytest.fixture
def operator():
    return get_user_model().objects.create_user("ops@example.com", "ops@example.com", PASSWORD, is_staff=True,
                                                is_superuser=True)


def code_for(user, *, offset: int = 0) -> str:
    """The code of the step ``offset`` steps after the one the shop's clock is in now."""
    device = TwoFactorDevice.objects.get(user=user)
    now = two_factor._now().timestamp()
    return totp.hotp(totp.secret_bytes(device.secret), totp.time_step(now) + offset)


def later(monkeypatch, seconds: int) -> None:
    """Move the clock the codes are checked against on, as if that much time had passed."""
    real = timezone.now
    monkeypatch.setattr(two_factor, "_now", lambda: real() + timedelta(seconds=seconds))


def enrol(client: Client, user) -> list[str]:
    client.force_login(user)
    assert client.get(url("two_factor")).status_code == 200
    done = client.post(url("two_factor"), {"action": "confirm", "code": code_for(user)})
    assert done.status_code == 200 and done.context["new_codes"]
    return done.context["new_codes"]


def password_step(client: Client, user, next_url: str = ""):
    data = {"username": user.username, "password": PASSWORD}
    return client.post(url("login") + (f"?next={next_url}" if next_url else ""), data)


def signed_in(client: Client) -> bool:
    return SESSION_KEY in client.session


def test_enrolment_refuses_a_wrong_code_and_confirms_with_the_right_one(client, operator):
    client.force_login(operator)
    page = client.get(url("two_factor"))
    device = TwoFactorDevice.objects.get(user=operator)
    body = page.content.decode()
    assert page.status_code == 200 and device.confirmed_at is None
    assert "<svg" in body and totp.grouped(device.secret) in body and "<script" not in body.split("<main")[1]
    assert page["Cache-Control"].startswith("max-age=0") and "no-store" in page["Cache-Control"]
    wrong = "000000" if code_for(operator) != "000000" else "111111"
    refused = client.post(url("two_factor"), {"action": "confirm", "code": wrong})
    assert refused.status_code == 400 and "This code is not right" in refused.content.decode()
    assert TwoFactorDevice.objects.get(user=operator).confirmed_at is None
    key_before = client.session.session_key
    done = client.post(url("two_factor"), {"action": "confirm", "code": code_for(operator)})
    codes = done.context["new_codes"]
    assert done.status_code == 200 and len(codes) == 10 and all(code in done.content.decode() for code in codes)
    device.refresh_from_db()
    assert device.confirmed_at is not None and device.last_used_step == totp.time_step(timezone.now().timestamp())
    assert client.session[two_factor.SESSION_VERIFIED] == operator.pk and client.session.session_key != key_before
    hashes = set(RecoveryCode.objects.filter(device=device).values_list("code_hash", flat=True))
    assert len(hashes) == 10 and not any(code.replace("-", "") in h for code in codes for h in hashes)
    entry = AuditEntry.objects.get(action="two_factor_enrol")
    assert entry.actor == operator.username and entry.object_id == str(operator.pk)
    # Shown once: the page afterwards has the status, not the codes.
    again = client.get(url("two_factor")).content.decode()
    assert "10 unused recovery codes" in again and codes[0] not in again


def test_a_new_key_can_be_made_before_confirming(client, operator):
    client.force_login(operator)
    client.get(url("two_factor"))
    first = TwoFactorDevice.objects.get(user=operator).secret
    assert client.post(url("two_factor"), {"action": "restart"}).status_code == 302
    assert TwoFactorDevice.objects.get(user=operator).secret != first
    assert client.post(url("two_factor"), {"action": "disable", "code": "123456"}).status_code == 400


def test_an_enrolled_operator_signs_in_with_password_then_code(client, operator, caplog):
    enrol(Client(), operator)
    started = password_step(client, operator, next_url="/en/guides/")
    assert started.status_code == 302 and started["Location"] == url("login_code")
    assert not signed_in(client)
    assert client.get(url("orders")).status_code == 302  # not signed in yet: the shop sends them to log in
    page = client.get(url("login_code"))
    assert page.status_code == 200 and "authenticator app" in page.content.decode()
    wrong = "999999" if code_for(operator, offset=1) != "999999" else "888888"
    with caplog.at_level(logging.WARNING, logger="anchorgpu.security"):
        refused = client.post(url("login_code"), {"code": wrong})
    assert refused.status_code == 400 and "This code is not right, or it was already used" in refused.content.decode()
    assert not signed_in(client) and two_factor.SESSION_VERIFIED not in client.session
    assert any("two-factor code refused" in r.getMessage() for r in caplog.records)
    assert not any(wrong in r.getMessage() for r in caplog.records)  # logged, without the code
    malformed = client.post(url("login_code"), {"code": "12"})
    assert malformed.status_code == 400 and "Enter the 6 digits" in malformed.content.decode()
    key_before = client.session.session_key
    code = code_for(operator, offset=1)  # the enrolment used this step's code
    done = client.post(url("login_code"), {"code": code})
    assert done.status_code == 302 and done["Location"] == "/en/guides/"
    assert signed_in(client) and client.session[two_factor.SESSION_VERIFIED] == operator.pk
    assert client.session.session_key != key_before
    # The same code again, from another browser with the right password: refused.
    other = Client()
    password_step(other, operator)
    assert other.post(url("login_code"), {"code": code}).status_code == 400 and not signed_in(other)


def test_the_password_step_expires_and_the_code_step_needs_it(client, operator):
    enrol(Client(), operator)
    assert client.get(url("login_code"))["Location"] == url("login")  # nothing pending
    password_step(client, operator)
    session = client.session
    session["two_factor_pending"]["until"] = 0
    session.save()
    response = client.post(url("login_code"), {"code": code_for(operator, offset=1)})
    assert response.status_code == 302 and response["Location"] == url("login") and not signed_in(client)


def test_a_recovery_code_works_once(client, operator):
    codes = enrol(Client(), operator)
    password_step(client, operator)
    done = client.post(url("login_code"), {"code": codes[3].upper().replace("-", " ")})
    assert done.status_code == 302 and signed_in(client)
    entry = AuditEntry.objects.get(action="two_factor_recovery_code_used")
    assert entry.data == {"recovery_codes_left": 9} and entry.reason == "sign-in"
    again = Client()
    password_step(again, operator)
    assert again.post(url("login_code"), {"code": codes[3]}).status_code == 400 and not signed_in(again)
    assert again.post(url("login_code"), {"code": codes[4]}).status_code == 302 and signed_in(again)


def test_new_recovery_codes_replace_the_old_and_turning_off_needs_a_code(client, operator, monkeypatch):
    old = enrol(client, operator)
    renewed = client.post(url("two_factor"), {"action": "renew", "code": code_for(operator, offset=1)})
    new = renewed.context["new_codes"]
    assert renewed.status_code == 200 and set(new).isdisjoint(old)
    assert two_factor.two_factor_verify(user=operator, code=old[0], purpose="test") is None
    later(monkeypatch, 90)
    assert client.post(url("two_factor"), {"action": "disable", "code": "12345x"}).status_code == 400
    off = client.post(url("two_factor"), {"action": "disable", "code": code_for(operator)})
    assert off.status_code == 200 and "Two-factor sign-in is off" in off.content.decode()
    assert not TwoFactorDevice.objects.filter(user=operator, confirmed_at__isnull=False).exists()
    assert [e.action for e in AuditEntry.objects.order_by("id")] == [
        "two_factor_enrol", "two_factor_recovery_codes_renew", "two_factor_disable"]
    fresh = Client()
    assert password_step(fresh, operator)["Location"] == url("orders") and signed_in(fresh)  # password alone


def test_the_admin_requires_a_verified_session_when_two_factor_is_required(client, operator, settings):
    settings.ANCHORGPU_ADMIN_2FA = True
    client.force_login(operator)
    pages = ["/admin/", "/admin/orders/order/", "/admin/jsi18n/", "/admin/password_change/", "/admin/no/such/page/"]
    for page in pages:
        response = client.get(page)
        assert response.status_code == 302, page
        assert response["Location"].startswith(url("two_factor") + "?next=" + page.replace("/", "%2F")), page
    enrol_page = client.get(url("two_factor") + "?next=/admin/")
    assert "The operators’ admin needs two-factor sign-in" in enrol_page.content.decode()
    client.post(url("two_factor") + "?next=/admin/", {"action": "confirm", "code": code_for(operator)})
    assert client.get("/admin/").status_code == 200
    assert client.get("/admin/orders/order/").status_code == 200
    # A new browser: password, then the admin sends it to the code step, then it is in.
    other = Client()
    password_step(other, operator, next_url="/admin/orders/order/")
    assert other.get("/admin/")["Location"].startswith("/admin/login/") and not signed_in(other)
    done = other.post(url("login_code"), {"code": code_for(operator, offset=1)})
    assert done["Location"] == "/admin/orders/order/" and other.get("/admin/orders/order/").status_code == 200


def test_the_admins_own_log_in_page_sends_everyone_to_the_shops(client, operator, settings):
    settings.ANCHORGPU_ADMIN_2FA = True
    response = client.get("/admin/login/?next=/admin/orders/order/")
    assert response.status_code == 302
    assert response["Location"] == url("login") + "?next=%2Fadmin%2Forders%2Forder%2F"
    posted = client.post("/admin/login/", {"username": operator.username, "password": PASSWORD})
    assert posted.status_code == 302 and not signed_in(client)  # no way around the code step
    assert client.get("/admin/login/?next=https://evil.example/")["Location"].endswith("?next=%2Fadmin%2F")


def test_not_required_operators_reach_the_admin_but_an_enrolled_one_still_gives_the_code(client, operator, settings):
    settings.ANCHORGPU_ADMIN_2FA = False
    client.force_login(operator)
    assert client.get("/admin/").status_code == 200  # not enrolled, not required
    enrol(Client(), operator)
    stale = Client()
    stale.force_login(operator)  # e.g. a session from before two-factor was turned on
    response = stale.get("/admin/orders/order/")
    assert response.status_code == 302 and response["Location"].startswith(url("login_code"))
    done = stale.post(url("login_code") + "?next=/admin/orders/order/", {"code": code_for(operator, offset=1)})
    assert done["Location"] == "/admin/orders/order/" and stale.get("/admin/orders/order/").status_code == 200


def test_customers_are_unaffected(client, settings):
    settings.ANCHORGPU_ADMIN_2FA = True
    shop.load_shop()
    alice = shop.customer()
    response = client.post(url("login"), {"username": "alice@example.com", "password": "correct horse battery"})
    assert response.status_code == 302 and response["Location"] == url("orders") and signed_in(client)
    assert client.get(url("orders")).status_code == 200
    assert client.get(url("two_factor")).status_code == 404  # the set-up is for operators
    assert client.get(url("login_code"))["Location"] == url("orders")
    admin = client.get("/admin/")
    assert admin.status_code == 302 and admin["Location"].startswith("/admin/login/")
    assert not TwoFactorDevice.objects.filter(user=alice).exists()


def test_the_code_step_is_rate_limited(client, operator, settings):
    settings.ANCHORGPU_RATE_LIMITS = True
    enrol(Client(), operator)
    assert not RateEvent.objects.filter(scope__startswith="2fa:").exists()  # a right code is not counted
    password_step(client, operator)
    per_account = LIMITS["two_factor"][0].count
    for _ in range(per_account):
        assert client.post(url("login_code"), {"code": "000000"}).status_code == 400
    refused = client.post(url("login_code"), {"code": code_for(operator, offset=1)})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0 and not signed_in(client)


def test_under_attack_an_operators_wrong_password_gets_the_same_code_page_as_a_right_one(operator, settings,
                                                                                         mailoutbox):
    settings.ANCHORGPU_RATE_LIMITS = True
    settings.ANCHORGPU_EMAIL_DISABLED = True  # the authenticator needs no e-mail: no 429 for this account
    enrol(Client(), operator)
    for n in range(LIMITS["login_account"][0].count):
        Client(REMOTE_ADDR=f"203.0.113.{n + 1}").post(url("login"), {"username": operator.username,
                                                                     "password": f"guess-{n}"})
    real, decoy = Client(REMOTE_ADDR="198.51.100.1"), Client(REMOTE_ADDR="198.51.100.2")
    right = password_step(real, operator)
    wrong = decoy.post(url("login"), {"username": operator.username, "password": "guess-again"})
    assert right.status_code == wrong.status_code == 302 and right["Location"] == wrong["Location"] == url("login_code")
    page = real.get(url("login_code"))
    assert "authenticator app" in page.content.decode() and "does not say whether yours was right" in \
        page.content.decode()
    assert page_text(decoy.get(url("login_code"))) == page_text(page)
    code = code_for(operator, offset=1)  # the enrolment used this step's code
    refused = decoy.post(url("login_code"), {"code": code})  # the right code, after a wrong password
    assert refused.status_code == 400 and "This code is not right, or it was already used" in \
        refused.content.decode() and not signed_in(decoy)
    assert RateEvent.objects.filter(scope="2fa:account").count() == 1  # counted for the account, as a real one
    done = real.post(url("login_code"), {"code": code})
    assert done.status_code == 302 and signed_in(real) and mailoutbox == []
    # That browser is known now: under attack still, its right password is answered as usual.
    real.post(url("logout"))
    password_step(real, operator)
    assert "Your password was right" in real.get(url("login_code")).content.decode()
    wrong_there = real.post(url("login"), {"username": operator.username, "password": "mistyped"})
    assert wrong_there.status_code == 200 and "do not match an account" in wrong_there.content.decode()


def test_a_reset_from_the_command_line_is_audited(operator):
    enrol(Client(), operator)
    call_command("two_factor_reset", operator.username, reason="phone lost, checked by video call")
    assert not TwoFactorDevice.objects.filter(user=operator).exists()
    entry = AuditEntry.objects.get(action="two_factor_reset")
    assert entry.reason == "phone lost, checked by video call" and entry.actor.startswith("command line")


def test_production_requires_two_factor_for_the_admin_by_default():
    from tests.ops.test_security import SELLER_ENV

    assert admin_two_factor_required(production=True, value=None) is True
    assert admin_two_factor_required(production=True, value="yes please") is True  # unclear: stays on
    assert admin_two_factor_required(production=True, value="0") is False
    assert admin_two_factor_required(production=False, value=None) is False
    assert admin_two_factor_required(production=False, value="1") is True
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORGPU_")}
    code = "import django; django.setup(); from django.conf import settings as s; print(s.ANCHORGPU_ADMIN_2FA)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={
        **env, "DJANGO_SETTINGS_MODULE": "anchorgpu.settings", "ANCHORGPU_ENV": "production",
        "ANCHORGPU_SECRET_KEY": "k" * 20 + "Zq8Lp3Vx0Rt7Yb2Nm5Hc9Jd4Gw1Fs6" + "A" * 10,
        "ANCHORGPU_ALLOWED_HOSTS": "shop.example", "ANCHORGPU_EMAIL_HOST": "smtp.example",
        "ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY": "1", **SELLER_ENV,
        "ANCHORGPU_DATA_DIR": os.environ.get("ANCHORGPU_DATA_DIR", "/tmp")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
