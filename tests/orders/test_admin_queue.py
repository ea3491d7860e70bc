"""The operators' payment tools in the admin: the payment queue, recording
transfers, manual decisions and refunds through the services, with bad
input and refusals shown as form errors (never a 500, nothing saved)."""

from __future__ import annotations

from datetime import timedelta
from datetime import timezone as dt_timezone

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders import notify
from anchorgpu.orders.models import Order
from anchorgpu.payments.demo import DEMO_ZPUB
from anchorgpu.payments.models import DepositKey, Rate, Refund, Transfer
from anchorgpu.payments.services import payment_claim, refund_address_set
from tests import shop

pytestmark = pytest.mark.django_db

QUEUE = reverse("admin:orders_paymentqueueentry_changelist")
# The BIP32 test vector's master private key: public knowledge, never a real key.
XPRV = ("xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yu"
        "GBxrMPHi")
REFUND_TO = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"


def _tool(order, name, **query):
    url = reverse(f"admin:orders_order_{name}", args=[order.pk])
    return f"{url}?back={query['back']}" if query else url


def _order_page(order):
    return reverse("admin:orders_order_change", args=[order.pk])


def _reload(order):
    return Order.objects.get(pk=order.pk)


def client_page_of(order) -> str:
    """The customer's own page of ``order``, in English."""
    customer = Client()
    customer.force_login(order.user)
    with translation.override("en"):
        return customer.get(reverse("order", kwargs={"reference": order.reference})).content.decode()


@pytest.fixture
def store():
    shop.load_shop()
    return shop.customer()


@pytest.fixture
def order(store):
    return shop.place(store)


def _transfer_post(order, **changes):
    seen = timezone.now().astimezone(dt_timezone.utc) - timedelta(minutes=2)
    data = {"txid": shop.TXID_BTC, "index": "0", "amount": str(order.quote.amount), "confirmations": "6",
            "seen_at_0": f"{seen:%Y-%m-%d}", "seen_at_1": f"{seen:%H:%M:%S}", "sender": "", "note": ""}
    data.update(changes)
    return data


def _errors(response) -> str:
    form = response.context["form"]
    return " ".join(str(e) for errors in form.errors.values() for e in errors)


# --- the queue -------------------------------------------------------------------


