"""The order page, the operator's tools and the services read one set of rules: what the page or the panel
offers is what the service accepts, and what it hides the service refuses."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from anchorgpu.orders.admin_panels import payment_summary, tools_for
from anchorgpu.orders.errors import OrderError
from anchorgpu.orders.models import Order
from anchorgpu.orders.selectors import order_for_customer, order_page
from anchorgpu.orders.services import order_cancel
from anchorgpu.payments.services import payment_claim, payment_mark_paid, payment_status
from tests import shop

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    shop.load_shop()
    return shop.customer()


def _page(order, now=None):
    order = Order.objects.get(pk=order.pk)
    return order_page(order, evaluation=payment_status(order), claim_refused=False, now=now or timezone.now())


def _accepts(call) -> bool:
    try:
        call()
    except OrderError:
        return False
    return True


def _live_html(client, order) -> str:
    with translation.override("en"):
        url = reverse("order_status", kwargs={"reference": order.reference})
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_cancel_is_offered_exactly_when_the_service_takes_it(alice):
    client = Client()
    client.force_login(alice)
    free = shop.place(alice)
    assert _page(free).may_cancel
    assert 'class="cancel"' in _live_html(client, free)
    assert _accepts(lambda: order_cancel(order=free, actor="alice"))
    # A transfer on its way (recorded, not yet confirmed): no cancel button, and the service refuses.
    sent = shop.place(alice, quantity=2)
    shop.pay(sent, confirmations=0)
    assert not _page(sent).may_cancel and 'class="cancel"' not in _live_html(client, sent)
    assert not _accepts(lambda: order_cancel(order=sent, actor="alice"))


def test_an_underpaid_order_asks_for_what_is_missing_on_the_page(alice):
    client = Client()
    client.force_login(alice)
    order = shop.place(alice)
    received = order.quote.amount // 4
    shop.pay(order, amount=received)
    page = _page(order)
    assert page.underpaid and page.units_due == order.quote.amount - received
    html = _live_html(client, order)
    assert "Still to send" in html
    with translation.override("en"):
        context = client.get(reverse("order", kwargs={"reference": order.reference})).context
    assert context["pay_units"] == order.quote.amount - received
    assert context["pay_uri"].startswith("bitcoin:") and context["pay_uri"] != ""


def test_claim_is_offered_exactly_when_the_service_takes_it(alice):
    order = shop.place(alice)
    late = order.quote.expires_at + timedelta(seconds=1)
    assert not _page(order, now=late).may_claim
    assert not _accepts(lambda: payment_claim(order=order, actor="alice", now=late))
    assert _page(order).may_claim
    assert _accepts(lambda: payment_claim(order=order, actor="alice"))
    assert not _page(order).may_claim and _page(order).claim_pending


def test_the_mark_paid_tool_is_shown_exactly_when_the_service_takes_it(alice):
    nothing = shop.place(alice)
    order = Order.objects.get(pk=nothing.pk)
    names = [t.name for t in tools_for(order, payment_summary(order))]
    assert "mark_paid" not in names
    assert not _accepts(lambda: payment_mark_paid(order=nothing, actor="ops", reason="fee"))
    short = shop.place(alice, quantity=2)
    shop.pay(short, amount=short.quote.amount - short.quote.amount // 10)
    order = Order.objects.get(pk=short.pk)
    assert "mark_paid" in [t.name for t in tools_for(order, payment_summary(order))]
    assert _accepts(lambda: payment_mark_paid(order=short, actor="ops", reason="exchange kept a fee"))
    order = Order.objects.get(pk=short.pk)
    assert order.state == "paid" and "mark_paid" not in [t.name for t in tools_for(order, payment_summary(order))]


def test_another_customers_order_is_not_found(alice):
    order = shop.place(alice)
    bob = shop.customer("bob@example.com")
    assert order_for_customer(user=alice, reference=order.reference) == order
    assert order_for_customer(user=bob, reference=order.reference) is None
    assert order_for_customer(user=alice, reference="") is None
    client = Client()
    client.force_login(bob)
    with translation.override("en"):
        assert client.get(reverse("order", kwargs={"reference": order.reference})).status_code == 404
