"""Every URL of the shop, tried anonymously, as another customer and as a signed-in non-staff user; form
posts without a CSRF token; the admin for non-staff. A new URL that is not in the table fails the first test,
so nobody adds a page without saying who may see it."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import URLResolver, get_resolver, reverse
from django.utils import translation

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.pilotreports.services import report_store
from tests import shop
from tests.billing.conftest import paid_order
from tests.runplans.reports import as_bytes, gpu_report

pytestmark = pytest.mark.django_db

PUBLIC, SIGNED_IN, OWNER, OPERATORS = "public", "signed in", "owner", "operators"
# name -> (who may use it, GET status for someone allowed, or None when GET is not its method)
ACCESS = {
    "healthz": (PUBLIC, 200), "readyz": (PUBLIC, 200), "metrics": (OPERATORS, 403),
    "api-offers": (PUBLIC, 200), "api-offer-detail": (PUBLIC, 200), "api-assets": (PUBLIC, 200),
    "api-openapi": (PUBLIC, 200),
    "api-quotes": (PUBLIC, None), "api-orders": (SIGNED_IN, 200), "api-order": (OWNER, 200),
    "api-order-paid": (OWNER, None), "api-order-cancel": (OWNER, None),
    "api-order-extension": (OWNER, 200), "api-order-extend": (OWNER, None),
    "set_language": (PUBLIC, None), "catalog": (PUBLIC, 200), "product": (PUBLIC, 200),
    "signup": (PUBLIC, 200), "login": (PUBLIC, 200), "login_code": (PUBLIC, 302), "logout": (PUBLIC, None),
    "two_factor": (OPERATORS, 200),
    "password_change": (SIGNED_IN, 200), "password_change_done": (SIGNED_IN, 200),
    "password_reset": (PUBLIC, 200), "password_reset_done": (PUBLIC, 200), "password_reset_confirm": (PUBLIC, 200),
    "password_reset_complete": (PUBLIC, 200), "api_tokens": (SIGNED_IN, 200), "ssh_keys": (SIGNED_IN, 200),
    "checkout": (SIGNED_IN, 200),
    "orders": (SIGNED_IN, 200), "order": (OWNER, 200), "order_claim_payment": (OWNER, None),
    "order_cancel": (OWNER, None), "order_refund_address": (OWNER, None), "order_status": (OWNER, 200),
    "order_take_start": (OWNER, None), "order_extend": (OWNER, None), "checkout_price": (PUBLIC, 200),
    "contact": (PUBLIC, 200), "terms": (PUBLIC, 200),
    "invoice_pdf": (OWNER, 200), "credit_note_pdf": (OWNER, 404), "guides": (PUBLIC, 200), "guide": (PUBLIC, 200),
    "planner": (PUBLIC, 200), "planner_simulate": (PUBLIC, None), "planner_simulation": (PUBLIC, 404),
    "planner_simulation_status": (PUBLIC, 404), "pilot_reports": (SIGNED_IN, 200), "pilot_report": (OWNER, 200),
    "api-pilot-reports": (SIGNED_IN, 200), "api-pilot-report": (OWNER, 200),
}
FORMS = ["signup", "login", "logout", "password_reset", "checkout", "order_claim_payment", "order_cancel",
         "order_refund_address", "planner_simulate", "api_tokens", "ssh_keys", "password_change", "login_code",
         "two_factor", "pilot_reports", "order_take_start", "order_extend"]


def _names(patterns, admin=False):
    for p in patterns:
        if isinstance(p, URLResolver):
            if str(p.pattern).startswith("admin/"):
                continue
            yield from _names(p.url_patterns)
        elif p.name:
            yield p.name


@pytest.fixture
def world():
    shop.load_shop()
    alice = shop.customer()
    order = paid_order(alice)
    bob = shop.customer("bob@example.com")
    report = report_store(user=alice, data=as_bytes(gpu_report()))
    kwargs = {"slug": "h100-sxm-80gb", "reference": order.reference, "number": "CN-2031-000001",
              "uidb64": "MQ", "token": "bad-token", "job_id": uuid.uuid4(), "report_id": report.pk}
    return alice, bob, order, kwargs


def url(name: str, kwargs: dict) -> str:
    from django.urls import get_resolver as resolver

    wanted = resolver().reverse_dict.getlist(name)
    names = set(wanted[0][0][0][1]) if wanted else set()
    if name == "guide":
        names, kwargs = {"slug"}, {"slug": "choosing-a-gpu"}
    with translation.override("en"):
        return reverse(name, kwargs={k: v for k, v in kwargs.items() if k in names})


def test_every_url_has_a_declared_audience():
    assert set(_names(get_resolver().url_patterns)) == set(ACCESS)


def test_pages_anonymously_as_another_customer_and_as_the_owner(client, world):
    alice, bob, order, kwargs = world
    owner, stranger = Client(), Client()
    owner.force_login(alice)
    stranger.force_login(bob)
    for name, (audience, allowed) in ACCESS.items():
        if allowed is None or name.startswith("api-") or audience == OPERATORS:
            continue
        address = url(name, kwargs)
        anonymous = client.get(address).status_code
        mine = owner.get(address).status_code
        theirs = stranger.get(address).status_code
        if audience == PUBLIC:
            assert anonymous == mine == allowed, (name, anonymous, mine)
        elif audience == SIGNED_IN:
            assert anonymous == 302 and mine == theirs == allowed, (name, anonymous, mine, theirs)
        else:  # another customer's order does not exist for them
            assert anonymous == 302 and mine == allowed and theirs == 404, (name, anonymous, mine, theirs)


def test_posts_to_someone_elses_order_find_nothing_and_change_nothing(world):
    alice, bob, order, kwargs = world
    stranger = Client()
    stranger.force_login(bob)
    for name in ("order_claim_payment", "order_cancel", "order_refund_address", "order_take_start", "order_extend"):
        assert stranger.post(url(name, kwargs), {"txid": "", "address": "bc1qxy", "days": "3"}).status_code == 404, name
    order.refresh_from_db()
    assert order.state == "paid" and order.refund_address == ""


def test_the_api_refuses_strangers(client, world):
    alice, bob, order, kwargs = world
    _t, bobs = api_token_create(user=bob, name="bob")
    for name in ("api-orders", "api-order", "api-order-paid", "api-order-cancel", "api-order-extension",
                 "api-order-extend", "api-pilot-reports", "api-pilot-report"):
        address = url(name, kwargs)
        method = client.get if ACCESS[name][1] else client.post
        assert method(address).status_code == 401, name
    for name in ("api-order", "api-order-paid", "api-order-cancel", "api-order-extension", "api-order-extend",
                 "api-pilot-report"):
        address = url(name, kwargs)
        method = client.get if ACCESS[name][1] else client.post
        response = method(address, headers={"Authorization": f"Bearer {bobs}"}, content_type="application/json")
        assert response.status_code == 404, name
    assert client.get(url("metrics", kwargs), REMOTE_ADDR="192.0.2.1").status_code == 403


def test_forms_refuse_posts_without_a_csrf_token(world):
    alice, _bob, _order, kwargs = world
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    for name in FORMS:
        assert strict.post(url(name, kwargs), {}).status_code == 403, name
    anonymous = Client(enforce_csrf_checks=True)
    assert anonymous.post(url("login", kwargs), {"username": "alice@example.com"}).status_code == 403


def test_the_admin_is_for_staff_only(client, world):
    alice, _bob, order, _kwargs = world
    with translation.override("en"):
        pages = ["/admin/", f"/admin/orders/order/{order.pk}/change/", "/admin/payments/asset/watch/",
                 "/admin/audit/auditentry/", "/admin/ops/sweeprecord/", reverse("admin:payments_asset_changelist"),
                 reverse("admin:orders_webhookdelivery_changelist")]
    customer = Client()
    customer.force_login(alice)
    for page in pages:
        for who in (client, customer):
            response = who.get(page)
            assert response.status_code == 302 and "/admin/login/" in response["Location"], page
    viewer = get_user_model().objects.create_user("viewer", password="x" * 12, is_staff=True)
    staff = Client()
    staff.force_login(viewer)
    assert staff.get(pages[1]).status_code == 403  # staff without the permission
