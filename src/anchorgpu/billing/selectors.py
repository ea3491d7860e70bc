"""Reads of the billing rules: the VAT treatment a customer gets under the operator's rates."""

from __future__ import annotations

from .models import VatRate
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
