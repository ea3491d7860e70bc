"""Every refusal of the checkout comes back to a form with what was typed: a form error (400), the order
limit (429), the database gone (503), a stale CSRF token (403: the choice only, the rest from the browser's
draft), and a visitor whose session has gone (to the log-in page and back, with the choice)."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from django.db import OperationalError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from anchorgpu.ops.models import RateEvent
from anchorgpu.ops.ratelimit import LIMITS
from anchorgpu.orders.models import Order
from anchorgpu.web import order_views
from tests import shop
from tests.ops.test_rate_limits import _account_key
from tests.web.test_checkout import PRIVATE_KEY, checkout_url, form_data

pytestmark = pytest.mark.django_db

TYPED = dict(name="Beatriz Typed", company="Typed Lda", billing_address="Rua do Teste 12, Lisboa", quantity="2",
             term="7", options=["extra-nvme-4tb", "dedicated-ipv4"], purpose="larger_batch")


def assert_kept(page: str, *, keys: bool = True) -> None:
    """The typed values are in the form as it came back."""
    assert 'value="Beatriz Typed"' in page and 'value="Typed Lda"' in page
    assert "Rua do Teste 12, Lisboa</textarea>" in page
    assert re.search(r'<input type="number" name="quantity" value="2"', page)
    assert re.search(r'<option value="7" selected>', page)
    for slug in TYPED["options"]:
        assert re.search(rf'value="{slug}"[^>]*checked', page), slug
    assert re.search(r'name="accept"[^>]*checked', page)
    if keys:
        assert shop.ED25519.split()[1] in page


@pytest.fixture(autouse=True)
def limits_on(settings):
    settings.ANCHORGPU_RATE_LIMITS = True



def test_a_form_error_comes_back_with_everything_typed(client, alice):
    response = client.post(checkout_url(), form_data(**TYPED, vat_id="not a vat id!"))
    page = response.content.decode()
    assert response.status_code == 400 and "A VAT id starts with its two-letter country prefix" in page
    assert_kept(page)
    assert Order.objects.count() == 0


def test_form_errors_are_never_counted_toward_the_order_limit(client, alice):
    for _ in range(LIMITS["order"][0].count + 1):
        assert client.post(checkout_url(), form_data(**TYPED, accept="")).status_code == 400
    assert RateEvent.objects.filter(scope="order:account").count() == 0
    assert client.post(checkout_url(), form_data(**TYPED)).status_code == 302


def test_the_order_limit_comes_back_as_the_form_with_everything_typed(client, alice):
    RateEvent.objects.bulk_create([RateEvent(scope="order:account", key=_account_key(alice), at=timezone.now())
                                   for _ in range(LIMITS["order"][0].count)])  # ten orders in the window
    response = client.post(checkout_url(), form_data(**TYPED))
    page = response.content.decode()
    assert response.status_code == 429 and 1 <= int(response["Retry-After"]) <= LIMITS["order"][0].seconds
    assert "Nothing was ordered this time; what you typed is kept" in page
    assert "Please correct the following" not in page  # nothing to correct: a refusal, said as one
    assert_kept(page)
    assert Order.objects.count() == 0


def test_the_database_gone_comes_back_as_the_form_with_everything_typed(client, alice, monkeypatch):
    def gone(**kwargs):
        raise OperationalError("server closed the connection unexpectedly")
    monkeypatch.setattr(order_views, "order_place_limited", gone)
    token = client.get(checkout_url()).context["form"].initial["submission"]

    response = client.post(checkout_url(), form_data(**TYPED, submission=token))

    page = response.content.decode()
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert "we cannot tell whether what you sent was saved: it may have been" in page
    assert "What you typed is kept below" in page and f'href="{reverse("orders")}"' in page
    assert_kept(page)
    assert f'value="{token}"' in page  # the same submission key: pressing again finds an order placed meanwhile


def test_the_database_still_gone_for_the_form_gives_the_plain_503(client, alice, monkeypatch):
    def gone(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")
    monkeypatch.setattr(order_views, "order_place_limited", gone)
    monkeypatch.setattr(order_views, "render", gone)  # the form's own page needs the database too

    response = client.post(checkout_url(), form_data(**TYPED))

    page = response.content.decode()
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert "go back and press the same button again" in page and "Beatriz Typed" not in page


def test_a_stale_csrf_token_comes_back_as_the_checkout_with_the_choice_only():
    shop.load_shop()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(shop.customer())
    sent = form_data(**TYPED, email="mallory@example.net", ssh_keys="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM"
                     "allory mallory@evil", csrfmiddlewaretoken="stale")

    response = browser.post(checkout_url(), sent)

    page = response.content.decode()
    assert response.status_code == 403 and "could not be sent and nothing was ordered" in page
    assert re.search(r'<input type="number" name="quantity" value="2"', page)  # the choice, as a link carries it
    assert re.search(r'value="dedicated-ipv4"[^>]*checked', page)
    assert "mallory" not in page and "Beatriz Typed" not in page  # never what a page elsewhere could plant
    assert 'name="csrfmiddlewaretoken"' in page and "data-draft" in page  # a fresh form; the draft fills the rest
    assert Order.objects.count() == 0


def test_another_form_with_a_stale_csrf_token_gets_djangos_page():
    shop.load_shop()
    alice = shop.customer()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    order = shop.place(alice)
    response = browser.post(reverse("order_cancel", kwargs={"reference": order.reference}), {})
    assert response.status_code == 403 and "CSRF verification failed" in response.content.decode()
    order.refresh_from_db()
    assert order.state == "awaiting_payment"


def test_a_guest_sent_to_log_in_sees_why_and_comes_back_with_the_choice(client):
    shop.load_shop()
    shop.customer()

    response = client.post(checkout_url(), form_data(**TYPED, ssh_keys=PRIVATE_KEY))  # the session had gone

    assert response.status_code == 302
    login = urlsplit(response.url)
    assert login.path == reverse("login")
    target = parse_qs(login.query)["next"][0]
    choice = parse_qs(urlsplit(target).query)
    assert urlsplit(target).path == checkout_url()
    assert choice == {"quantity": ["2"], "term": ["7"], "environment": ["pytorch-cuda124"],
                      "purpose": ["larger_batch"], "options": ["extra-nvme-4tb", "dedicated-ipv4"]}
    assert "PRIVATE" not in unquote(response.url) and "Beatriz" not in unquote(response.url)

    page = client.get(response.url).content.decode()
    assert "Log in or create an account to place your order. What you chose is kept" in page
    signup = client.get(reverse("signup") + "?" + login.query).content.decode()
    assert "What you chose is kept" in signup
    assert "What you chose is kept" not in client.get(reverse("login")).content.decode()

    back = client.post(reverse("login"), {"username": "alice@example.com", "password": "correct horse battery",
                                          "next": target})
    assert back.status_code == 302 and back.url == target
    form = client.get(back.url).content.decode()
    assert re.search(r'<input type="number" name="quantity" value="2"', form)
    assert re.search(r'<option value="7" selected>', form)
    assert re.search(r'value="extra-nvme-4tb"[^>]*checked', form)


def test_a_guest_opening_the_checkout_keeps_the_query(client):
    shop.load_shop()
    response = client.get(checkout_url() + "?quantity=3&term=30&start=2031-01-02T09:00")
    target = parse_qs(urlsplit(response.url).query)["next"][0]
    assert response.status_code == 302 and parse_qs(urlsplit(target).query) == {"quantity": ["3"], "term": ["30"],
                                                                               "start": ["2031-01-02T09:00"]}
