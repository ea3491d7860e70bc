"""Log-in, sign-up, password reset, "I've paid" and order creation are rate-limited per address and per
account, with 429 and Retry-After, on the pages and in the API; other visitors are not affected."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth import SESSION_KEY
from django.db.models import F
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from anchorgpu.accounts import login_guard
from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.ops.models import RateEvent, RateKey
from anchorgpu.ops.ratelimit import LIMITS, rate_events_purge
from anchorgpu.orders.models import Order
from tests import shop
from tests.web.test_checkout import form_data

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def limits_on(settings):
    settings.ANCHORGPU_RATE_LIMITS = True


def url(name, **kwargs):
    with translation.override("en"):
        return reverse(name, kwargs=kwargs)


RIGHT = "correct horse battery"


def attack(username: str = "alice@example.com", count: int | None = None, first: int = 1) -> None:
    """Wrong passwords on one account, each from an address of its own: the account's window fills."""
    for n in range(first, first + (count or LIMITS["login_account"][0].count)):
        Client(REMOTE_ADDR=f"203.0.113.{n}").post(url("login"), {"username": username, "password": f"guess-{n}"})


def log_in(client: Client, password: str, username: str = "alice@example.com"):
    return client.post(url("login"), {"username": username, "password": password})


def page_text(response) -> str:
    """The page, less the CSRF token (masked anew on each page)."""
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", response.content.decode())


def same_page(one, other) -> bool:
    """The same status, redirect, cookies set and page; the same wait, to the second it was computed in."""
    waits = [int(r["Retry-After"]) for r in (one, other) if r.has_header("Retry-After")]
    return (one.status_code, one.get("Location"), page_text(one), sorted(one.cookies)) \
        == (other.status_code, other.get("Location"), page_text(other), sorted(other.cookies)) \
        and len(waits) in (0, 2) and max(waits, default=0) - min(waits, default=0) <= 1


def mailed_code(mail) -> str:
    return re.search(r"^(\d{6})$", mail.body, re.MULTILINE).group(1)


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


def test_twenty_five_customers_signing_in_from_one_address_leave_the_operator_room(client):
    """Only failures count: a right password gives its slot back (an operator was locked out after twenty
    customers signed in from one office's address)."""
    shop.load_shop()
    for n in range(25):
        shop.customer(f"customer{n}@example.com")
        office = Client(REMOTE_ADDR="192.0.2.10")
        assert log_in(office, RIGHT, username=f"customer{n}@example.com").url == url("orders")
    assert not RateEvent.objects.filter(scope="login:address").exists()
    operator = shop.customer("ops@example.com")
    operator.is_staff = True
    operator.save()
    assert log_in(Client(REMOTE_ADDR="192.0.2.10"), RIGHT, username="ops@example.com").url == url("orders")


def test_a_success_gives_back_only_its_own_slot_not_the_failures_of_other_accounts():
    """Credential stuffing from one address: many accounts, one wrong password each; a right password among
    them does not clear the others' failures, and the address is refused at the limit."""
    shop.load_shop()
    shop.customer()
    per_address = LIMITS["login"][0].count
    stuffer = "192.0.2.66"
    for n in range(per_address - 1):
        assert log_in(Client(REMOTE_ADDR=stuffer), "x", username=f"user{n}@example.com").status_code == 200
    assert log_in(Client(REMOTE_ADDR=stuffer), RIGHT).url == url("orders")  # one that works
    assert RateEvent.objects.filter(scope="login:address").count() == per_address - 1
    assert not RateEvent.objects.filter(scope="login:address", undecided=True).exists()  # every failure decided
    assert log_in(Client(REMOTE_ADDR=stuffer), "x", username="last@example.com").status_code == 200
    assert log_in(Client(REMOTE_ADDR=stuffer), RIGHT).status_code == 429  # the window is full of failures
    assert log_in(Client(REMOTE_ADDR="192.0.2.67"), RIGHT).url == url("orders")  # another address is not


