"""Reads of the billing rules: the VAT treatment a customer gets under the operator's rates; what an invoice
still holds, and what the service credit rule credited on it."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from .models import CustomerReason, Invoice, VatRate
from .seller import Seller, current_seller
from .tax import Decision, decide


def vat_rates() -> dict[str, object]:
    return {str(country): rate for country, rate in VatRate.objects.values_list("country", "rate")}


def tax_decision(*, country: str, business: bool, vat_id: str, seller: Seller | None = None) -> Decision:
    """The treatment of a sale to this customer now (``billing.tax.decide``); raises ``tax.MissingRate`` where
    the operator has set no rate that applies."""
    seller = seller or current_seller()
    rates = vat_rates() if seller.registered_for_vat else {}
    return decide(seller_country=seller.country, seller_registered=seller.registered_for_vat,
                  customer_country=country, business=business, vat_id=vat_id, rates=rates)


def _service_notes(invoice):
    # A service credit (``orders.credits``) is the one credit note issued without a refund: every other note
    # (``payments.refunds``) credits an invoice for money sent back.
    return invoice.credit_notes.filter(refund__isnull=True, customer_reason=CustomerReason.FAULT)


def service_credited(invoice) -> Decimal:
    """What the service credit rule has credited on ``invoice`` so far."""
    return sum((n.amount for n in _service_notes(invoice)), Decimal(0))


def invoice_open_amount(invoice) -> Decimal:
    """The invoice's total less every credit note on it."""
    return invoice.total - sum((n.amount for n in invoice.credit_notes.all()), Decimal(0))


def service_credit_units(order) -> int:
    """The credit notes of the order's invoice that no refund came with, in the base units that settled it: their
    share of the invoice's total, of the amount received for it, rounded half up. That much of what the order
    keeps is owed back to the customer. They are the service credits (``orders.credits``) and the credit of an
    extension whose term was refunded whole (``payments.refunds``)."""
    invoice = Invoice.objects.filter(order=order).first()
    if invoice is None or invoice.total <= 0:
        return 0
    credited = Fraction(sum((n.amount for n in invoice.credit_notes.filter(refund__isnull=True)), Decimal(0)))
    return int((credited * int(invoice.crypto_amount) / Fraction(invoice.total) + Fraction(1, 2)) // 1)
