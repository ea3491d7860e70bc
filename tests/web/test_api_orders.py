"""The JSON API for customers: tokens, quotes, orders with idempotency keys,
"I've paid", cancellation, and errors that are always structured JSON."""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.accounts.models import ApiToken
from anchorgpu.allocation.models import Booking
from anchorgpu.api.models import ApiIdempotency
from anchorgpu.orders.models import STATE_LABELS, Order
from tests import shop

pytestmark = pytest.mark.django_db


def order_body(**overrides) -> dict:
    body = {"product": "h100-sxm-80gb", "quantity": 1, "term": 3, "start": None, "environment": "pytorch-cuda124",
            "options": [], "name": "Alice Example", "email": "alice@example.com", "company": "", "country": "PT",
            "billing_address": "", "vat_id": "", "ssh_keys": [shop.ED25519], "asset": "btc", "accept": True}
    body.update(overrides)
    return body


class Api:
    """A test client that speaks JSON with a bearer token."""

    def __init__(self, client, token: str | None):
        self.client, self.token = client, token

    def _headers(self, headers):
        out = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        out.update(headers or {})
        return out

    def get(self, path, headers=None):
        return self.client.get(path, headers=self._headers(headers))

    def post(self, path, body=None, *, key=None, raw=None, content_type="application/json", headers=None):
        headers = self._headers(headers)
        if key is not None:
            headers["Idempotency-Key"] = key
        data = raw if raw is not None else ("" if body is None else json.dumps(body))
        return self.client.post(path, data=data, content_type=content_type, headers=headers)


@pytest.fixture
def alice():
    shop.load_shop()
    return shop.customer()


@pytest.fixture
def api(client, alice):
    _token, secret = api_token_create(user=alice, name="test")
    return Api(client, secret)


@pytest.fixture
def bob_api(alice):
    bob = shop.customer("bob@example.com")
    _token, secret = api_token_create(user=bob, name="bob")
    return Api(Client(), secret)