def test_a_known_browser_is_not_held_up_by_others_failures_at_its_address_but_still_counts():
    shop.load_shop()
    shop.customer()
    office = "192.0.2.20"
    operator_browser = Client(REMOTE_ADDR=office)
    assert log_in(operator_browser, RIGHT).url == url("orders")  # a complete sign-in: a known device
    operator_browser.post(url("logout"))
    for n in range(LIMITS["login"][0].count):
        log_in(Client(REMOTE_ADDR=office), "x", username=f"user{n}@example.com")
    assert log_in(Client(REMOTE_ADDR=office), RIGHT).status_code == 429  # a browser it does not know
    before = RateEvent.objects.filter(scope="login:address").count()
    assert log_in(operator_browser, "typo").status_code == 200  # its own failure still counts, at the address too
    assert RateEvent.objects.filter(scope="login:address").count() == before + 1
    assert log_in(operator_browser, RIGHT).url == url("orders")
    assert RateEvent.objects.filter(scope="login:address").count() == before + 1


def test_a_slot_still_being_checked_is_waited_for_and_a_stale_one_counts(rf, monkeypatch):
    from anchorgpu.ops import ratelimit

    request = rf.post("/", REMOTE_ADDR="192.0.2.30")
    limit = LIMITS["login"][0]
    now = timezone.now()
    taken = [ratelimit.rate_take(request, "login", settle=1) for _ in range(limit.count)]
    assert RateEvent.objects.filter(scope="login:address", undecided=True).count() == limit.count
    waited = []
    monkeypatch.setattr(ratelimit.time, "sleep", lambda seconds: (waited.append(seconds),
                                                                  ratelimit.rate_give_back(taken.pop())))
    taken.append(ratelimit.rate_take(request, "login", settle=1))  # one of them was right: its slot frees room
    assert len(waited) == 1
    ratelimit.rate_keep([pk for pks in taken for pk in pks])  # the others were wrong
    monkeypatch.setattr(ratelimit.time, "sleep", waited.append)
    with pytest.raises(ratelimit.RateLimited):
        ratelimit.rate_take(request, "login", settle=1)
    assert len(waited) == 1  # full of decided failures: refused at once
    RateEvent.objects.filter(scope="login:address").update(undecided=True, at=now - timedelta(
        seconds=ratelimit.UNDECIDED_SECONDS + 1))
    with pytest.raises(ratelimit.RateLimited):  # undecided for too long: its request died; it counts
        ratelimit.rate_take(request, "login", settle=1)
    assert len(waited) == 1


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
    # A guesser who found the password still meets the code, which only the mailbox has, and cannot tell a
    # right guess from a wrong one: both go to the code step.
    thief, other = Client(REMOTE_ADDR="203.0.113.99"), Client(REMOTE_ADDR="203.0.113.98")
    right = thief.post(url("login"), {"username": "alice@example.com", "password": "correct horse battery"})
    wrong = other.post(url("login"), {"username": "alice@example.com", "password": "guess-99"})
    assert (right.status_code, right.url) == (wrong.status_code, wrong.url) == (302, url("login_code"))
    assert SESSION_KEY not in thief.session and SESSION_KEY not in other.session


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
    wrong = Client(REMOTE_ADDR="203.0.113.77").post(url("login"), {"username": "alice@example.com", "password": "y"})
    assert wrong.status_code == 429 and same_page(wrong, refused)  # a wrong password gets the same 429


