"""The operator resolves each case of the payment queue from the queue page, on a 1366×768 screen: a claim
whose automatic check found the wrong token, a claim that pays another address, a claim not found yet (the
transfer recorded by hand), an underpaid order, a late one whose cards were taken, an overpaid one, one whose
access failed and one whose payment vanished from the chain. Before each decision the row's amount,
received, shortfall, age and tools lie inside the screen's width, and the page does not scroll sideways."""

from __future__ import annotations

import re
from datetime import timedelta
from datetime import timezone as dt_timezone

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from anchorgpu.chains.base import LookupOutcome, TxLookup
from anchorgpu.fleet.models import Host
from anchorgpu.orders.fulfilment import MAX_FAILURES, provision_due
from anchorgpu.orders.models import Order
from anchorgpu.orders.transitions import order_lock
from anchorgpu.payments.chain_alerts import chain_alert_raise
from anchorgpu.payments.claim_check import claim_check
from anchorgpu.payments.services import payment_claim, refund_address_set
from tests import shop

pytestmark = pytest.mark.django_db(transaction=True)
WIDTH, HEIGHT = 1366, 768
REFUND_TO = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"
COLUMNS = ("order_link", "what_to_do", "claim", "due", "received", "shortfall", "age", "tools")


class OneAnswer:
    def __init__(self, outcome, detail=None):
        self.found = TxLookup(outcome, tip=100, detail=detail or {})

    def lookup(self, txid, address):
        return self.found


def _queue_cases():
    shop.load_shop()
    alice, bob = shop.customer(), shop.customer("bob@example.com")
    cases = {}
    wrong = payment_claim(order=shop.place(alice, asset="eth"), actor="alice", txid=shop.TXID_EVM)
    claim_check(order=wrong, watcher=OneAnswer(LookupOutcome.WRONG_ASSET, {"contract": "0x" + "12" * 20}))
    cases["wrong token"] = wrong
    other = payment_claim(order=shop.place(alice, asset="eth"), actor="alice", txid=shop.txid("evm", 1))
    claim_check(order=other, watcher=OneAnswer(LookupOutcome.OTHER_ADDRESS))
    cases["other address"] = other
    unseen = payment_claim(order=shop.place(alice), actor="alice", txid=shop.TXID_BTC)
    claim_check(order=unseen, watcher=OneAnswer(LookupOutcome.NOT_FOUND))
    cases["not found"] = unseen
    short = shop.place(alice)
    shop.pay(short, amount=short.quote.amount - 1_500, txid=shop.txid("btc", 2))
    cases["underpaid"] = short
    late = shop.place(alice, product="h200-141gb", quantity=16, term_days=7)
    after = late.quote.expires_at + timedelta(minutes=1)
    shop.order_for_all_h200(bob, now=after)
    shop.pay(late, seen_at=after, now=after + timedelta(minutes=1), txid=shop.txid("btc", 3))
    refund_address_set(order=late, actor="alice", address=REFUND_TO)
    cases["late"] = late
    over = shop.place(alice)
    shop.pay(over, amount=over.quote.amount + 5_000, txid=shop.txid("btc", 4))
    refund_address_set(order=over, actor="alice", address=REFUND_TO)
    cases["overpaid"] = over  # access is prepared below (provision_due): an active term with money owed back
    failed = shop.place(alice, product="mi300x-192gb")
    shop.pay(failed, txid=shop.txid("btc", 5))
    failed = Order.objects.get(pk=failed.pk)
    hosts = Host.objects.filter(devices__slots__booking=failed.booking)
    hosts.update(status=Host.Status.MAINTENANCE)
    for attempt in range(1, MAX_FAILURES + 1):
        provision_due(now=failed.starts_at + attempt * timedelta(minutes=1))
    hosts.update(status=Host.Status.ACTIVE)
    cases["failed"] = failed
    gone = shop.place(alice, asset="eth", product="a100-sxm-80gb")
    shop.pay(gone, txid=shop.txid("evm", 6), confirmations=gone.quote.confirmations_required)
    with transaction.atomic():
        subject = f"evm:{shop.txid('evm', 6)}:0 in block 7 (0xdef)"
        chain_alert_raise(order=order_lock(gone), subject=subject, actor="chain-watcher", now=timezone.now(),
                          text=f"Transfer {subject} is no longer on chain.")
    cases["reorged"] = gone
    for hours, order in enumerate(reversed(cases.values()), start=1):  # oldest first, as the queue lists them
        Order.objects.filter(pk=order.pk).update(created_at=timezone.now() - timedelta(hours=3 * hours, minutes=7))
    states = {name: Order.objects.get(pk=o.pk).state for name, o in cases.items()}
    assert states == {"wrong token": "payment_claimed", "other address": "payment_claimed",
                      "not found": "payment_claimed", "underpaid": "underpaid", "late": "paid_late",
                      "overpaid": "active", "failed": "failed", "reorged": "paid"}, states
    return cases


def _row(page, order):
    return page.locator("#result_list tbody tr", has=page.locator(f"a:text-is('{order.reference}')"))