def error(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) <= {"code", "message", "fields"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if code:
        assert body["error"]["code"] == code, body
    return body["error"]


def place(api, key="k-1", **overrides):
    response = api.post("/api/v1/orders", order_body(**overrides), key=key)
    assert response.status_code == 201, response.content
    return response.json()


# Tokens -------------------------------------------------------------------------------------------

def test_token_made_on_the_page_works_until_revoked(client, alice):
    url = reverse("api_tokens")
    assert client.get(url).status_code == 302  # log in first
    client.force_login(alice)
    page = client.post(url, {"name": "laptop CLI"})
    assert page.status_code == 200
    secret = re.search(r"agt_[a-z0-9]{8}_[A-Za-z0-9_-]{43}", page.content.decode()).group(0)
    token = ApiToken.objects.get(user=alice)
    assert token.prefix in secret and token.secret_hash != secret and secret.split("_", 2)[2] not in token.secret_hash
    assert secret not in client.get(url).content.decode()  # shown once only
    client.logout()  # the API ignores sessions anyway
    api = Api(Client(), secret)
    assert api.get("/api/v1/orders").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None
    client.force_login(alice)
    assert client.post(url, {"revoke": str(token.pk)}).status_code == 302
    assert "revoked" in client.get(url).content.decode()
    response = api.get("/api/v1/orders")
    error(response, 401, "token_invalid")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_the_api_needs_a_token_and_ignores_the_session(client, alice):
    client.force_login(alice)
    response = client.get("/api/v1/orders")
    error(response, 401, "token_required")
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    error(Api(client, "agt_abcdefgh_" + "x" * 43).get("/api/v1/orders"), 401, "token_invalid")
    error(Api(client, "not-a-token").get("/api/v1/orders"), 401, "token_invalid")
    error(client.post("/api/v1/orders", "{}", content_type="application/json"), 401, "token_required")


def test_another_customers_token_cannot_be_revoked_from_my_page(client, alice, bob_api):
    bob_token = ApiToken.objects.get(name="bob")
    client.force_login(alice)
    client.post(reverse("api_tokens"), {"revoke": str(bob_token.pk)})
    bob_token.refresh_from_db()
    assert bob_token.revoked_at is None


# Orders -------------------------------------------------------------------------------------------

def test_create_order_then_status_paid_and_cancel_rules(api):
    response = api.post("/api/v1/orders", order_body(options=["checkpoint-storage-1tb"]), key="order-1")
    assert response.status_code == 201, response.content
    order = response.json()
    assert response["Location"] == f"/api/v1/orders/{order['reference']}"
    assert order["state"] == "awaiting_payment" and order["state_label"] == "awaiting payment"
    assert [line["kind"] for line in order["lines"]] == ["cards", "option"]
    quote = order["quote"]
    db_order = Order.objects.get(reference=order["reference"])
    assert db_order.idempotency_key == "api-order-1"
    assert quote["amount"] == str(db_order.quote.amount) and quote["address"] == db_order.quote.address
    assert quote["payment_uri"].startswith("bitcoin:") and quote["asset"] == "btc"
    assert order["payment"] == {"status": "nothing", "received": "0", "unconfirmed": "0",
                                "shortfall": str(db_order.quote.amount)}
    assert order["access"] is None and order["invoice"] is None

    status = api.get(order["links"]["self"])
    assert status.status_code == 200 and status.json()["reference"] == order["reference"]
    listed = api.get("/api/v1/orders").json()["orders"]
    assert [o["reference"] for o in listed] == [order["reference"]]

    paid = api.post(order["links"]["paid"], {"txid": shop.TXID_BTC})
    assert paid.status_code == 200, paid.content
    assert paid.json()["state"] == "payment_claimed" and paid.json()["claimed_txid"] == shop.TXID_BTC
    error(api.post(order["links"]["cancel"]), 409, "conflict")  # claimed: ask for a refund instead

    second = place(api, key="order-2")
    cancelled = api.post(second["links"]["cancel"], {})
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert Order.objects.get(reference=second["reference"]).booking.state != Booking.State.LIVE
    error(api.post(second["links"]["paid"]), 409, "conflict")


def test_paid_with_a_bad_txid_is_refused_per_field(api):
    order = place(api)
    err = error(api.post(order["links"]["paid"], {"txid": "0xnothex"}), 400, "invalid_request")
    assert "txid" in err["fields"]
    error(api.post(order["links"]["paid"], {"txid": 12}), 400, "invalid_request")
    assert api.post(order["links"]["paid"], {"txid": None}).json()["state"] == "payment_claimed"


def test_access_is_shown_once_active(api):
    order = place(api)
    shop.activate(Order.objects.get(reference=order["reference"]))  # the database wants a paid, booked term
    Order.objects.filter(reference=order["reference"]).update(access_host="h1.example", access_port=2201,
                                                              access_user="ubuntu")
    assert api.get(order["links"]["self"]).json()["access"] == {"host": "h1.example", "port": 2201,
                                                                 "user": "ubuntu"}


def test_another_customers_order_is_not_found(api, bob_api):
    order = place(api)
    for response in (bob_api.get(order["links"]["self"]), bob_api.post(order["links"]["paid"]),
                     bob_api.post(order["links"]["cancel"]), api.get("/api/v1/orders/AG-NOPE2345")):
        error(response, 404, "not_found")
    assert bob_api.get("/api/v1/orders").json() == {"orders": []}
    assert Order.objects.get(reference=order["reference"]).state == "awaiting_payment"


# Idempotency --------------------------------------------------------------------------------------

def test_same_key_and_body_returns_the_same_order(api):
    first = place(api, key="retry-me")
    body = order_body()
    reordered = json.dumps(dict(reversed(list(body.items()))), indent=2)  # same content, other bytes
    again = api.post("/api/v1/orders", raw=reordered, key="retry-me")
    assert again.status_code == 200, again.content
    assert again.json()["reference"] == first["reference"] and again["Idempotent-Replayed"] == "true"
    assert Order.objects.count() == 1 and ApiIdempotency.objects.get().order.reference == first["reference"]


def test_same_key_with_another_body_is_refused(api):
    place(api, key="retry-me")
    error(api.post("/api/v1/orders", order_body(quantity=2), key="retry-me"), 422, "idempotency_key_reused")
    assert Order.objects.count() == 1
    assert place(api, key="another-key", quantity=2)["quantity"] == 2


def test_keys_belong_to_one_customer(api, bob_api):
    mine = place(api, key="shared")
    theirs = bob_api.post("/api/v1/orders", order_body(email="bob@example.com"), key="shared")
    assert theirs.status_code == 201 and theirs.json()["reference"] != mine["reference"]


def test_the_key_header_is_required_and_checked(api):
    error(api.post("/api/v1/orders", order_body()), 400, "idempotency_key_required")
    error(api.post("/api/v1/orders", order_body(), key="x" * 65), 400, "idempotency_key_invalid")
    error(api.post("/api/v1/orders", order_body(), key="has space"), 400, "idempotency_key_invalid")
    assert Order.objects.count() == 0


def test_a_refused_body_does_not_use_up_the_key(api):
    error(api.post("/api/v1/orders", order_body(ssh_keys="nonsense"), key="k"), 400, "invalid_request")
    assert place(api, key="k")["state"] == "awaiting_payment"


@pytest.mark.db_race
@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_make_one_order():
    shop.load_shop()
    user = shop.customer()
    _token, secret = api_token_create(user=user, name="race")
    results: list = [None] * 6
    barrier = threading.Barrier(len(results))

    def worker(i: int) -> None:
        try:
            connection.ensure_connection()
            barrier.wait(timeout=60)
            results[i] = Api(Client(), secret).post("/api/v1/orders", order_body(), key="same-key")
        except BaseException as exc:  # noqa: BLE001 -- checked below
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(len(results))]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "a worker hung"
    statuses = sorted(r.status_code for r in results)
    assert statuses.count(201) == 1 and set(statuses) <= {200, 201}, [r.content for r in results]
    assert len({r.json()["reference"] for r in results}) == 1
    assert Order.objects.count() == 1