def test_under_attack_a_right_and_a_wrong_password_get_the_same_answer_and_the_decoy_takes_no_code(mailoutbox):
    shop.load_shop()
    alice = shop.customer()
    attack()
    owner, guesser, stranger = (Client(REMOTE_ADDR=f"198.51.100.{n}") for n in (1, 2, 3))
    right, wrong = log_in(owner, RIGHT), log_in(guesser, "guess-again")
    assert right.status_code == 302 and right["Location"] == url("login_code") and same_page(right, wrong)
    assert SESSION_KEY not in owner.session and SESSION_KEY not in guesser.session
    assert len(mailoutbox) == 1 and mailoutbox[0].to == [alice.email]  # none for the wrong password
    code_page = owner.get(url("login_code"))
    assert code_page.status_code == 200 and "we have sent a 6-digit code" in code_page.content.decode()
    assert same_page(guesser.get(url("login_code")), code_page)
    # A name with no account behind it, under attack too, gets the same page: it says nothing of accounts.
    attack("nobody@example.com", first=50)
    assert same_page(log_in(stranger, "x", username="nobody@example.com"), wrong)
    assert same_page(stranger.get(url("login_code")), code_page)
    # The decoy refuses every code, the one e-mailed to the owner too, as the real step refuses a wrong one.
    code = mailed_code(mailoutbox[0])
    other = f"{(int(code) + 1) % 10**6:06d}"
    real_refusal = owner.post(url("login_code"), {"code": other})
    assert real_refusal.status_code == 400 and "This code is not the one we sent" in real_refusal.content.decode()
    assert same_page(guesser.post(url("login_code"), {"code": other}), real_refusal)
    with_the_code = guesser.post(url("login_code"), {"code": code})
    assert with_the_code.status_code == 400 and "This code is not the one we sent" in with_the_code.content.decode()
    assert SESSION_KEY not in guesser.session
    # Counted under the two-factor limits as the real step's codes are: per account (alice's) and address.
    assert RateEvent.objects.filter(scope="2fa:address").count() == 3
    for _ in range(LIMITS["two_factor"][0].count - 3):
        assert guesser.post(url("login_code"), {"code": other}).status_code == 400
    assert guesser.post(url("login_code"), {"code": code}).status_code == 429
    assert owner.post(url("login_code"), {"code": code}).status_code == 429  # the account's 5 are used
    assert SESSION_KEY not in guesser.session and SESSION_KEY not in owner.session


def test_under_attack_no_slot_is_given_back_at_the_password_step():
    """A right password giving its slots back would tell, through the windows, that it was right."""
    shop.load_shop()
    shop.customer()
    attack()
    before = RateEvent.objects.filter(scope="login:account").count()
    log_in(Client(REMOTE_ADDR="198.51.100.1"), RIGHT)
    log_in(Client(REMOTE_ADDR="198.51.100.2"), "guess-again")
    assert RateEvent.objects.filter(scope="login:account").count() == before + 2
    assert RateEvent.objects.filter(scope="login:address").count() == before + 2


def test_emailed_codes_are_bounded_then_everyone_gets_the_same_429(mailoutbox):
    shop.load_shop()
    shop.customer()
    attack()
    codes = LIMITS["login_code_email"][0].count
    for n in range(codes):  # right passwords, from one address and many: a code each, then no more
        assert log_in(Client(REMOTE_ADDR=f"198.51.100.{n % 2}"), RIGHT).url == url("login_code")
    assert len(mailoutbox) == codes
    right = log_in(Client(REMOTE_ADDR="198.51.100.0"), RIGHT)
    wrong = log_in(Client(REMOTE_ADDR="198.51.100.9"), "guess-again")
    assert right.status_code == 429 and same_page(right, wrong)
    assert 1 <= int(right["Retry-After"]) <= LIMITS["login_code_email"][0].seconds
    page = right.content.decode()
    assert "we have sent as many sign-in codes by e-mail as we may for now. Try again in 15 minutes" in page
    assert 'value="alice@example.com"' in page and RIGHT not in page
    for n in range(20):
        log_in(Client(REMOTE_ADDR=f"198.51.100.{n}"), RIGHT)
    assert len(mailoutbox) == codes  # no more mail, however many right passwords come


def test_a_mail_server_failure_is_logged_not_shown(monkeypatch, caplog):
    """Its 503 would come for right passwords only; the code step then takes no code."""
    shop.load_shop()
    shop.customer()
    attack()

    def failing(*args, **kwargs):
        raise ConnectionRefusedError("no mail server")

    monkeypatch.setattr(login_guard, "send_mail", failing)
    owner = Client(REMOTE_ADDR="198.51.100.1")
    right, wrong = log_in(owner, RIGHT), log_in(Client(REMOTE_ADDR="198.51.100.2"), "guess-again")
    assert right.status_code == 302 and same_page(right, wrong)
    assert any("not sent: ConnectionRefusedError" in r.getMessage() for r in caplog.records)
    assert owner.post(url("login_code"), {"code": "123456"}).status_code == 400 and SESSION_KEY not in owner.session