def test_queue_lists_waiting_orders_oldest_first(admin_client, store):
    awaiting, claimed, underpaid, paid, late, failed = (shop.place(store) for _ in range(6))
    payment_claim(order=claimed, actor="alice@example.com", txid=shop.TXID_BTC)
    shop.pay(underpaid, amount=underpaid.quote.amount // 2, txid="c1" * 32)
    shop.pay(paid, txid="c2" * 32)
    # States the services reach only through capacity running out or a provisioner failing:
    Order.objects.filter(pk=late.pk).update(state="paid_late")
    Order.objects.filter(pk=failed.pk).update(state="failed")
    base = timezone.now() - timedelta(hours=10)
    # Oldest: the late one, then the underpaid one, the claim, the failed one.
    for hours, o in ((1, late), (2, underpaid), (3, awaiting), (4, claimed), (5, paid), (6, failed)):
        Order.objects.filter(pk=o.pk).update(created_at=base + timedelta(hours=hours))

    response = admin_client.get(QUEUE)
    assert response.status_code == 200
    listed = [o.reference for o in response.context["cl"].result_list]
    assert listed == [late.reference, underpaid.reference, claimed.reference, failed.reference]
    page = response.content.decode()
    assert awaiting.reference not in page and paid.reference not in page
    assert shop.TXID_BTC in page  # the claimed transaction id
    assert _tool(claimed, "mark_invalid", back="queue").replace("&", "&amp;") in page


def test_queue_shows_refunds_due_and_links_to_the_order(admin_client, order):
    shop.pay(order, amount=order.quote.amount + 1000)  # overpaid: paid, and the excess is owed back
    order = _reload(order)
    assert order.state == "paid" and order.refund_due
    page = admin_client.get(QUEUE).content.decode()
    assert order.reference in page and _order_page(order) in page
    assert "0.00001 BTC" in page  # the excess, in whole coins
    entry_page = reverse("admin:orders_paymentqueueentry_change", args=[order.pk])
    assert admin_client.get(entry_page)["Location"] == _order_page(order)


# --- recording transfers -----------------------------------------------------------


def test_recording_a_transfer_pays_the_order(admin_client, order):
    response = admin_client.post(_tool(order, "record_transfer"), _transfer_post(order, sender=REFUND_TO))
    assert response.status_code == 302 and response["Location"] == _order_page(order)
    order = _reload(order)
    assert order.state == "paid"
    row = Transfer.objects.get()
    assert (row.order_id, row.amount, row.recorded_by, row.sender) == (order.pk, order.quote.amount, "admin",
                                                                      REFUND_TO)
    assert AuditEntry.objects.filter(object_type="orders.order", object_id=str(order.pk), action="transfer_record",
                                     actor="admin").exists()


def test_from_the_queue_a_tool_goes_back_to_the_queue(admin_client, order):
    payment_claim(order=order, actor="alice@example.com")
    response = admin_client.post(_tool(order, "record_transfer", back="queue"), _transfer_post(order))
    assert response.status_code == 302 and response["Location"] == QUEUE


def test_the_same_transfer_twice_is_refused_for_any_order(admin_client, store):
    first, second = shop.place(store), shop.place(store)
    half = first.quote.amount // 2
    assert admin_client.post(_tool(first, "record_transfer"), _transfer_post(first, amount=str(half))
                             ).status_code == 302
    for target in (first, second):
        before = _reload(target).state
        response = admin_client.post(_tool(target, "record_transfer"), _transfer_post(target, amount=str(half)))
        assert response.status_code == 200
        assert "already credited" in _errors(response) and "index" not in _errors(response)
        assert Transfer.objects.count() == 1
        assert _reload(target).state == before
    assert first.reference in _errors(response)  # says which order it credits


@pytest.mark.parametrize("changes, field", [
    ({"txid": "", "amount": "", "confirmations": "", "seen_at_0": "", "seen_at_1": ""}, "txid"),
    ({"amount": "12.5"}, "amount"),
    ({"amount": "1e5"}, "amount"),
    ({"amount": "-5"}, "amount"),
    ({"amount": "0"}, "amount"),
    ({"txid": "a" * 200}, "txid"),
    ({"txid": shop.TXID_EVM}, "txid"),  # an Ethereum hash for a Bitcoin order
    ({"txid": "zz" * 32}, "txid"),
    ({"seen_at_0": f"{timezone.now() + timedelta(days=1):%Y-%m-%d}"}, "seen_at"),
    ({"index": "-1"}, "index"),
    ({"sender": "0x52908400098527886E0F7030069857D2E4169EE7"}, "sender"),  # not a Bitcoin address
])
def test_bad_transfer_input_is_a_form_error_and_saves_nothing(admin_client, order, changes, field):
    response = admin_client.post(_tool(order, "record_transfer"), _transfer_post(order, **changes))
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert Transfer.objects.count() == 0
    assert _reload(order).state == "awaiting_payment"


def test_confirmations_are_updated_through_the_admin(admin_client, order):
    admin_client.post(_tool(order, "record_transfer"), _transfer_post(order, confirmations="0"))
    assert _reload(order).state == "awaiting_payment"  # not confirmed yet
    row = Transfer.objects.get()
    url = reverse("admin:orders_order_update_confirmations", args=[order.pk, row.pk])
    assert url in admin_client.get(_order_page(order)).content.decode()
    assert admin_client.post(url, {"confirmations": "6"}).status_code == 302
    assert _reload(order).state == "paid"
    response = admin_client.post(url, {"confirmations": "1"})  # they never fall
    assert response.status_code == 200 and "only grow" in _errors(response)
    other = shop.place(order.user)
    foreign = reverse("admin:orders_order_update_confirmations", args=[other.pk, row.pk])
    assert admin_client.post(foreign, {"confirmations": "9"}).status_code == 302
    assert Transfer.objects.get().confirmations == 6


# --- manual decisions -----------------------------------------------------------------


@pytest.mark.parametrize("reason", ["", "   "])
def test_mark_paid_and_invalid_need_a_reason(admin_client, order, reason):
    payment_claim(order=order, actor="alice@example.com", txid=shop.TXID_BTC)
    for tool in ("mark_paid", "mark_invalid"):
        response = admin_client.post(_tool(order, tool), {"reason": reason, "customer_reason": "told"})
        assert response.status_code == 200 and "reason" in response.context["form"].errors
    assert _reload(order).state == "payment_claimed"
    assert not AuditEntry.objects.filter(action="payment_mark_paid").exists()


def test_mark_paid_with_a_reason_is_applied_and_audited(admin_client, order):
    shop.pay(order, amount=order.quote.amount - order.quote.amount // 10)
    assert _reload(order).state == "underpaid"
    response = admin_client.post(_tool(order, "mark_paid"), {"reason": "exchange kept a fee"})
    assert response.status_code == 302
    assert _reload(order).state == "paid"
    entry = AuditEntry.objects.get(action="payment_mark_paid")
    assert (entry.actor, entry.reason, entry.object_id) == ("admin", "exchange kept a fee", str(order.pk))
    assert AuditEntry.objects.filter(action="order_state", to_state="paid", actor="admin",
                                     reason__contains="exchange kept a fee").exists()


def test_mark_invalid_with_a_reason_is_applied_and_audited(admin_client, order):
    payment_claim(order=order, actor="alice@example.com", txid=shop.TXID_BTC)
    assert "What to tell the customer" in admin_client.get(_tool(order, "mark_invalid")).content.decode()
    refused = admin_client.post(_tool(order, "mark_invalid"), {"reason": "no such transaction"})
    assert refused.status_code == 200 and "customer_reason" in refused.context["form"].errors
    told = "No transfer with this transaction id reaches your order's address on the Bitcoin network."
    response = admin_client.post(_tool(order, "mark_invalid"), {"reason": "no such transaction (checked mempool)",
                                                                "customer_reason": told})
    assert response.status_code == 302
    order = _reload(order)
    assert order.state == "awaiting_payment" and order.claimed_txid == ""
    entry = AuditEntry.objects.get(action="order_state", from_state="payment_claimed")
    assert entry.actor == "admin" and "no such transaction" in entry.reason
    # The customer's e-mail says why, in the operator's words for them (not the internal reason), and what next.
    email = order.emails.get(kind="state_changed", state="awaiting_payment")
    subject, body = notify._message(email)
    assert "could not accept it:\n" + told in body and "checked mempool" not in body
    assert "then press “I've paid” again" in body
    page = client_page_of(order)
    assert told.replace("'", "&#x27;") in page and "checked mempool" not in page


def test_a_refusal_by_the_service_is_a_form_error(admin_client, order):
    response = admin_client.post(_tool(order, "mark_invalid"), {"reason": "nothing was claimed",
                                                                "customer_reason": "none"})
    assert response.status_code == 200
    assert "Only a claimed payment" in _errors(response)
    assert _reload(order).state == "awaiting_payment"


def test_recheck_capacity_pays_a_late_order_when_the_cards_are_free(admin_client, order):
    shop.pay(order)
    Order.objects.filter(pk=order.pk).update(state="paid_late", paid_at=None)  # as if the cards had been gone
    assert admin_client.get(_tool(order, "recheck_capacity")).status_code == 200
    assert admin_client.post(_tool(order, "recheck_capacity"), {}).status_code == 302
    assert _reload(order).state == "paid"


# --- refunds --------------------------------------------------------------------------


def test_refund_of_an_excess_needs_the_customers_address(admin_client, order):
    shop.pay(order, amount=order.quote.amount + 5000)
    data = {"scope": "excess", "amount": "5000", "rate_choice": "quote", "rate": "", "txid": "c3" * 32,
            "reason": "overpaid", "address": REFUND_TO, "network_fee": "0"}
    page = admin_client.get(_tool(order, "record_refund"))
    assert "has not given a refund address" in page.content.decode()
    assert page.context["form"].initial["amount"] == 5000
    response = admin_client.post(_tool(order, "record_refund"), data)
    assert response.status_code == 200 and "refund address" in _errors(response)
    assert Refund.objects.count() == 0

    refund_address_set(order=order, actor="alice@example.com", address=REFUND_TO)
    assert admin_client.post(_tool(order, "record_refund"), {**data, "rate_choice": "current"}
                             ).context["form"].errors["rate"]
    assert admin_client.post(_tool(order, "record_refund"), data).status_code == 302
    refund = Refund.objects.get()
    assert (refund.amount, refund.address, refund.recorded_by) == (5000, REFUND_TO, "admin")
    order = _reload(order)
    assert order.state == "paid" and not order.refund_due


# --- the order's page -------------------------------------------------------------------


def test_order_page_shows_payment_transfers_keys_and_the_audit_trail(admin_client, order):
    shop.pay(order, amount=order.quote.amount // 2, actor="carol")
    page = admin_client.get(_order_page(order))
    assert page.status_code == 200
    html = page.content.decode()
    quote = order.quote
    for text in (quote.address, str(quote.amount), quote.display_amount, shop.TXID_BTC, "transfer_record", "carol",
                 order.ssh_keys.get().fingerprint):
        assert text in html, text
    assert html.index("quote_create") < html.index("transfer_record")  # the audit trail is oldest first
    for tool in ("record_transfer", "mark_paid", "record_refund"):
        assert _tool(order, tool) in html
    assert _tool(order, "mark_invalid") not in html  # nothing was claimed


def test_order_list_filters_and_searches(admin_client, order):
    shop.pay(order)
    changelist = reverse("admin:orders_order_changelist")
    for query in ({"q": order.reference}, {"q": shop.TXID_BTC}, {"q": order.quote.address}, {"q": "alice@"},
                  {"state__exact": "paid"}, {"product__id__exact": order.product_id}):
        response = admin_client.get(changelist, query)
        assert response.status_code == 200
        assert [o.pk for o in response.context["cl"].result_list] == [order.pk], query


def test_orders_cannot_be_added_changed_or_deleted_in_the_admin(admin_client, order):
    assert admin_client.get(reverse("admin:orders_order_add")).status_code == 403
    assert admin_client.post(_order_page(order), {"state": "paid"}).status_code == 403
    assert admin_client.get(reverse("admin:orders_order_delete", args=[order.pk])).status_code == 403


# --- payment set-up -----------------------------------------------------------------------


def test_a_pasted_extended_private_key_is_refused_and_not_shown_again(admin_client, store):
    key = DepositKey.objects.get(scheme="btc")
    url = reverse("admin:payments_depositkey_change", args=[key.pk])
    response = admin_client.post(url, {"extended_public_key": XPRV, "label": "oops"})
    assert response.status_code == 200
    assert "PRIVATE" in _errors_of(response) and "exposed" in _errors_of(response)
    assert XPRV not in response.content.decode()
    key.refresh_from_db()
    assert key.extended_public_key == DEMO_ZPUB
    keys = DepositKey.objects.count()
    add = admin_client.post(reverse("admin:payments_depositkey_add"),
                            {"scheme": "btc-testnet", "extended_public_key": XPRV.replace("xprv", "tprv")})
    assert add.status_code == 200 and DepositKey.objects.count() == keys


def test_a_deposit_key_change_is_checked_and_audited(admin_client, order):
    key = DepositKey.objects.get(scheme="btc")
    url = reverse("admin:payments_depositkey_change", args=[key.pk])
    page = admin_client.get(url).content.decode()
    assert "have been issued" in page  # the order took an address from it
    assert admin_client.post(url, {"extended_public_key": "zpub-not-a-key", "label": "x"}).status_code == 200
    assert admin_client.post(url, {"extended_public_key": DEMO_ZPUB, "label": "renamed"}).status_code == 302
    key.refresh_from_db()
    assert key.label == "renamed" and key.next_index == 1
    assert AuditEntry.objects.filter(action="deposit_key_change", actor="admin").exists()
    assert admin_client.get(reverse("admin:payments_depositkey_delete", args=[key.pk])).status_code == 403


def _errors_of(response) -> str:
    form = response.context["adminform"].form
    return " ".join(str(e) for errors in form.errors.values() for e in errors)


def _rate_post(**changes):
    seen = timezone.now().astimezone(dt_timezone.utc) - timedelta(minutes=1)
    from anchorgpu.payments.models import Asset
    data = {"asset": str(Asset.objects.get(code="btc").pk), "currency": "usd", "price": "90000.5",
            "source": "exchange screen", "observed_at_0": f"{seen:%Y-%m-%d}", "observed_at_1": f"{seen:%H:%M:%S}"}
    data.update(changes)
    return data


def test_rates_are_added_by_the_operator_and_checked(admin_client, store):
    add = reverse("admin:payments_rate_add")
    before = Rate.objects.count()
    future = timezone.now() + timedelta(days=1)
    for bad in ({"price": "0"}, {"price": "-1"}, {"observed_at_0": f"{future:%Y-%m-%d}"}, {"currency": "US"}):
        response = admin_client.post(add, _rate_post(**bad))
        assert response.status_code == 200, bad
        assert Rate.objects.count() == before
    assert admin_client.post(add, _rate_post()).status_code == 302
    rate = Rate.objects.order_by("-id").first()
    assert (rate.entered_by, rate.currency) == ("admin", "USD")
    listing = admin_client.get(reverse("admin:payments_rate_changelist"))
    observed = [r.observed_at for r in listing.context["cl"].result_list]
    assert rate.observed_at in observed and observed == sorted(observed, reverse=True)  # newest first


def test_payment_pages_render(admin_client, order):
    shop.pay(order, amount=order.quote.amount + 1)
    refund_address_set(order=order, actor="alice@example.com", address=REFUND_TO)
    admin_client.post(_tool(order, "record_refund"), {"scope": "excess", "amount": "1", "rate_choice": "quote",
                                                      "txid": "d4" * 32, "reason": "overpaid",
                                                      "address": REFUND_TO})
    assert Refund.objects.count() == 1
    for name in ("asset", "depositkey", "rate", "transfer", "refund"):
        response = admin_client.get(reverse(f"admin:payments_{name}_changelist"), {"q": "d4"})
        assert response.status_code == 200, name
    settings_page = admin_client.get(reverse("admin:payments_paymentsettings_changelist"), follow=True)
    assert settings_page.status_code == 200 and "quote_minutes" in settings_page.content.decode()
    assert admin_client.get(reverse("admin:payments_paymentsettings_add")).status_code == 403
    for tool in ("record_transfer", "mark_paid", "mark_invalid", "recheck_capacity", "record_refund"):
        assert admin_client.get(_tool(order, tool)).status_code == 200, tool


# --- who may use the tools ---------------------------------------------------------------------


def test_a_customer_is_sent_to_the_admin_login(client, order):
    client.force_login(order.user)
    login = reverse("admin:login")
    for url in (QUEUE, _order_page(order), _tool(order, "record_transfer")):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(login), url
    response = client.post(_tool(order, "mark_paid"), {"reason": "let me in"})
    assert response.status_code == 302 and response["Location"].startswith(login)
    assert _reload(order).state == "awaiting_payment"


def test_staff_who_may_only_look_cannot_use_the_tools(client, order):
    user = get_user_model().objects.create_user("viewer", password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_order"))
    client.force_login(user)
    assert client.get(QUEUE).status_code == 200
    page = client.get(_order_page(order))
    assert page.status_code == 200 and _tool(order, "mark_paid") not in page.content.decode()
    assert client.post(_tool(order, "mark_paid"), {"reason": "x"}).status_code == 403
    assert _reload(order).state == "awaiting_payment"
