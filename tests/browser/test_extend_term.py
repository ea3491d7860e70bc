"""In Chromium (issue 25): a customer whose term is running extends it by three days from the order page,
sees the extension's quote, presses "I've paid"; the transfer is recorded (as an operator records one) and
the order page shows the term's new end."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from anchorgpu.formats.display import moment_value
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.models import Order
from tests import shop

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery staple"


def test_a_customer_extends_a_running_term_and_pays_for_it(live_server, page, shot):
    from playwright.sync_api import expect

    shop.load_shop()
    user = shop.customer(email="dana@example.com", password=PASSWORD)
    order = shop.place(user)
    shop.pay(order)
    provision_due()
    order = Order.objects.get(pk=order.pk)
    assert order.state == "active"
    old_end = order.ends_at

    page.goto(f"{live_server.url}/en/account/login/?next=/en/orders/{order.reference}/")
    page.get_by_label("Email").fill("dana@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_label("Password").press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Order {order.reference}")

    extend = page.locator("#extend")
    expect(extend.get_by_role("heading", name="Extend this term")).to_be_visible()
    three = extend.get_by_role("radio", name=re.compile(r"3 days, until .*: [0-9.,]+ USD"))
    expect(three).to_be_visible()
    three.check()
    extend.get_by_label("Pay with").select_option("btc")
    shot(page, "1-extend-form")
    extend.get_by_role("button", name="Hold the cards and show the payment").click()

    ext = Order.objects.select_related("quote").get(extends=order)
    expect(page).to_have_url(re.compile(rf"/en/orders/{ext.reference}/$"))
    expect(page.get_by_role("status")).to_contain_text("The cards are held for your extension")
    expect(page.locator(".extension-of")).to_contain_text("This order adds 3 days, on the same cards")
    expect(page.locator(".status .state")).to_have_text("awaiting payment")
    expect(page.locator("code.address")).to_have_text(ext.quote.address)
    shot(page, "2-extension-quote")

    page.get_by_label("Transaction id (optional)").fill(shop.txid("btc", 1))
    page.get_by_role("button", name="I've paid").click()
    expect(page.locator(".status .state")).to_have_text("payment being checked")

    shop.pay(ext, txid=shop.txid("btc", 1))  # the transfer confirmed, recorded as an operator does
    page.reload()
    expect(page.locator(".status .state")).to_have_text(f"added to order {order.reference}")
    page.locator(".extension-of").get_by_role("link", name=order.reference).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Order {order.reference}")
    new_end = old_end + timedelta(days=3)
    assert Order.objects.get(pk=order.pk).ends_at == new_end
    term = page.locator("dl.facts").filter(has_text="Software environment")
    expect(term).to_contain_text(moment_value(new_end))
    expect(term).to_contain_text("6 days")
    expect(page.locator(".extensions")).to_contain_text(ext.reference)
    shot(page, "3-new-end")