def test_a_known_browser_signs_in_under_attack_without_a_code_even_with_email_off(settings, mailoutbox):
    shop.load_shop()
    alice = shop.customer()
    shop.customer("bob@example.com")
    owner, bobs = Client(REMOTE_ADDR="198.51.100.1"), Client(REMOTE_ADDR="198.51.100.2")
    assert log_in(owner, RIGHT).url == url("orders")  # a complete sign-in: the browser is known now
    assert log_in(bobs, RIGHT, username="bob@example.com").url == url("orders")  # known, as bob's
    owner.post(url("logout"))
    assert login_guard.DEVICE_COOKIE in owner.cookies
    settings.ANCHORGPU_EMAIL_DISABLED = True
    attack(count=LIMITS["login_account"][1].count)  # both windows full
    assert log_in(Client(REMOTE_ADDR="198.51.100.3"), RIGHT).status_code == 429  # an unknown browser waits
    assert log_in(bobs, RIGHT).status_code == 429  # known, but as another account's
    forged = Client(REMOTE_ADDR="198.51.100.4")
    forged.cookies[login_guard.DEVICE_COOKIE] = owner.cookies[login_guard.DEVICE_COOKIE].value[:-2] + "xx"
    assert log_in(forged, RIGHT).status_code == 429
    before = RateEvent.objects.filter(scope="login:account").count()
    wrong = log_in(owner, "guess-again")  # the owner mistyping: the usual error, counted
    assert wrong.status_code == 200 and "do not match an account" in wrong.content.decode()
    assert RateEvent.objects.filter(scope="login:account").count() == before + 1
    signed_in = log_in(owner, RIGHT)
    assert signed_in.status_code == 302 and signed_in.url == url("orders") and int(owner.session[SESSION_KEY]) == \
        alice.pk
    assert mailoutbox == []


def test_a_password_change_voids_the_known_device(mailoutbox):
    shop.load_shop()
    alice = shop.customer()
    owner = Client(REMOTE_ADDR="198.51.100.1")
    assert log_in(owner, RIGHT).url == url("orders")
    alice.set_password("a new password, long enough")
    alice.save()
    owner.post(url("logout"))
    attack()
    step = log_in(owner, "a new password, long enough")
    assert step.url == url("login_code") and SESSION_KEY not in owner.session  # not known any more: the code
    assert owner.post(url("login_code"), {"code": mailed_code(mailoutbox[0])}).url == url("orders")
    owner.post(url("logout"))  # the code step passed: known again, with the new password
    assert log_in(owner, "a new password, long enough").url == url("orders") and len(mailoutbox) == 1


def test_the_day_limit_keeps_a_slow_guesser_to_thirty_answered_guesses():
    shop.load_shop()
    shop.customer()
    per_window, per_day = (limit.count for limit in LIMITS["login_account"])
    answered = 0
    for round_ in range(per_day // per_window):  # ten at a time, waiting for the window between
        for n in range(per_window):
            page = log_in(Client(REMOTE_ADDR=f"203.0.113.{round_ * per_window + n + 1}"), "guess")
            answered += page.status_code == 200 and "do not match an account" in page.content.decode()
        RateEvent.objects.update(at=F("at") - timedelta(minutes=16))  # the 15 minutes lapse
    assert answered == per_day
    # The fifteen minutes' window has room, the day's has not: still under attack.
    wrong = log_in(Client(REMOTE_ADDR="198.51.100.1"), "guess")
    right = log_in(Client(REMOTE_ADDR="198.51.100.2"), RIGHT)
    assert wrong.url == url("login_code") and same_page(wrong, right)
    RateEvent.objects.update(at=F("at") - timedelta(hours=24))  # a day later: the usual log-in again
    assert log_in(Client(REMOTE_ADDR="198.51.100.3"), RIGHT).url == url("orders")


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
