"""Migrations billing 0003 and orders 0012: credit notes issued before keep printing their reason, and the
orders table, rebuilt by SQLite to add its columns, keeps the database's own checks (orders 0008) both ways."""

from __future__ import annotations

import importlib
from decimal import Decimal

import pytest
from django.apps import apps
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

from anchorgpu.billing.models import CreditNote
from anchorgpu.billing.services import credit_note_issue
from anchorgpu.orders.invariants import database_checks_missing
from tests import shop

from .conftest import paid_order

BILLING_0003 = importlib.import_module("anchorgpu.billing.migrations.0003_vat_seller_terms_customer_reason")


@pytest.mark.django_db
def test_a_credit_note_from_before_keeps_its_printed_reason(alice):
    order = paid_order(alice)
    with transaction.atomic():
        note = credit_note_issue(invoice=order.invoice, amount=Decimal("1.00"), reason="IPv4 não entregue",
                                 customer_reason="goodwill", actor="test")
    CreditNote.objects.filter(pk=note.pk).update(customer_reason="", customer_reason_text="")  # as before 0003
    BILLING_0003._keep_printed_reasons(apps, None)
    note.refresh_from_db()
    assert (note.customer_reason, note.customer_reason_text) == ("other", "IPv4 não entregue")
    assert note.reason_for_customer() == "IPv4 não entregue"


@pytest.mark.django_db(transaction=True)
def test_orders_0012_keeps_the_database_checks_both_ways():
    executor = MigrationExecutor(connection)
    try:
        executor.migrate([("orders", "0011_order_email_note_for_customers")])
        assert database_checks_missing() == []
        executor = MigrationExecutor(connection)
        executor.migrate([("orders", "0012_order_business_and_tax")])
        assert database_checks_missing() == []
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert database_checks_missing() == []
    shop.load_shop()  # and the shop still works on the rebuilt table
    order = shop.place(shop.customer())
    assert order.tax["treatment"] == "not_registered"


ORDERS_0012 = importlib.import_module("anchorgpu.orders.migrations.0012_order_business_and_tax")


@pytest.mark.django_db
def test_orders_and_invoices_with_a_vat_id_were_a_business(alice):
    order = paid_order(alice)  # the conftest's customer gives a VAT id
    private = paid_order(alice, vat_id="", company="")
    Order = apps.get_model("orders", "Order")
    Order.objects.update(business=False)  # as before 0012
    order.invoice.__class__.objects.update(business=False)
    ORDERS_0012._vat_id_meant_business(apps, None)
    BILLING_0003._vat_id_meant_business(apps, None)
    assert dict(Order.objects.values_list("pk", "business")) == {order.pk: True, private.pk: False}
    assert dict(order.invoice.__class__.objects.values_list("order_id", "business")) == {order.pk: True,
                                                                                         private.pk: False}
