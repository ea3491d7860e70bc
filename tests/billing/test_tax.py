"""The VAT rules as the domain core applies them: no database, no Django."""

from __future__ import annotations

from decimal import Decimal

import pytest

from anchorgpu.billing import tax
from anchorgpu.billing.tax import Treatment

RATES = {"PT": Decimal("23"), "FR": Decimal("20"), "DE": Decimal("19"), "LU": Decimal("17")}


def decide(customer, *, business=False, vat_id="", seller="PT", registered=True, rates=RATES):
    return tax.decide(seller_country=seller, seller_registered=registered, customer_country=customer,
                      business=business, vat_id=vat_id, rates=rates)


def test_each_treatment():
    assert decide("FR", business=True, vat_id="FR40303265045") == tax.Decision(Treatment.REVERSE_CHARGE,
                                                                              Decimal(0), "FR")
    assert decide("FR") == tax.Decision(Treatment.STANDARD, Decimal(20), "FR")  # private: their country's rate
    assert decide("FR", business=True) == tax.Decision(Treatment.STANDARD, Decimal(20), "FR")  # no VAT id
    assert decide("PT", business=True, vat_id="PT501964843") == tax.Decision(Treatment.STANDARD, Decimal(23), "PT")
    assert decide("US", business=True, vat_id="US123456") == tax.Decision(Treatment.OUTSIDE_EU, Decimal(0), "US")
    assert decide("KR") == tax.Decision(Treatment.OUTSIDE_EU, Decimal(0), "KR")
    assert decide("FR", registered=False).treatment is Treatment.NOT_REGISTERED


def test_a_missing_rate_is_refused_not_guessed():
    with pytest.raises(tax.MissingRate, match="IT"):
        decide("IT")
    with pytest.raises(tax.MissingRate, match="PT"):
        decide("PT", rates={})
    assert decide("IT", business=True, vat_id="IT00743110157").treatment is Treatment.REVERSE_CHARGE  # no rate needed
    with pytest.raises(tax.TaxError):
        decide("FR", rates={"FR": Decimal(100)})


def test_a_decision_round_trips_as_data():
    decision = decide("DE")
    assert tax.Decision.from_data(decision.as_data()) == decision


@pytest.mark.parametrize(("vat_id", "country"), [
    ("PT501964843", "PT"), ("FR40303265045", "FR"), ("DE129273398", "DE"), ("EL094259216", "GR"),
    ("ATU13585627", "AT"), ("NL004495445B01", "NL"), ("ESA28015865", "ES"), ("IE6388047V", "IE"),
    ("SE556042722001", "SE"), ("GB123456789", "GB"), ("CHE123456789", "CH"),
])
def test_good_vat_ids(vat_id, country):
    assert tax.vat_id_problem(vat_id, country) is None


@pytest.mark.parametrize(("vat_id", "country", "says"), [
    ("123", "PT", "two-letter"),
    ("FR40303265045", "PT", "PT"),  # another country's prefix
    ("GR094259216", "GR", "EL"),  # Greece's VAT ids start with EL
    ("PT12345", "PT", "shape"),
    ("DE12927339", "DE", "shape"),
])
def test_bad_vat_ids(vat_id, country, says):
    problem = tax.vat_id_problem(vat_id, country)
    assert problem is not None and says in str(problem)


def test_customer_problems():
    assert tax.customer_problem(country="FR", business=False, company="", vat_id="FR40303265045")[0] == "vat_id"
    assert tax.customer_problem(country="FR", business=True, company=" ", vat_id="")[0] == "company"
    assert tax.customer_problem(country="FR", business=True, company="Acme", vat_id="FR40303265045") is None
    assert tax.normalise_vat_id(" fr 40-303.265 045 ") == "FR40303265045"


def test_split_takes_the_vat_out_of_the_total_half_up_and_lines_add_up():
    # 100.00 at 23 %: 18.699… -> 18.70 VAT, 81.30 without
    s = tax.split(total=Decimal("100.00"), lines=[Decimal("60"), Decimal("40")], rate=Decimal(23), currency="EUR")
    assert (s.gross, s.tax, s.net) == (Decimal("100.00"), Decimal("18.70"), Decimal("81.30"))
    assert sum(s.net_lines) == s.net and s.net_lines == (Decimal("48.78"), Decimal("32.52"))
    # three equal lines whose rounded parts do not add up: the largest takes the cent
    s = tax.split(total=Decimal("10.00"), lines=[Decimal("3.3333333")] * 2 + [Decimal("3.3333334")], rate=Decimal(20),
                  currency="EUR")
    assert s.tax == Decimal("1.67") and s.net == Decimal("8.33") and sum(s.net_lines) == Decimal("8.33")
    # a discount line (negative) and a rate of 0
    s = tax.split(total=Decimal("90.00"), lines=[Decimal("100"), Decimal("-10")], rate=Decimal(0), currency="USD")
    assert s.tax == 0 and s.net_lines == (Decimal("100.00"), Decimal("-10.00"))
    # a currency without cents
    s = tax.split(total=Decimal("12345"), lines=[Decimal("12345")], rate=Decimal(10), currency="KRW")
    assert s.tax == Decimal("1122") and s.net == Decimal("11223")


def test_half_up_at_exactly_half_a_cent():
    # 0.21 at 5 %: 0.01 exactly (0.21 × 5 / 105 = 0.01); 10.50 at 5 %: 0.5 -> 0.50; 0.105 VAT rounds up to 0.11
    assert tax.tax_inside(Decimal("2.205"), Decimal(5), "EUR") == Decimal("0.11")


def test_credits_reverse_the_vat_and_the_last_one_closes_it_to_the_cent():
    invoice = tax.split(total=Decimal("100.00"), lines=[Decimal(100)], rate=Decimal(23), currency="EUR")
    credited_gross, credited_tax, parts = Decimal(0), Decimal(0), []
    for amount in (Decimal("33.33"), Decimal("33.33"), Decimal("33.34")):
        net, vat = tax.credit_split(amount=amount, rate=Decimal(23), currency="EUR", invoice_gross=invoice.gross,
                                    invoice_tax=invoice.tax, credited_gross=credited_gross,
                                    credited_tax=credited_tax)
        assert net + vat == amount
        parts.append(vat)
        credited_gross += amount
        credited_tax += vat
    assert parts == [Decimal("6.23"), Decimal("6.23"), Decimal("6.24")] and credited_tax == invoice.tax
    # the whole amount at once reverses exactly the invoice's figures
    assert tax.credit_split(amount=Decimal(100), rate=Decimal(23), currency="EUR", invoice_gross=invoice.gross,
                            invoice_tax=invoice.tax, credited_gross=Decimal(0),
                            credited_tax=Decimal(0)) == (invoice.net, invoice.tax)
