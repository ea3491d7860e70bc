"""Production settings refuse to start unsafe; every response carries the browser protections; passwords
are hashed with Argon2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.contrib.auth.hashers import make_password

from anchorgpu.production import CONTENT_SECURITY_POLICY, DEV_SECRET_KEY, problems

GOOD_KEY = "k" * 20 + "Zq8Lp3Vx0Rt7Yb2Nm5Hc9Jd4Gw1Fs6" + "A" * 10


def test_production_problems_are_each_named():
    assert problems(secret_key=GOOD_KEY, debug=False, allowed_hosts="shop.example", email_host="smtp.example") == []
    found = problems(secret_key=DEV_SECRET_KEY, debug=True, allowed_hosts="")
    assert [p.split(" ")[0] for p in found] == ["ANCHORGPU_SECRET_KEY", "ANCHORGPU_DEBUG", "ANCHORGPU_ALLOWED_HOSTS",
                                                "ANCHORGPU_EMAIL_HOST"]
    assert "too weak" in problems(secret_key="x" * 60, debug=False, allowed_hosts="a")[0]
    assert "too weak" in problems(secret_key="short-key", debug=False, allowed_hosts="a")[0]
    assert "'*'" in problems(secret_key=GOOD_KEY, debug=False, allowed_hosts="*", email_disabled=True)[0]


def test_behind_a_proxy_production_must_say_whether_the_proxy_gives_the_visitors_address():
    """Without it, every visitor would have the proxy's 127.0.0.1 and share one set of per-address limits."""
    safe = dict(secret_key=GOOD_KEY, debug=False, allowed_hosts="shop.example", email_host="smtp.example")
    [found] = problems(**safe, behind_proxy=True, client_address_from_proxy=None)
    assert found.startswith("ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY is not set")
    assert problems(**safe, behind_proxy=True, client_address_from_proxy="1") == []
    assert problems(**safe, behind_proxy=True, client_address_from_proxy="0") == []  # said, and accepted
    assert problems(**safe, behind_proxy=False, client_address_from_proxy=None) == []
    refused = _settings_in_production(ANCHORGPU_SECRET_KEY=GOOD_KEY, ANCHORGPU_ALLOWED_HOSTS="shop.example",
                                      ANCHORGPU_EMAIL_HOST="smtp.example")
    assert refused.returncode != 0 and "ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY is not set" in refused.stderr


PRINT_TRANSPORT = ("import django; django.setup(); from django.conf import settings as s; "
                   "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.SECURE_SSL_REDIRECT, "
                   "s.SECURE_PROXY_SSL_HEADER)")


# The seller on invoices, which production requires too (tested below).
SELLER_ENV = {"ANCHORGPU_COMPANY_ADDRESS": "Avenida da Liberdade 110|1250-146 Lisboa", "ANCHORGPU_COMPANY_COUNTRY": "PT"}


def _settings_in_production(code: str = PRINT_TRANSPORT, **env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORGPU_")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**base, "DJANGO_SETTINGS_MODULE": "anchorgpu.settings", "ANCHORGPU_ENV": "production",
                               "ANCHORGPU_DATA_DIR": os.environ.get("ANCHORGPU_DATA_DIR", "/tmp"), **SELLER_ENV,
                               **env})


def test_production_refuses_the_placeholder_seller_address():
    safe = {"ANCHORGPU_SECRET_KEY": GOOD_KEY, "ANCHORGPU_ALLOWED_HOSTS": "shop.example",
            "ANCHORGPU_EMAIL_HOST": "smtp.example", "ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY": "1"}
    refused = _settings_in_production(**safe, ANCHORGPU_COMPANY_ADDRESS="", ANCHORGPU_COMPANY_COUNTRY="")
    assert refused.returncode != 0
    assert "ANCHORGPU_COMPANY_ADDRESS is the placeholder" in refused.stderr
    assert "ANCHORGPU_COMPANY_COUNTRY is not set" in refused.stderr
    assert _settings_in_production(**safe).returncode == 0


def test_production_refuses_to_start_unsafe_and_secures_cookies_and_transport():
    refused = _settings_in_production(ANCHORGPU_DEBUG="1")
    assert refused.returncode != 0
    assert "ImproperlyConfigured: Production settings refused (ANCHORGPU_ENV=production)" in refused.stderr
    for name in ("ANCHORGPU_SECRET_KEY is not set", "ANCHORGPU_DEBUG is on", "ANCHORGPU_ALLOWED_HOSTS is not set"):
        assert name in refused.stderr
    started = _settings_in_production(ANCHORGPU_SECRET_KEY=GOOD_KEY, ANCHORGPU_ALLOWED_HOSTS="shop.example",
                                      ANCHORGPU_EMAIL_HOST="smtp.example", ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY="1")
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ["True", "True", "31536000", "True", "('HTTP_X_FORWARDED_PROTO',", "'https')"]


SEND_RESET_MAIL = ("import django, logging; django.setup(); from django.core.mail import send_mail; "
                   "from django.conf import settings as s; print(s.EMAIL_BACKEND); "
                   "send_mail('Reset', 'open https://shop.example/reset/MQ/secret-token/', None, ['a@example.com'])")


def test_production_refuses_to_print_emails_and_the_no_email_switch_logs_no_link():
    safe = {"ANCHORGPU_SECRET_KEY": GOOD_KEY, "ANCHORGPU_ALLOWED_HOSTS": "shop.example",
            "ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY": "1"}
    refused = _settings_in_production(SEND_RESET_MAIL, **safe)
    assert refused.returncode != 0 and "ANCHORGPU_EMAIL_HOST is not set" in refused.stderr
    assert "secret-token" not in refused.stdout + refused.stderr
    off = _settings_in_production(SEND_RESET_MAIL, ANCHORGPU_EMAIL_DISABLED="1", **safe)
    assert off.returncode == 0, off.stderr
    assert off.stdout.split()[0] == "anchorgpu.ops.mail.DiscardingBackend"
    assert "secret-token" not in off.stdout + off.stderr and "Reset" not in off.stdout + off.stderr
    assert "not sent: this shop sends no e-mail" in off.stderr  # the log says that, and only that
    development = _settings_in_production(SEND_RESET_MAIL, ANCHORGPU_ENV="development")
    assert development.stdout.split()[0] == "django.core.mail.backends.console.EmailBackend"  # a developer's own


@pytest.mark.django_db
def test_every_page_carries_the_browser_protections(client):
    for path in ("/en/", "/healthz", "/admin/login/", "/api/v1/offers?product=h100-sxm-80gb"):
        response = client.get(path)
        assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, path
        assert response["X-Frame-Options"] == "DENY" and response["X-Content-Type-Options"] == "nosniff", path
        assert response["Referrer-Policy"] == "same-origin" and response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY and "script-src 'self'" in CONTENT_SECURITY_POLICY


def test_passwords_are_hashed_with_argon2():
    from anchorgpu import settings as project

    assert project.PASSWORD_HASHERS[0] == "django.contrib.auth.hashers.Argon2PasswordHasher"
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=project.PASSWORD_HASHERS):
        assert make_password("correct horse battery").startswith("argon2$argon2id$")