# Bad requests -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "content_type", "status", "code"), [
    ("{not json", "application/json", 400, "bad_json"),
    ("[1, 2]", "application/json", 400, "bad_json"),
    ('{"quantity": NaN}', "application/json", 400, "bad_json"),
    ("\xff", "application/json", 400, "bad_json"),
    ("product=h100", "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
    ('{"product": "h100-sxm-80gb"}', "text/plain", 415, "unsupported_media_type"),
])
def test_unreadable_bodies(api, raw, content_type, status, code):
    error(api.post("/api/v1/orders", raw=raw, content_type=content_type, key="k"), status, code)


@pytest.mark.parametrize(("change", "field"), [
    ({"quantity": "2"}, "quantity"),
    ({"quantity": 1.5}, "quantity"),
    ({"quantity": 1e300}, "quantity"),
    ({"quantity": True}, "quantity"),
    ({"quantity": 10 ** 30}, "quantity"),
    ({"term": 5}, "term"),
    ({"accept": "yes"}, "accept"),
    ({"accept": False}, "accept"),
    ({"options": "checkpoint-storage-1tb"}, "options"),
    ({"options": ["no-such-option"]}, "options"),
    ({"ssh_keys": [1]}, "ssh_keys"),
    ({"name": "x" * 121}, "name"),
    ({"billing_address": "x" * 501}, "billing_address"),
    ({"name": "nul\x00here"}, "name"),
    ({"email": "not-an-email"}, "email"),
    ({"start": "tomorrow"}, "start"),
    ({"start": "9999-12-31T23:59:59-23:59"}, "start"),
    ({"start": "2001-01-01T00:00:00Z"}, "start"),
    ({"environment": "pytorch-rocm63"}, "environment"),
    ({"product": "no-such-card"}, "product"),
    ({"colour": "blue"}, "colour"),
])
def test_invalid_fields_are_named(api, change, field):
    err = error(api.post("/api/v1/orders", order_body(**change), key="k"), 400, "invalid_request")
    assert field in err["fields"], err


def test_missing_fields_are_listed(api):
    err = error(api.post("/api/v1/orders", {"product": "h100-sxm-80gb"}, key="k"), 400, "invalid_request")
    assert {"quantity", "term", "environment", "name", "email", "country", "ssh_keys", "asset", "accept"} <= set(
        err["fields"])