def _check_fits(page, row, name, shot):
    """Every column of the row, and each of its tools, ends inside the screen; nothing scrolls sideways."""
    shot(page, name.replace(" ", "-"))
    widths = page.evaluate("[...document.querySelectorAll('#result_list thead th')].map("
                           "th => th.className.split(' ')[0] + ':' + Math.round(th.getBoundingClientRect().width))")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH, f"{name}: scrolls sideways: {widths}"
    results = page.locator("#changelist .results")  # the admin's own box, which would scroll the table inside
    assert results.evaluate("e => e.scrollWidth <= e.clientWidth"), f"{name}: the table scrolls sideways"
    for column in COLUMNS:
        cell = row.locator(f"td.field-{column}, th.field-{column}")
        box = cell.bounding_box()
        assert box is not None, (name, column)
        assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH, (name, column, box)
    for tool in row.locator("a.queue-tool").all():
        box = tool.bounding_box()
        assert box["x"] + box["width"] <= WIDTH, (name, tool.inner_text(), box)


def _use(page, row, tool_label):
    row.locator("a.queue-tool", has_text=tool_label).click()
    page.wait_for_load_state("load")


def _submit(page, live_server):
    page.click("#tool_form input[type=submit]")
    page.wait_for_url(re.compile(r".*/admin/orders/paymentqueueentry/.*"))
    assert page.locator("ul.messagelist li.success").count() == 1, page.content()


def test_the_operator_resolves_each_case_from_the_queue_at_1366_px(live_server, browser, shot):
    cases = _queue_cases()
    get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-for-tests-only-1")
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, locale="en-GB")
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "ops")
    page.fill("#id_password", "pw-for-tests-only-1")
    page.click("form.account-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    queue = f"{live_server.url}/admin/orders/paymentqueueentry/"
    page.goto(queue)
    assert page.locator("#result_list tbody tr").count() == len(cases)
    assert page.locator("#result_list tbody tr td.field-age").first.inner_text() == "1\xa0day"

    def row(name):
        found = _row(page, cases[name])
        assert found.count() == 1, name
        _check_fits(page, found, name, shot)
        return found

    # The automatic claim checks, in words.
    wrong = row("wrong token")
    assert "wrong token: contract 0x1212121212121212121212121212121212121212 is not ETH" in wrong.inner_text()
    assert "{" not in wrong.locator("td.field-claim").inner_text()  # not a raw dict
    _use(page, wrong, "Mark invalid")
    page.fill("#id_reason", "sent an unknown token; customer told to pay ETH")
    page.fill("#id_customer_reason", "Your transfer sent a token we do not accept; please pay in ETH.")
    _submit(page, live_server)

    other = row("other address")
    assert "pays another address, not this order's" in other.inner_text()
    _use(page, other, "Mark invalid")
    page.fill("#id_reason", "the transaction pays someone else")
    page.fill("#id_customer_reason", "The transaction you gave pays another address, not your order's.")
    _submit(page, live_server)

    unseen = row("not found")
    assert "not found on Bitcoin" in unseen.inner_text()
    _use(page, unseen, "Record a transfer")
    order = cases["not found"]
    seen = timezone.now().astimezone(dt_timezone.utc) - timedelta(minutes=3)
    page.fill("#id_txid", shop.TXID_BTC)
    page.fill("#id_index", "0")
    page.fill("#id_amount", str(order.quote.amount))
    page.fill("#id_confirmations", "6")
    page.fill("#id_seen_at_0", f"{seen:%Y-%m-%d}")
    page.fill("#id_seen_at_1", f"{seen:%H:%M:%S}")
    _submit(page, live_server)

    short = row("underpaid")
    cells = short.locator("td.field-shortfall").inner_text()
    assert "0.000015 BTC" in cells, cells
    _use(page, short, "Mark paid")
    page.fill("#id_reason", "exchange kept a 1,500 sat fee; accepted")
    _submit(page, live_server)

    late = row("late")
    assert "Paid after expiry and the cards were gone" in late.inner_text()
    _use(page, late, "Record a refund")
    page.check("input[name=scope][value=whole]")
    page.fill("#id_txid", "ee" * 32)
    page.fill("#id_reason", "paid late, the cards were taken")
    page.select_option("#id_customer_reason", "refund")
    _submit(page, live_server)

    over = row("overpaid")
    assert "0.00005 BTC more than quoted" in over.locator("td.field-received").inner_text()
    _use(page, over, "Record a refund")
    assert page.locator("input[name=scope][value=excess]").is_checked()
    page.fill("#id_txid", "dd" * 32)
    page.fill("#id_reason", "overpayment returned")
    _submit(page, live_server)

    failed = row("failed")
    assert "Access could not be prepared" in failed.inner_text()
    _use(page, failed, "Retry access preparation")
    page.fill("#id_reason", "host back from maintenance")
    _submit(page, live_server)

    gone = row("reorged")
    assert "no longer on chain" in gone.inner_text()
    _use(page, gone, "Clear the chain alert")
    page.fill("#id_reason", "customer paid again in 0x5151; checked on a block explorer")
    _submit(page, live_server)

    assert page.locator("#result_list tbody tr").count() == 0
    shot(page, "empty")
    final = {name: Order.objects.get(pk=o.pk) for name, o in cases.items()}
    assert {name: o.state for name, o in final.items()} == {
        "wrong token": "awaiting_payment", "other address": "awaiting_payment", "not found": "paid",
        "underpaid": "paid", "late": "refunded", "overpaid": "active", "failed": "provisioning", "reorged": "paid"}
    assert not final["overpaid"].refund_due and final["reorged"].chain_alert == ""
    context.close()
