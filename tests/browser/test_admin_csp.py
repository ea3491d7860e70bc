"""The operators' admin works under the shop's strict Content-Security-Policy (the page fixture fails the
test on any refusal the console reports)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests import shop

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_admin_pages_an_operator_uses_run_under_the_policy(live_server, page):
    shop.load_shop()
    order = shop.place(shop.customer())
    get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-for-tests-only-1")
    page.goto(f"{live_server.url}/admin/login/")  # sends operators to the shop's log-in (two-factor lives there)
    page.fill("#id_username", "ops")
    page.fill("#id_password", "pw-for-tests-only-1")
    page.click("form.account-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    for path in ("/admin/", f"/admin/orders/order/{order.pk}/change/", "/admin/payments/asset/watch/",
                 "/admin/payments/asset/", "/admin/fleet/host/", "/admin/orders/order/"):
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        page.wait_for_load_state("load")
    # the admin's own scripts (loaded from files) still run: the theme toggle is wired up
    assert page.locator("button.theme-toggle").count() == 1
    # the two-factor set-up (an inline SVG QR code) runs under the policy too
    assert page.goto(f"{live_server.url}/en/account/two-factor/").status == 200
    assert page.locator(".qr svg").count() == 1