def test_wrong_methods_and_query_parameters(api, client):
    response = client.put("/api/v1/orders")
    error(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET, HEAD, POST"
    error(client.post("/api/v1/offers"), 405, "method_not_allowed")  # not a CSRF page
    error(api.get("/api/v1/orders?page=2"), 400, "invalid_request")
    error(api.get("/api/v1/orders/" + "A" * 300), 404)


def test_messages_follow_accept_language(api):
    english = error(api.post("/api/v1/orders", order_body()), 400, "idempotency_key_required")["message"]
    response = api.post("/api/v1/orders", order_body(), headers={"Accept-Language": "pt"})
    err = error(response, 400, "idempotency_key_required")
    assert response["Content-Language"] == "pt"
    template = ("Send an Idempotency-Key header (1 to %(most)d characters, e.g. a UUID) so that a retried request "
                "never makes two orders.")
    assert english == template % {"most": 60}
    with translation.override("pt"):
        assert err["message"] == gettext(template) % {"most": 60} != english
    order = place(api)
    status = api.get(order["links"]["self"], headers={"Accept-Language": "pt"}).json()
    with translation.override("pt"):
        assert status["state"] == "awaiting_payment" and status["state_label"] == str(STATE_LABELS["awaiting_payment"])


# Quotes -------------------------------------------------------------------------------------------

def test_quote_prices_a_configuration_without_a_token(client, alice):
    response = client.post("/api/v1/quotes", {"product": "b200-lot-2x180gb", "quantity": 1, "term": 7,
                                              "options": ["dedicated-ipv4"]}, content_type="application/json")
    assert response.status_code == 200, response.content
    quote = response.json()
    assert quote["cards"] == 2 and quote["available"] and quote["currency"] == "USD"
    assert [line["kind"] for line in quote["lines"]][-1] == "option" and quote["total"]
    assert Booking.objects.count() == 0  # nothing held


def test_quote_checks_the_environment_against_the_card(client, alice):
    response = client.post("/api/v1/quotes", {"product": "mi300x-192gb", "quantity": 1, "term": 3,
                                              "environment": "pytorch-cuda124"}, content_type="application/json")
    assert "environment" in error(response, 400, "invalid_request")["fields"]


def test_offers_start_at_the_edge_of_the_calendar_is_a_400(client, alice):
    for start in ("9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+01:00"):
        error(client.get("/api/v1/offers", {"start": start}), 400, "invalid_request")


@pytest.mark.parametrize("depth", [1, 5, 500, 900, 5000])
def test_deeply_nested_bodies_are_a_400_never_a_500(client, depth):
    body = '{"options": ' + "[" * depth + "]" * depth + "}"
    response = client.post("/api/v1/quotes", data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] in {"invalid_request", "bad_json"}


def test_error_messages_follow_accept_language(client):
    response = client.get("/api/v1/offers/no-such-card", HTTP_ACCEPT_LANGUAGE="ko")
    assert response.status_code == 404 and re.search(r"[\uac00-\ud7a3]", response.json()["error"]["message"])
    response = client.post("/api/v1/orders", data="{}", content_type="application/json", HTTP_ACCEPT_LANGUAGE="pt")
    assert response.status_code == 401 and "token" in response.json()["error"]["message"].lower()


def test_a_body_nested_deep_enough_to_crash_the_parser_is_refused_before_parsing(api):
    for raw in ('{"product": ' + "[" * 300_000, "[" * 500_000 + "]" * 500_000):
        response = api.post("/api/v1/orders", raw=raw, key="deep")
        body = error(response, 400, "bad_json")
        assert "too deeply" in body["message"]
    assert Order.objects.count() == 0


def test_an_order_for_the_earliest_start_gets_the_next_free_one_or_a_409_unavailable(api, settings):
    # H200: 16 cards in the demo fleet, all held by another customer for 30 days from now.
    first = shop.place(shop.customer("bob@example.com"), product="h200-141gb", quantity=16, term_days=30)
    created = place(api, product="h200-141gb", term=7)
    order = Order.objects.get(reference=created["reference"])
    # The first start free for the whole term: after the cards the first order holds (its term, and the room
    # kept for that term to start when its access is ready).
    assert order.start_asap and order.starts_at == first.booking.ends_at > first.ends_at
    settings.ANCHORGPU_BOOKING_HORIZON_DAYS = 20  # now nothing may start before the cards are free again
    response = api.post("/api/v1/orders", order_body(product="h200-141gb", term=7), key="k-2")
    assert "booking horizon" in error(response, 409, "unavailable")["message"]
    assert Order.objects.count() == 2


@pytest.mark.parametrize("dated, code", [(False, "busy"), (True, "taken")])
def test_a_hold_that_lost_every_attempt_is_a_409_and_saves_nothing(api, monkeypatch, dated, code):
    from anchorgpu.allocation import services as allocation
    from anchorgpu.allocation.errors import NoLongerAvailable

    def lost(**_kwargs):
        raise NoLongerAvailable("The cards were taken by others while we tried; please try again.")

    monkeypatch.setattr(allocation, "hold_place", lost)
    start = (timezone.now() + timedelta(days=2)).replace(microsecond=0).isoformat() if dated else None
    response = api.post("/api/v1/orders", order_body(start=start), key="k-1")
    message = error(response, 409, code)["message"]
    assert ("try again" in message) if code == "busy" else ("another start" in message)
    assert not Order.objects.exists() and not Booking.objects.exists()
