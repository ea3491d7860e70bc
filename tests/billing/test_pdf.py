"""Invoice and credit-note PDFs, read back with pypdf."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import transaction
from pypdf import PdfReader

from anchorgpu.billing import pdf
from anchorgpu.billing.services import credit_note_issue


from .conftest import paid_order

pytestmark = pytest.mark.django_db


def read(content: bytes) -> tuple[str, PdfReader]:
    assert content.startswith(b"%PDF-")
    reader = PdfReader(io.BytesIO(content))
    return "\n".join(page.extract_text() for page in reader.pages), reader


def test_invoice_shows_number_customer_lines_total_and_settlement(paid):
    invoice = paid.invoice
    text, reader = read(pdf.invoice_pdf(invoice))
    assert invoice.number in text
    assert paid.reference in text
    for expected in ("João Conceição", "Société Générale Ltda", "Rua das Flores 12", "1200-195 Lisboa",
                     "Portugal", "PT123456789", "alice@example.com", "PLACEHOLDER ADDRESS"):
        assert expected in text
    lines = list(invoice.lines.all())
    assert len(lines) == 2  # the cards and the dedicated IPv4 option
    for line in lines:
        assert line.description in text
    assert f"{invoice.total:,.2f} {invoice.currency}" in text
    coins = format(Decimal(invoice.crypto_amount).scaleb(-invoice.decimals), f".{invoice.decimals}f")  # 8: 1 sat
    assert Decimal(coins) > 0
    assert f"{coins} BTC" in text
    assert "Bitcoin" in text
    assert f"1 BTC = {invoice.rate:,.2f} {invoice.currency}" in text
    assert invoice.rate_source in text
    assert f"{invoice.rate_at:%Y-%m-%d %H:%M} UTC" in text

    meta = reader.metadata
    assert invoice.number in meta.title
    assert meta.creation_date == invoice.issued_at.replace(microsecond=0)


def test_the_same_invoice_renders_to_the_same_bytes(paid):
    assert pdf.invoice_pdf(paid.invoice) == pdf.invoice_pdf(paid.invoice)


def test_labels_follow_the_order_language(alice):
    order = paid_order(alice, language="pt", country="DE")
    text, _reader = read(pdf.invoice_pdf(order.invoice))
    assert "Alemanha" in text  # the country's name in Portuguese
    assert "Germany" not in text


def test_credit_note_names_its_invoice_amount_and_reason(paid):
    invoice = paid.invoice
    with transaction.atomic():
        note = credit_note_issue(invoice=invoice, amount=Decimal("3.00"), reason="internal: IPv4 pool ran dry",
                                 customer_reason="other", customer_reason_text="Endereço IPv4 não entregue",
                                 actor="operator", now=datetime(2031, 5, 4, 12, 0, tzinfo=UTC))
    text, reader = read(pdf.credit_note_pdf(note))
    for expected in (note.number, invoice.number, paid.reference, "João Conceição", "3.00 USD",
                     f"{invoice.total:,.2f} USD", "Endereço IPv4 não entregue"):
        assert expected in text
    assert "IPv4 pool" not in text  # the operator's internal note is never printed
    assert note.number in reader.metadata.title
    assert reader.metadata.creation_date == note.issued_at


def test_korean_name_with_a_korean_font(alice):
    if pdf._font_files()[0] is None or not any(path.is_file() for path, _index in pdf._KOREAN):
        pytest.skip("no Korean font installed (e.g. Debian's fonts-nanum)")
    order = paid_order(alice, name="김민준", language="ko")
    text, _reader = read(pdf.invoice_pdf(order.invoice))
    assert "김민준" in text


def test_without_a_unicode_font_latin1_still_prints_and_the_rest_is_replaced(alice, monkeypatch):
    monkeypatch.setattr(pdf, "_font_files", lambda: (None, None))
    order = paid_order(alice, name="João Conceição 김민준", company="Łódź Ősz")
    text, _reader = read(pdf.invoice_pdf(order.invoice))
    assert "João Conceição ???" in text
    assert "?ódz Osz" in text  # not in Latin-1: "ź" and "Ő" lose their accents, "Ł" has none to lose
