"""Issuing invoices and credit notes, numbered without gaps per year.

The number is taken from ``DocumentSequence`` under a row lock in the same
transaction that creates the document: a rollback gives the number back, a
commit uses it, so the numbers of a year run 1, 2, 3… with no holes.

An invoice is computed once, when it is issued, and never again: the seller's details as the settings give
them then, the VAT treatment decided at checkout (``Order.tax``) and the amounts it gives (``billing.tax.split``:
the VAT inside the total, rounded half up to the currency's minor unit), each line's amount excluding VAT and the
term it covers. A later change of settings or rates changes no invoice issued before it. A credit note reverses
the VAT in proportion (``billing.tax.credit_split``); the one that closes an invoice reverses what is left of it
to the cent."""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone, translation

from anchorgpu.audit.services import audit_record
from anchorgpu.orders.lines import line_label

from . import tax
from .models import CreditNote, CustomerReason, DocumentSequence, Invoice, InvoiceLine
from .selectors import tax_decision
from .seller import current_seller

log = logging.getLogger(__name__)
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


def _decision(order) -> tax.Decision | None:
    """The order's VAT treatment from its checkout; an order placed before checkouts decided it gets today's,
    or, where today's rules give none (a rate missing), none: its invoice then states its total only, as invoices
    did before VAT was stated."""
    if order.tax:
        return tax.Decision.from_data(order.tax)
    try:
        return tax_decision(country=str(order.country), business=order.business, vat_id=order.vat_id)
    except tax.TaxError as exc:
        log.warning("order %s: invoiced without a VAT statement: %s", order.reference, exc)
        return None


def invoice_issue(*, order, crypto_amount: int, actor: str, now: datetime | None = None) -> Invoice:
    """The invoice of a paid order (once; a second call returns the first)."""
    existing = Invoice.objects.filter(order=order).first()
    if existing is not None:
        return existing
    now = now or timezone.now()
    seller = current_seller()  # refuses the placeholder address in production
    decision = _decision(order)
    quote = order.quote
    amounts = tax.split(total=order.fiat_total, lines=[Decimal(line["amount"]) for line in order.lines],
                        rate=decision.rate if decision else Decimal(0), currency=order.currency)
    stated = {"tax_treatment": decision.treatment.value, "tax_rate": decision.rate, "tax_country": decision.country,
              "net_total": amounts.net, "tax_amount": amounts.tax} if decision else {}
    number, sequence = _next_number(DocumentSequence.Kind.INVOICE, now.year)
    invoice = Invoice.objects.create(
        order=order, number=number, year=now.year, sequence=sequence, issued_at=now, currency=order.currency,
        total=amounts.gross, name=order.name, company=order.company, email=order.email, country=order.country,
        billing_address=order.billing_address, vat_id=order.vat_id, business=order.business,
        seller=seller.as_data(), **stated, asset_symbol=quote.asset.symbol, network_name=quote.asset.network_name,
        decimals=quote.asset.decimals,
        crypto_amount=crypto_amount, rate=quote.rate, rate_source=quote.rate_source, rate_at=quote.rate_at)
    with translation.override(order.language):  # the invoice is written in the order's language
        descriptions = [line_label(line)[:200] for line in order.lines]
    InvoiceLine.objects.bulk_create([
        InvoiceLine(invoice=invoice, position=i, kind=line["kind"], description=descriptions[i - 1],
                    quantity=line["quantity"], unit_price=Decimal(line["unit_price"]), amount=Decimal(line["amount"]),
                    net_amount=amounts.net_lines[i - 1] if decision else None, period_start=order.starts_at,
                    period_end=order.ends_at)
        for i, line in enumerate(order.lines, start=1)])
    audit_record(actor=actor, action="invoice_issue", obj=order,
                 data={"invoice": number, "total": str(amounts.gross), "net": str(amounts.net),
                       "vat": str(amounts.tax), **(decision.as_data() if decision else {})})
    return invoice


def credit_note_issue(*, invoice: Invoice, amount: Decimal, reason: str, actor: str, customer_reason: str,
                      customer_reason_text: str = "", refund=None, now: datetime | None = None) -> CreditNote:
    """A credit of ``amount`` (VAT inside, as the invoice's total) against ``invoice``. ``reason`` is the
    operator's internal note; ``customer_reason`` (a ``CustomerReason``, with ``customer_reason_text`` for "other"
    or to add words) is what the customer reads on the credit note."""
    if customer_reason not in CustomerReason.values:
        raise ValueError(f"a credit note needs a reason for the customer, one of {CustomerReason.values}")
    customer_reason_text = " ".join((customer_reason_text or "").split())[:300]
    if customer_reason == CustomerReason.OTHER and not customer_reason_text:
        raise ValueError("a credit note for another reason says it in words for the customer")
    now = now or timezone.now()
    invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)  # credits of one invoice take turns
    notes = list(invoice.credit_notes.all())
    credited = sum((n.amount for n in notes), Decimal(0))
    if amount <= 0 or credited + amount > invoice.total:
        raise ValueError(f"a credit note of {amount} would credit more than invoice {invoice.number} "
                         f"({invoice.total}, of which {credited} already credited)")
    net, vat = tax.credit_split(amount=amount, rate=invoice.tax_rate, currency=invoice.currency,
                                invoice_gross=invoice.total, invoice_tax=invoice.tax_amount, credited_gross=credited,
                                credited_tax=sum((n.tax_amount for n in notes), Decimal(0)))
    number, sequence = _next_number(DocumentSequence.Kind.CREDIT_NOTE, now.year)
    note = CreditNote.objects.create(invoice=invoice, refund=refund, number=number, year=now.year, sequence=sequence,
                                     issued_at=now, currency=invoice.currency, amount=amount, net_amount=net,
                                     tax_amount=vat, reason=reason, customer_reason=customer_reason,
                                     customer_reason_text=customer_reason_text)
    audit_record(actor=actor, action="credit_note_issue", obj=invoice.order, reason=reason,
                 data={"credit_note": number, "invoice": invoice.number, "amount": str(amount), "net": str(net),
                       "vat": str(vat), "customer_reason": customer_reason})
    return note
