"""Every object the operators' admin shows is labelled by what it is, never Django's "ProductRate object (1)":
each registered model and each inline's model says what a row is, and every change page (with its inlines)
renders without the fallback. The admin is the shop's own: its header and titles name AnchorGPU."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.db import models
from django.urls import reverse
from django.utils import timezone, translation

from anchorgpu.billing.models import Invoice, VatRate
from anchorgpu.billing.services import credit_note_issue
from anchorgpu.catalog.models import Option, OptionPrice, PriceList
from anchorgpu.fleet.models import Host
from anchorgpu.ops.models import SweepRecord
from anchorgpu.orders.faults import host_fault_clear, host_mark_faulty
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.models import OperatorEvent, Order, WebhookDelivery
from anchorgpu.orders.moves import order_move
from anchorgpu.payments.models import Asset, PaymentSettings, Refund, StrayTransfer, WatchState
from anchorgpu.payments.refunds import RefundInput, refund_record
from anchorgpu.payments.services import refund_address_set
from tests import factories, shop

REFUND_ADDRESS = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"
FALLBACK = re.compile(r"object \((\d+|None|[0-9a-f-]{36})\)")


def _shown_models() -> dict[type[models.Model], str]:
    """Each model the admin shows, as a page of its own or as an inline, with where."""
    shown = {}
    for model, model_admin in admin.site._registry.items():
        shown.setdefault(model, f"{type(model_admin).__name__}")
        for inline in model_admin.inlines:
            shown.setdefault(inline.model, f"{inline.__name__} of {type(model_admin).__name__}")
    return shown


def test_every_model_the_admin_shows_says_what_a_row_is():
    missing = [f"{model._meta.label} ({where})" for model, where in _shown_models().items()
               if model.__str__ is models.Model.__str__]
    assert not missing, f"no __str__ of its own: {missing}"


@pytest.fixture
def a_working_shop(db):
    """A row of every kind the admin shows: the demo shop, an order paid and active, its invoice credited, an
    option priced on the price list, a sweep record."""
    shop.load_shop()
    alice = shop.customer()
    order = shop.place(alice)
    shop.pay(order)
    provision_due()
    invoice = Invoice.objects.get(order=order)
    credit_note_issue(invoice=invoice, amount=Decimal("1.00"), reason="goodwill", customer_reason="goodwill",
                      actor="operator")
    price_list = PriceList.objects.order_by("pk").first()
    if not OptionPrice.objects.filter(price_list=price_list).exists():
        factories.option("admin-label-option", {3: "5", 7: "9"}, price_list)
    refunded = shop.place(alice, product="h200-141gb")
    shop.pay(refunded, txid=shop.txid("btc", 7))
    refunded = Order.objects.get(pk=refunded.pk)
    refund_address_set(order=refunded, actor=alice.email, address=REFUND_ADDRESS)
    refund_record(order=refunded, actor="operator", refund=RefundInput(
        address=REFUND_ADDRESS, amount=refunded.quote.amount, rate_choice=Refund.RateChoice.QUOTE, txid="cd" * 32,
        reason="the customer asked", whole_order=True, customer_reason="refund"))
    short = shop.place(alice, product="a100-sxm-80gb")
    shop.pay(short, txid=shop.txid("btc", 8), amount=short.quote.amount // 2)  # underpaid: in the queue
    WebhookDelivery.objects.create(event=OperatorEvent.objects.filter(order=short).first(),  # as a URL set would
                                   url="https://hooks.example/anchorgpu", due_at=timezone.now())
    WatchState.objects.create(asset=Asset.objects.order_by("pk").first(), tip=100, next_block=90)
    StrayTransfer.objects.create(order=short, asset=Asset.objects.get(code="usdc-ethereum"), network="ethereum",
                                 txid=shop.txid("evm", 9), index=0, amount=5_000_000, address=short.quote.address,
                                 seen_at=timezone.now())  # as the watcher records money on the wrong network
    Group.objects.create(name="operators")
    VatRate.objects.get_or_create(country="PT", defaults={"rate": Decimal("23.00")})
    PaymentSettings.current()
    SweepRecord.objects.get_or_create(name="provision_due", defaults={"last_started_at": timezone.now()})
    host = Host.objects.filter(devices__slots__booking=Order.objects.get(pk=order.pk).booking).first()
    fault = host_mark_faulty(host=host, actor="operator", reason="fans failed")
    host_fault_clear(fault=fault, actor="operator", reason="fans replaced")
    order_move(order=order, actor="operator", reason="host maintenance")  # a Move row
    return Order.objects.get(pk=order.pk)


def test_every_row_the_admin_shows_has_a_real_label(a_working_shop):
    without_rows, fallbacks = [], []
    for model in _shown_models():
        rows = list(model._default_manager.all()[:5])
        if not rows:
            without_rows.append(model._meta.label)
        fallbacks += [f"{model._meta.label}: {obj}" for obj in rows if FALLBACK.search(str(obj))]
    assert not fallbacks
    # Customers' planner jobs and pilot reports are made by their own pages; their __str__ is checked above.
    assert set(without_rows) <= {"simulations.SimulationJob", "pilotreports.PilotReport"}, without_rows


def test_the_labels_are_what_an_operator_reads(a_working_shop):
    price_list = PriceList.objects.order_by("pk").first()
    rate = price_list.rates.select_related("product").first()
    assert str(rate) == f"{rate.product.name}: {rate.rate_per_card_hour} per card-hour"
    discount = price_list.discounts.get(term_days=7)
    assert str(discount) == f"7 days: {discount.percent} % off"
    price = price_list.option_prices.select_related("option").first()
    assert str(price).startswith(f"{price.option.name}, ")
    slot = a_working_shop.booking.slots.select_related("device").first()
    assert str(slot).startswith(f"{slot.device} [")
    line = a_working_shop.invoice.lines.first()
    assert str(line) == f"{a_working_shop.invoice.number} · {line.position}: {line.description}"
    with translation.override("pt"):
        assert "dias" in str(discount)


def _change_urls() -> list[tuple[str, str]]:
    urls = []
    for model in admin.site._registry:
        opts = model._meta
        for obj in model._default_manager.all()[:3]:
            urls.append((opts.label, reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])))
        urls.append((opts.label, reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")))
    return urls


@pytest.mark.parametrize("language", ["en", "pt"])
def test_no_admin_page_falls_back_to_object_and_a_number(admin_client, a_working_shop, language):
    admin_client.cookies["django_language"] = language
    seen = 0
    for label, url in _change_urls():
        response = admin_client.get(url, follow=True, HTTP_ACCEPT_LANGUAGE=language)
        assert response.status_code == 200, (label, url)
        text = response.content.decode()
        assert "object (" not in text and not FALLBACK.search(text), (label, url)
        seen += 1
    assert seen > 30


def test_the_admin_is_the_shops_own(admin_client):
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert "AnchorGPU operations" in page and "Django administration" not in page
    assert "<title>Fleet, prices, orders and payments | AnchorGPU operations</title>" in page
    admin_client.cookies["django_language"] = "fr"
    page = admin_client.get(reverse("admin:index"), HTTP_ACCEPT_LANGUAGE="fr").content.decode()
    with translation.override("fr"):
        assert str(admin.site.site_header) in page and str(admin.site.site_header) != "AnchorGPU operations"


def test_an_option_price_names_its_option_and_term(db):
    price_list = factories.price_list({})
    option = factories.option("nvme-2tb", {30: "40"}, price_list)
    assert str(OptionPrice.objects.get(option=option)) == "Nvme 2Tb, 30 days: 40.0000"
    assert Option.objects.get(pk=option.pk).name == "Nvme 2Tb"
