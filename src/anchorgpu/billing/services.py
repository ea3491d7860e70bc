"""Issuing invoices and credit notes, numbered without gaps per year.

The number is taken from ``DocumentSequence`` under a row lock in the same
transaction that creates the document: a rollback gives the number back, a
commit uses it, so the numbers of a year run 1, 2, 3… with no holes."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone, translation

from anchorgpu.audit.services import audit_record
from anchorgpu.orders.lines import line_label

from .models import CreditNote, DocumentSequence, Invoice, InvoiceLine

_PREFIX = {DocumentSequence.Kind.INVOICE: "INV", DocumentSequence.Kind.CREDIT_NOTE: "CN"}


def _next_number(kind: str, year: int) -> tuple[str, int]:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("document numbers are taken inside the transaction that creates the document")
    for _attempt in range(2):
        row = DocumentSequence.objects.select_for_update().filter(kind=kind, year=year).first()
        if row is not None:
            break
        try:  # the year's first document: create its counter (another writer may race us to it)
            with transaction.atomic():
                DocumentSequence.objects.create(kind=kind, year=year, last=0)
        except IntegrityError:
            pass
    if row is None:
        raise RuntimeError(f"could not create the {kind} counter for {year}")
    row.last += 1
    row.save(update_fields=["last"])
    return f"{_PREFIX[kind]}-{year}-{row.last:06d}", row.last


def invoice_issue(*, order, crypto_amount: int, actor: str, now: datetime | None = None) -> Invoice:
    """The invoice of a paid order (once; a second call returns the first)."""
    existing = Invoice.objects.filter(order=order).first()
    if existing is not None:
        return existing
    now = now or timezone.now()
    quote = order.quote
    number, sequence = _next_number(DocumentSequence.Kind.INVOICE, now.year)
    invoice = Invoice.objects.create(
        order=order, number=number, year=now.year, sequence=sequence, issued_at=now, currency=order.currency,
        total=order.fiat_total, name=order.name, company=order.company, email=order.email, country=order.country,
        billing_address=order.billing_address, vat_id=order.vat_id, asset_symbol=quote.asset.symbol,
        network_name=quote.asset.network_name, decimals=quote.asset.decimals, crypto_amount=crypto_amount,
        rate=quote.rate, rate_source=quote.rate_source, rate_at=quote.rate_at)
    with translation.override(order.language):  # the invoice is written in the order's language
        descriptions = [line_label(line)[:200] for line in order.lines]
    InvoiceLine.objects.bulk_create([
        InvoiceLine(invoice=invoice, position=i, kind=line["kind"], description=descriptions[i - 1],
                    quantity=line["quantity"], unit_price=Decimal(line["unit_price"]), amount=Decimal(line["amount"]))
        for i, line in enumerate(order.lines, start=1)])
    audit_record(actor=actor, action="invoice_issue", obj=order,
                 data={"invoice": number, "total": str(order.fiat_total)})
    return invoice


def credit_note_issue(*, invoice: Invoice, amount: Decimal, reason: str, actor: str, refund=None,
                      now: datetime | None = None) -> CreditNote:
    now = now or timezone.now()
    invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)  # credits of one invoice take turns
    credited = sum((n.amount for n in invoice.credit_notes.all()), Decimal(0))
    if amount <= 0 or credited + amount > invoice.total:
        raise ValueError(f"a credit note of {amount} would credit more than invoice {invoice.number} "
                         f"({invoice.total}, of which {credited} already credited)")
    number, sequence = _next_number(DocumentSequence.Kind.CREDIT_NOTE, now.year)
    note = CreditNote.objects.create(invoice=invoice, refund=refund, number=number, year=now.year, sequence=sequence,
                                     issued_at=now, currency=invoice.currency, amount=amount, reason=reason)
    audit_record(actor=actor, action="credit_note_issue", obj=invoice.order,
                 data={"credit_note": number, "invoice": invoice.number, "amount": str(amount)})
    return note
