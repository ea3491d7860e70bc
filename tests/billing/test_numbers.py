"""Document numbers: INV-YYYY-000001 and CN-YYYY-000001, gap-free within a year."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection, transaction

from anchorgpu.billing.models import CreditNote, Invoice
from anchorgpu.billing.services import credit_note_issue, invoice_issue
from tests import shop

pytestmark = pytest.mark.django_db

LATE_2031 = datetime(2031, 12, 31, 23, 59, tzinfo=UTC)
EARLY_2032 = datetime(2032, 1, 1, 0, 1, tzinfo=UTC)


def issue_invoice(user, now: datetime) -> Invoice:
    """A fresh order's invoice, issued at ``now`` (payment is not needed to test numbering)."""
    order = shop.place(user)
    with transaction.atomic():
        return invoice_issue(order=order, crypto_amount=order.quote.amount, actor="test", now=now)


def issue_note(invoice: Invoice, now: datetime, amount: str = "1.00") -> CreditNote:
    with transaction.atomic():
        return credit_note_issue(invoice=invoice, amount=Decimal(amount), reason="goodwill", customer_reason="goodwill", actor="test", now=now)


def test_invoice_numbers_run_one_two_three_and_restart_in_a_new_year(alice):
    numbers = [issue_invoice(alice, LATE_2031).number for _ in range(3)]
    numbers += [issue_invoice(alice, EARLY_2032).number for _ in range(2)]
    assert numbers == ["INV-2031-000001", "INV-2031-000002", "INV-2031-000003",
                       "INV-2032-000001", "INV-2032-000002"]
    assert list(Invoice.objects.filter(year=2031).order_by("sequence").values_list("sequence", flat=True)) == [1, 2, 3]


def test_credit_notes_have_their_own_series(paid):
    invoice = paid.invoice
    numbers = [issue_note(invoice, LATE_2031).number for _ in range(3)] + [issue_note(invoice, EARLY_2032).number]
    assert numbers == ["CN-2031-000001", "CN-2031-000002", "CN-2031-000003", "CN-2032-000001"]
    assert invoice.number.endswith("-000001")  # the invoice series is untouched by credit notes


def test_a_rolled_back_document_gives_its_number_back(alice):
    first = issue_invoice(alice, LATE_2031)
    order = shop.place(alice)
    with pytest.raises(RuntimeError, match="printer on fire"):
        with transaction.atomic():
            lost = invoice_issue(order=order, crypto_amount=1, actor="test", now=LATE_2031)
            assert lost.number == "INV-2031-000002"
            raise RuntimeError("printer on fire")
    assert not Invoice.objects.filter(order=order).exists()
    assert issue_invoice(alice, LATE_2031).number == "INV-2031-000002"

    with pytest.raises(RuntimeError):
        with transaction.atomic():
            assert issue_note(first, LATE_2031).number == "CN-2031-000001"
            raise RuntimeError("rolled back")
    assert issue_note(first, LATE_2031).number == "CN-2031-000001"


def test_credit_notes_never_credit_more_than_the_invoice(paid):
    invoice = paid.invoice
    with pytest.raises(ValueError, match="more than invoice"):
        issue_note(invoice, LATE_2031, amount=str(invoice.total + Decimal("0.01")))
    issue_note(invoice, LATE_2031, amount=str(invoice.total - Decimal("1.00")))
    with pytest.raises(ValueError, match="more than invoice"):
        issue_note(invoice, LATE_2031, amount="1.01")
    for amount in ("0", "-1.00"):
        with pytest.raises(ValueError):
            issue_note(invoice, LATE_2031, amount=amount)
    last = issue_note(invoice, LATE_2031, amount="1.00")
    assert last.number == "CN-2031-000002"  # the refused ones took no number
    with pytest.raises(ValueError):
        issue_note(invoice, LATE_2031, amount="0.01")
    assert sum(n.amount for n in invoice.credit_notes.all()) == invoice.total


@pytest.mark.postgres_only
@pytest.mark.db_race
@pytest.mark.django_db(transaction=True)
def test_concurrent_invoices_get_consecutive_numbers():
    """Eight payments completing at once, in a year with no counter yet: all race to create it."""
    shop.load_shop()
    user = shop.customer()
    orders = [shop.place(user) for _ in range(8)]
    barrier = threading.Barrier(len(orders))
    results: list[object] = [None] * len(orders)

    def worker(i: int, order) -> None:
        try:
            connection.ensure_connection()  # its own connection, open before the start
            barrier.wait(timeout=60)
            with transaction.atomic():
                results[i] = invoice_issue(order=order, crypto_amount=1, actor="test", now=LATE_2031).number
        except BaseException as exc:  # noqa: BLE001 -- checked below
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, order), daemon=True) for i, order in enumerate(orders)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "a worker hung"
    assert all(isinstance(number, str) for number in results), results
    assert sorted(results) == [f"INV-2031-{n:06d}" for n in range(1, 9)]
