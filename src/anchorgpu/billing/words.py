"""The words a VAT treatment puts on documents and pages, in the active language: one place for the invoice,
the credit note and the order page."""

from __future__ import annotations

from decimal import Decimal

from django.utils.translation import gettext as _
from django_countries import countries

from anchorgpu.formats import display

from . import tax


def rate_text(rate) -> str:
    rate = Decimal(rate).normalize()
    return display.percent(rate, max(0, -rate.as_tuple().exponent))


def mention(treatment: str) -> str:
    """The sentence the treatment requires on an invoice ("" for VAT charged, or none stated)."""
    match treatment:
        case tax.Treatment.REVERSE_CHARGE:
            return _("Reverse charge — VAT to be accounted for by the recipient (Art. 196 Council Directive "
                     "2006/112/EC).")
        case tax.Treatment.OUTSIDE_EU:
            return _("VAT not applicable: the place of supply is outside the EU.")
        case tax.Treatment.NOT_REGISTERED:
            return _("No VAT charged: the seller is not registered for VAT.")
    return ""


def vat_label(treatment: str, rate, country: str) -> str:
    if treatment == tax.Treatment.STANDARD:
        return _("VAT %(rate)s (%(country)s)") % {"rate": rate_text(rate), "country": countries.name(country)}
    return _("VAT %(rate)s") % {"rate": rate_text(0)}


def order_vat_note(order) -> str:
    """What the order page says of VAT: the VAT inside its total at the rate decided at checkout, or the
    treatment's mention; "" for an order placed before checkouts decided it."""
    if not order.tax:
        return ""
    decision = tax.Decision.from_data(order.tax)
    if decision.treatment is tax.Treatment.STANDARD:
        amount = tax.tax_inside(order.fiat_total, decision.rate, order.currency)
        return _("Includes %(vat)s: %(amount)s") % {
            "vat": vat_label(decision.treatment, decision.rate, decision.country),
            "amount": display.money(amount, order.currency)}
    return mention(decision.treatment)
