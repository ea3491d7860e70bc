"""VAT on what the shop sells: which treatment a customer gets, and the tax inside a paid total.

Pure: no Django, unit-tested without a database. The *rules* are the operator's (a rate per country in the
admin, the seller's country and VAT registration in the settings); this module only applies them. It covers EU
VAT as a seller of electronically supplied services meets it, and nothing more: we are not tax advisers.

* The seller is not registered for VAT (no seller VAT id): no VAT, and the invoice says why.
* Customer in the seller's own country: the seller's country's rate (business or not).
* Customer outside the EU (and not in the seller's country): no EU VAT, the place of supply is outside the EU.
* EU business customer with a VAT id, in another country: reverse charge, 0 %, the legal mention printed.
* Any other EU customer (private, or a business without a VAT id): the rate of the customer's country.
  A rate the operator has not set is an error (``MissingRate``): the checkout refuses the order rather than
  guess.

Prices are what the customer pays: a VAT the invoice states is *inside* the total (``split``), so the quote the
customer paid never changes with the tax. The tax is computed once, on the invoice total, rounded half up to the
currency's minor unit; the line amounts excluding VAT are rounded the same way and the last difference is put on
the largest line, so they add up to the total excluding VAT exactly.

VAT ids are checked for their country prefix and shape only, not against the EU's VIES service (no online call).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum

from anchorgpu.catalog.pricing import minor_unit
from anchorgpu.messages import DomainError, gettext_noop

HUNDRED = Decimal(100)

# The 27 member states (ISO 3166-1 codes; Greece's VAT ids use the prefix EL).
EU_COUNTRIES = frozenset("AT BE BG CY CZ DE DK EE ES FI FR GR HR HU IE IT LT LU LV MT NL PL PT RO SE SI SK".split())
VAT_PREFIX = {"GR": "EL"}
# The shape of each member state's VAT id after its prefix (as the EU's VIES documentation describes them).
_EU_VAT_SHAPE = {
    "AT": r"U\d{8}", "BE": r"[01]\d{9}", "BG": r"\d{9,10}", "CY": r"\d{8}[A-Z]", "CZ": r"\d{8,10}",
    "DE": r"\d{9}", "DK": r"\d{8}", "EE": r"\d{9}", "GR": r"\d{9}", "ES": r"[A-Z0-9]\d{7}[A-Z0-9]",
    "FI": r"\d{8}", "FR": r"[A-HJ-NP-Z0-9]{2}\d{9}", "HR": r"\d{11}", "HU": r"\d{8}",
    "IE": r"\d{7}[A-W][A-IW]?|\d[A-Z+*]\d{5}[A-W]", "IT": r"\d{11}", "LT": r"\d{9}|\d{12}", "LU": r"\d{8}",
    "LV": r"\d{11}", "MT": r"\d{8}", "NL": r"\d{9}B\d{2}", "PL": r"\d{10}", "PT": r"\d{9}", "RO": r"[1-9]\d{1,9}",
    "SE": r"\d{10}01", "SI": r"\d{8}", "SK": r"\d{10}",
}
# Any VAT id: two letters, then 2 to 13 characters (outside the EU, printed as given; checked no further).
_OTHER_TAX_ID = re.compile(r"[A-Z]{2}[A-Z0-9+*.]{2,13}")


class Treatment(StrEnum):
    STANDARD = "standard"  # VAT at ``rate`` of ``country``
    REVERSE_CHARGE = "reverse_charge"  # EU business customer in another member state, with a VAT id
    OUTSIDE_EU = "outside_eu"  # the place of supply is outside the EU
    NOT_REGISTERED = "not_registered"  # the seller charges no VAT: not registered for it


class TaxError(DomainError):
    pass


class MissingRate(TaxError):
    pass


@dataclass(frozen=True)
class Decision:
    treatment: Treatment
    rate: Decimal  # percent, 0 unless STANDARD
    country: str  # whose rate (STANDARD), else the customer's country

    def as_data(self) -> dict:
        return {"treatment": self.treatment.value, "rate": str(self.rate), "country": self.country}

    @classmethod
    def from_data(cls, data: Mapping) -> Decision:
        return cls(Treatment(data["treatment"]), Decimal(data["rate"]), data["country"])


def normalise_vat_id(text: str) -> str:
    return re.sub(r"[\s.\-]", "", text or "").upper()


def vat_id_problem(vat_id: str, country: str) -> TaxError | None:
    """What is wrong with ``vat_id`` (normalised) for a customer in ``country``, or None. Shape only."""
    if not vat_id:
        return None
    if not _OTHER_TAX_ID.fullmatch(vat_id):
        return TaxError(gettext_noop("A VAT id starts with its two-letter country prefix, then 2 to 13 letters or "
                                     "digits."))
    country = country.upper()
    if country in EU_COUNTRIES:
        prefix = VAT_PREFIX.get(country, country)
        if not vat_id.startswith(prefix):
            return TaxError(gettext_noop("A VAT id from this country starts with its country prefix %(prefix)s."),
                            prefix=prefix)
        if not re.fullmatch(_EU_VAT_SHAPE[country], vat_id[len(prefix):]):
            return TaxError(gettext_noop("This is not the shape of a VAT id from this country (%(prefix)s, then its "
                                         "own pattern of digits): check it."), prefix=prefix)
    return None


def customer_problem(*, country: str, business: bool, company: str, vat_id: str) -> tuple[str, TaxError] | None:
    """(field, error) for billing details these rules cannot work with, or None: a VAT id of the wrong shape or
    country, a VAT id on a private purchase, a business purchase without the business's name."""
    if vat_id:
        problem = vat_id_problem(vat_id, country)
        if problem is not None:
            return "vat_id", problem
        if not business:
            return "vat_id", TaxError(gettext_noop("A VAT id is for a purchase made for a business: tick “for a "
                                                   "business”, or leave the VAT id out."))
    if business and not (company or "").strip():
        return "company", TaxError(gettext_noop("Give the name of the business you buy for."))
    return None


