"""Invoices and credit notes as a VAT-registered seller sends them, in every language and for four customers:
an EU business in another member state (reverse charge), an EU private customer (their country's rate), a
business and a private customer outside the EU (no EU VAT).

Each PDF is read back (pypdf) and its tax lines, rate, mention and totals are checked against amounts computed
here from the order's total; each is kept under test-artifacts/invoices/ with a PNG of its pages (pdftoppm, at
60 dpi, where poppler-utils is installed) for a person to look at.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import translation
from django.utils.translation import gettext
from pypdf import PdfReader

from anchorgpu.billing import pdf
from anchorgpu.billing.models import CreditNote, Invoice, VatRate
from anchorgpu.billing.services import credit_note_issue
from anchorgpu.formats import display
from anchorgpu.orders.models import Order
from tests import shop

pytestmark = pytest.mark.django_db

ARTIFACTS = Path(os.environ.get("ANCHORGPU_TEST_ARTIFACTS", "test-artifacts")) / "invoices"
LANGUAGES = ("en", "pt", "fr", "ko")
SELLER = {"ANCHORGPU_COMPANY_NAME": "AnchorGPU, Lda.",
          "ANCHORGPU_COMPANY_ADDRESS": "Avenida da Liberdade 110|1250-146 Lisboa|Portugal",
          "ANCHORGPU_COMPANY_COUNTRY": "PT", "ANCHORGPU_COMPANY_VAT_ID": "PT501964843",
          "ANCHORGPU_COMPANY_REGISTRATION": "Conservatória do Registo Comercial de Lisboa, NIPC 501964843",
          "ANCHORGPU_COMPANY_CONTACT": "billing@anchorgpu.example"}
RATES = {"PT": Decimal("23"), "DE": Decimal("19"), "FR": Decimal("20")}
CUSTOMERS = {
    "eu-business": {"name": "Claire Martin", "company": "Exemple Calcul SAS", "country": "FR", "business": True,
                    "vat_id": "FR40303265045", "billing_address": "12 rue de la Paix\n75002 Paris"},
    "eu-private": {"name": "Jonas Weber", "country": "DE", "billing_address": "Hauptstraße 5\n10115 Berlin"},
    "non-eu-business": {"name": "Dana Smith", "company": "Example Compute Inc.", "country": "US", "business": True,
                        "billing_address": "1 Market St\nSan Francisco, CA 94105"},
    "non-eu-private": {"name": "Kim Minjun", "country": "KR", "billing_address": "Seoul"},
}
# What each customer's invoice states: (rate, the treatment's mention as a msgid, or None for VAT charged).
EXPECTED = {
    "eu-business": (Decimal(0), "Reverse charge — VAT to be accounted for by the recipient (Art. 196 Council "
                                "Directive 2006/112/EC)."),
    "eu-private": (Decimal(19), None),
    "non-eu-business": (Decimal(0), "VAT not applicable: the place of supply is outside the EU."),
    "non-eu-private": (Decimal(0), "VAT not applicable: the place of supply is outside the EU."),
}
CREDIT_NOTE_AT = datetime(2031, 5, 4, 12, 0, tzinfo=UTC)


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def flat(text: str) -> str:
    """Every run of spaces, no-break spaces and line breaks as one space (wrapping differs per language)."""
    return re.sub(r"[\s\u00a0\u202f]+", " ", text).strip()


def read(content: bytes) -> str:
    assert content.startswith(b"%PDF-")
    return flat("\n".join(page.extract_text() for page in PdfReader(io.BytesIO(content)).pages))


def keep(content: bytes, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / f"{name}.pdf"
    target.write_bytes(content)
    if shutil.which("pdftoppm"):
        subprocess.run(["pdftoppm", "-png", "-r", "60", str(target), str(ARTIFACTS / name)], check=True, timeout=60)
        assert list(ARTIFACTS.glob(f"{name}-*.png")), name


@pytest.fixture
def seller(settings):
    for name, value in SELLER.items():
        setattr(settings, name, value)
    for country, rate in RATES.items():
        VatRate.objects.create(country=country, rate=rate, note="test rate")
    shop.load_shop()
    return shop.customer()


def paid_order(user, kind: str, language: str) -> Order:
    order = shop.place(user, options=("dedicated-ipv4",), language=language, **CUSTOMERS[kind])
    shop.pay(order, txid=f"{order.pk:064x}")
    return Order.objects.select_related("invoice").get(pk=order.pk)


def korean_font() -> bool:
    return pdf._font_files()[0] is not None and any(path.is_file() for path, _index in pdf._KOREAN)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("kind", list(CUSTOMERS))
def test_invoice_and_credit_note_state_the_vat(seller, kind, language):
    if language == "ko" and not korean_font():
        pytest.skip("no Korean font installed (e.g. Debian's fonts-nanum)")
    order = paid_order(seller, kind, language)
    invoice: Invoice = order.invoice
    rate, mention = EXPECTED[kind]

    # The amounts, computed here from the total paid: the VAT is inside it, rounded half up once.
    total = order.fiat_total
    vat = cents(total * rate / (100 + rate))
    assert (invoice.total, invoice.tax_rate, invoice.tax_amount, invoice.net_total) == (total, rate, vat, total - vat)
    lines = list(invoice.lines.all())
    assert sum(line.net_amount for line in lines) == total - vat
    assert all((line.period_start, line.period_end) == (order.starts_at, order.ends_at) for line in lines)

    content = pdf.invoice_pdf(invoice)
    keep(content, f"{language}-{kind}-invoice")
    text = read(content)
    with translation.override(language):
        money = {amount: flat(display.money(amount, invoice.currency)) for amount in (total, vat, total - vat)}
        expected = [invoice.number, order.reference, SELLER["ANCHORGPU_COMPANY_NAME"], "PT501964843",
                    "1250-146 Lisboa", SELLER["ANCHORGPU_COMPANY_CONTACT"], CUSTOMERS[kind]["name"],
                    flat(gettext("Total excl. VAT: %(amount)s") % {"amount": money[total - vat]}),
                    flat(gettext("Total: %(total)s") % {"total": money[total]}),
                    flat(display.moment_value(order.starts_at)), flat(display.moment_value(order.ends_at))]
        if mention is None:
            label = gettext("VAT %(rate)s (%(country)s)") % {"rate": display.percent(rate),
                                                              "country": invoice.tax_country.name}
            expected.append(flat(gettext("%(vat)s: %(amount)s") % {"vat": label, "amount": money[vat]}))
        else:
            label = gettext("VAT %(rate)s") % {"rate": display.percent(0)}
            expected += [flat(gettext("%(vat)s: %(amount)s") % {"vat": label, "amount": money[vat]}),
                         flat(gettext(mention))]
        for line in lines:
            expected.append(flat(display.money(line.net_amount, invoice.currency)))
    for piece in expected:
        assert piece in text, (piece, text)
    if mention and "196" in mention:
        assert "196" in text and "2006/112" in text  # the article and the directive, in every language
    if CUSTOMERS[kind].get("vat_id"):
        assert CUSTOMERS[kind]["vat_id"] in text

    # A credit of a third of the invoice, for a fault: its VAT reversed in proportion, the customer's reason
    # printed and the operator's note not.
    amount = cents(total / 3)
    with transaction.atomic():
        note: CreditNote = credit_note_issue(invoice=invoice, amount=amount, actor="operator", now=CREDIT_NOTE_AT,
                                             reason="internal: host h-17 power supply, ticket 4411",
                                             customer_reason="fault", customer_reason_text="")
    note_vat = cents(amount * rate / (100 + rate))
    assert (note.amount, note.tax_amount, note.net_amount) == (amount, note_vat, amount - note_vat)
    content = pdf.credit_note_pdf(note)
    keep(content, f"{language}-{kind}-credit-note")
    text = read(content)
    assert "h-17" not in text and "4411" not in text
    with translation.override(language):
        expected = [note.number, invoice.number, flat(gettext("Credit for a fault during the term")),
                    flat(gettext("Total excl. VAT: %(amount)s")
                         % {"amount": display.money(amount - note_vat, invoice.currency)}),
                    flat(gettext("Amount credited: %(total)s") % {"total": display.money(amount, invoice.currency)})]
        if mention is not None:
            expected.append(flat(gettext(mention)))
    for piece in expected:
        assert piece in text, (piece, text)


def test_the_labels_are_translated(seller):
    """The checks above compare with the catalogues; here, that the catalogues are really in use."""
    order = paid_order(seller, "eu-business", "fr")
    text = read(pdf.invoice_pdf(order.invoice))
    assert "Autoliquidation" in text and "Reverse charge" not in text
    assert "Total HT" in text


def test_an_issued_invoice_does_not_change_when_rules_and_settings_do(seller, settings):
    order = paid_order(seller, "eu-private", "en")
    before = pdf.invoice_pdf(order.invoice)
    VatRate.objects.filter(country="DE").update(rate=Decimal("21"))
    settings.ANCHORGPU_COMPANY_ADDRESS = "Rua Nova 1|4000-001 Porto|Portugal"
    settings.ANCHORGPU_COMPANY_VAT_ID = "PT980000000"
    invoice = Invoice.objects.get(pk=order.invoice.pk)
    assert invoice.tax_rate == Decimal(19)
    after = pdf.invoice_pdf(invoice)
    assert after == before
    assert "Porto" not in read(after)
    later = paid_order(seller, "eu-private", "en").invoice  # a new invoice follows the new rules
    assert later.tax_rate == Decimal(21) and later.seller["vat_id"] == "PT980000000"