def decide(*, seller_country: str, seller_registered: bool, customer_country: str, business: bool, vat_id: str,
           rates: Mapping[str, Decimal]) -> Decision:
    """The treatment of a sale to this customer under the operator's ``rates`` (country -> percent)."""
    customer = customer_country.upper()
    seller = seller_country.upper()
    if not seller_registered:
        return Decision(Treatment.NOT_REGISTERED, Decimal(0), customer)
    if customer == seller:
        return Decision(Treatment.STANDARD, _rate(rates, seller), seller)
    if customer not in EU_COUNTRIES:
        return Decision(Treatment.OUTSIDE_EU, Decimal(0), customer)
    if business and vat_id:
        return Decision(Treatment.REVERSE_CHARGE, Decimal(0), customer)
    return Decision(Treatment.STANDARD, _rate(rates, customer), customer)


def _rate(rates: Mapping[str, Decimal], country: str) -> Decimal:
    rate = rates.get(country)
    if rate is None:
        raise MissingRate(gettext_noop("No VAT rate is set up for %(country)s."), country=country)
    rate = Decimal(rate)
    if not Decimal(0) <= rate < HUNDRED:
        raise TaxError(gettext_noop("A VAT rate is at least 0 % and below 100 %."))
    return rate


@dataclass(frozen=True)
class Split:
    """A total the customer paid, VAT inside it."""
    gross: Decimal
    net: Decimal
    tax: Decimal
    net_lines: tuple[Decimal, ...]


def _round(value: Decimal, currency: str) -> Decimal:
    return value.quantize(minor_unit(currency), rounding=ROUND_HALF_UP)


def tax_inside(gross: Decimal, rate: Decimal, currency: str) -> Decimal:
    """The VAT inside ``gross`` at ``rate`` percent, rounded half up to the currency's minor unit."""
    return _round(Decimal(gross) * Decimal(rate) / (HUNDRED + Decimal(rate)), currency)


def split(*, total: Decimal, lines: Sequence[Decimal], rate: Decimal, currency: str) -> Split:
    """``total`` (the invoice total, already rounded) into its amount excluding VAT and its VAT, and each line's
    amount excluding VAT: rounded each, the difference put on the largest line so that they add up exactly."""
    gross = _round(Decimal(total), currency)
    tax = tax_inside(gross, rate, currency)
    net = gross - tax
    net_lines = [_round(Decimal(line) * HUNDRED / (HUNDRED + Decimal(rate)), currency) for line in lines]
    if net_lines:
        largest = max(range(len(net_lines)), key=lambda i: abs(net_lines[i]))
        net_lines[largest] += net - sum(net_lines, Decimal(0))
    return Split(gross=gross, net=net, tax=tax, net_lines=tuple(net_lines))


def credit_split(*, amount: Decimal, rate: Decimal, currency: str, invoice_gross: Decimal, invoice_tax: Decimal,
                 credited_gross: Decimal, credited_tax: Decimal) -> tuple[Decimal, Decimal]:
    """A credit of ``amount`` (VAT inside) against an invoice: its amount excluding VAT and its VAT. The credit
    that closes the invoice takes exactly the VAT still open, so the credits reverse the invoice's VAT to the
    cent; no credit takes more VAT than is open."""
    amount = _round(Decimal(amount), currency)
    open_tax = invoice_tax - credited_tax
    if credited_gross + amount == invoice_gross:
        tax = open_tax
    else:
        tax = min(tax_inside(amount, rate, currency), open_tax)
    return amount - tax, tax
