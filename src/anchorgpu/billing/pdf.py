"""Invoices and credit notes as PDF bytes, drawn with fpdf2.

Text is set in DejaVu Sans (a copy in ``billing/fonts/`` if one is placed
there, else the system's: Debian package fonts-dejavu-core); a Korean font is
added as a fallback when one is installed. With no such font the built-in
Helvetica is used: it covers Latin-1 only, so accented Latin letters still
print and anything else is simplified or shown as "?" -- never an error.

Labels are translated into the order's language. The PDF's creation date is
the document's issue date, so a document renders to the same bytes each time.

The seller is the one stored on the document when it was issued (``Invoice.seller``; the settings' for a
document issued before it was stored). Where the invoice states VAT, the lines show their amounts excluding
VAT and the term they cover, then the total excluding VAT, the VAT at its rate and the total, and the mention
its treatment requires (reverse charge, outside the EU, seller not registered). A credit note shows the reason
meant for the customer, never the operator's internal note, and the VAT it reverses.
"""

from __future__ import annotations

import logging
import unicodedata
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _
from fpdf import FPDF
from fpdf.enums import XPos, YPos

from anchorgpu.formats import display
from anchorgpu.orders.lines import invoice_line_label

from . import tax, words
from .models import CreditNote, Invoice
from .seller import Seller, address_lines

COMPANY = "AnchorGPU"
_HERE = Path(__file__).resolve().parent
_DEJAVU_DIRS = (_HERE / "fonts", Path("/usr/share/fonts/truetype/dejavu"), Path("/usr/share/fonts/dejavu"),
                Path("/usr/share/fonts/TTF"))
# (file, index in a collection): fonts with Hangul, tried in order.
_KOREAN = ((Path("/usr/share/fonts/truetype/nanum/NanumGothic.ttf"), 0),
           (Path("/usr/share/fonts/truetype/unfonts-core/UnDotum.ttf"), 0),
           (Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"), 1))
_LATIN1 = frozenset(chr(c) for c in (*range(0x20, 0x7F), *range(0xA0, 0x100)))
# fpdf2 subsets each embedded font with fontTools, which reports every table it
# keeps (INFO) or drops (WARNING: hinting tables of some Korean fonts).
logging.getLogger("fontTools.subset").setLevel(logging.ERROR)


@lru_cache(maxsize=1)
def _font_files() -> tuple[Path | None, Path | None]:
    """DejaVu Sans regular and bold, where found."""
    for folder in _DEJAVU_DIRS:
        regular = folder / "DejaVuSans.ttf"
        if regular.is_file():
            bold = folder / "DejaVuSans-Bold.ttf"
            return regular, bold if bold.is_file() else None
    return None, None


class _Page(FPDF):
    """An A4 page with our fonts, the document's metadata and a footer."""

    def __init__(self, *, title: str, number: str, issued_at: datetime, sample: str):
        super().__init__(orientation="portrait", unit="mm", format="A4")
        self.number = number
        self.set_margins(18, 16, 18)
        self.set_auto_page_break(True, margin=18)
        self.family, self.covered = self._fonts(sample)
        self.set_title(f"{title} {number}")
        self.set_author(COMPANY)
        self.set_subject(title)
        self.set_creator(COMPANY)
        self.set_lang(translation.get_language() or "en")
        self.set_creation_date(issued_at)
        self.add_page()

    def _fonts(self, sample: str) -> tuple[str, frozenset[str]]:
        """Our font family and the characters it can show. The Korean fallback is
        loaded (slow: a large font) only for Korean or text DejaVu cannot show."""
        regular, bold = _font_files()
        if regular is None:
            return "helvetica", _LATIN1
        self.add_font("dejavu", "", regular)
        self.add_font("dejavu", "B", bold or regular)
        covered = set(map(chr, self.fonts["dejavu"].cmap))
        if not (translation.get_language() or "").startswith("ko") and set(sample) <= covered | {"\n"}:
            return "dejavu", frozenset(covered)
        for path, index in _KOREAN:
            if path.is_file():
                try:
                    self.add_font("korean", "", path, collection_font_number=index)
                except Exception:  # an unreadable optional font: go without it
                    continue
                self.set_fallback_fonts(["korean"], exact_match=False)
                covered |= set(map(chr, self.fonts["korean"].cmap))
                break
        return "dejavu", frozenset(covered)

    def clean(self, text: str) -> str:
        """``text`` with what the font cannot show simplified ("ő" -> "o") or replaced by "?"."""
        out = []
        for ch in str(text):
            if ch in self.covered or ch == "\n":
                out.append(ch)
            elif unicodedata.category(ch).startswith(("C", "Z")):
                out.append(" ")
            else:
                bare = "".join(c for c in unicodedata.normalize("NFKD", ch)
                               if c in self.covered and not unicodedata.combining(c))
                out.append(bare or "?")
        return "".join(out)

    def font(self, size: float, bold: bool = False) -> None:
        self.set_font(self.family, "B" if bold else "", size)

    def text_line(self, text: str = "", *, size: float = 10, bold: bool = False, h: float = 5.2, align: str = "L"):
        self.font(size, bold)
        self.multi_cell(0, h, self.clean(text), align=align, new_x=XPos.LMARGIN, new_y=YPos.NEXT)

    def pair(self, label: str, value: str) -> None:
        self.font(10, bold=True)
        self.cell(54, 5.6, self.clean(label))
        self.font(10)
        self.multi_cell(0, 5.6, self.clean(value), align="L", new_x=XPos.LMARGIN, new_y=YPos.NEXT)

    def heading(self, text: str) -> None:
        self.ln(4)
        self.text_line(text, size=11, bold=True, h=6)
        self.set_draw_color(160)
        self.line_to_margin()
        self.ln(1.5)

    def line_to_margin(self) -> None:
        self.line(self.l_margin, self.get_y(), self.w - self.r_margin, self.get_y())

    def footer(self) -> None:
        self.set_y(-13)
        self.font(8)
        self.set_text_color(110)
        self.cell(0, 5, self.clean(f"{COMPANY} · {self.number} · {self.page_no()}/{{nb}}"), align="C")
        self.set_text_color(0)


# --- formatting -------------------------------------------------------------


# One way for the shop's pages, emails and these documents: anchorgpu.formats.display. Amounts (line
# amounts, totals, credits) at the currency's cents with its code; unit prices and rates with up to four
# decimals where they have them; crypto exact at the asset's quoted precision; times in UTC, saying so.
_money = display.money
_unit_price = display.unit_price
_day = display.day
_moment = display.moment


def _coins(units: int, invoice: Invoice) -> str:
    quote = getattr(invoice.order, "quote", None)
    places = quote.asset.quoted_places if quote is not None and quote.asset.decimals == invoice.decimals else None
    return display.crypto(units, invoice.decimals, places, invoice.asset_symbol)


def _seller(invoice: Invoice) -> Seller:
    if invoice.seller:
        return Seller.from_data(invoice.seller)
    # Issued before documents kept their seller: the settings' name and address, as such invoices always showed.
    return Seller(name=getattr(settings, "ANCHORGPU_COMPANY_NAME", COMPANY),
                  address=address_lines(getattr(settings, "ANCHORGPU_COMPANY_ADDRESS", "")), country="", vat_id="",
                  registration="", contact="")


def _seller_lines(seller: Seller) -> list[str]:
    lines = list(seller.address)
    if seller.vat_id:
        lines.append(_("VAT id: %(vat)s") % {"vat": seller.vat_id})
    if seller.registration:
        lines.append(seller.registration)
    if seller.contact:
        lines.append(seller.contact)
    return lines


def _top(pdf: _Page, title: str, seller: Seller) -> None:
    lines = _seller_lines(seller)
    pdf.text_line(seller.name or COMPANY, size=16, bold=True, h=8)
    for text in lines:
        pdf.text_line(text, size=9, h=4.4)
    pdf.set_y(16)
    pdf.text_line(title.upper(), size=18, bold=True, h=8, align="R")
    pdf.text_line(pdf.number, size=11, h=6, align="R")
    pdf.set_y(max(pdf.get_y(), 16 + 8 + 4.4 * len(lines)) + 6)


def _mention(invoice: Invoice) -> str:
    return words.mention(invoice.tax_treatment)


def _vat_label(invoice: Invoice) -> str:
    return words.vat_label(invoice.tax_treatment, invoice.tax_rate, str(invoice.tax_country))


def _term(item) -> str:
    if item.period_start is None or item.period_end is None:
        return ""
    return _("Term: %(start)s to %(end)s (UTC)") % {"start": display.moment_value(item.period_start),
                                                   "end": display.moment_value(item.period_end)}


def _customer_text(invoice: Invoice) -> str:
    seller = _seller(invoice)
    return "".join((invoice.name, invoice.company, invoice.billing_address, invoice.country.name,
                    _(invoice.rate_source), seller.name, *_seller_lines(seller), _mention(invoice)))


def _billed_to(pdf: _Page, invoice: Invoice) -> None:
    pdf.heading(_("Billed to"))
    pdf.text_line(invoice.name, bold=True)
    for text in (invoice.company, *invoice.billing_address.splitlines(), invoice.country.name):
        if text.strip():
            pdf.text_line(text.strip())
    if invoice.vat_id:
        pdf.text_line(_("VAT id: %(vat)s") % {"vat": invoice.vat_id})
    pdf.text_line(invoice.email)


# --- the documents ----------------------------------------------------------


def _draw_invoice(invoice: Invoice) -> _Page:
    title = _("Invoice")
    stated = bool(invoice.tax_treatment)  # an invoice issued before VAT was stated shows its total only
    items = [(item, invoice_line_label(item, invoice.order.lines), _term(item)) for item in invoice.lines.all()]
    pdf = _Page(title=title, number=invoice.number, issued_at=invoice.issued_at,
                sample=_customer_text(invoice) + "".join(text + term for _item, text, term in items))
    _top(pdf, title, _seller(invoice))
    pdf.pair(_("Invoice number"), invoice.number)
    pdf.pair(_("Issue date"), _day(invoice.issued_at))
    pdf.pair(_("Order reference"), invoice.order.reference)
    _billed_to(pdf, invoice)

    pdf.heading(_("Items"))
    pdf.font(9.5)
    heads = ((_("Description"), _("Quantity"), _("Unit price excl. VAT"), _("Amount excl. VAT")) if stated else
             (_("Description"), _("Quantity"), _("Unit price"), _("Amount")))
    with pdf.table(col_widths=(80, 24, 35, 35), text_align=("LEFT", "RIGHT", "RIGHT", "RIGHT"),
                   borders_layout="HORIZONTAL_LINES", line_height=5.4, padding=1.2) as table:
        head = table.row()
        for text in heads:
            head.cell(pdf.clean(text))
        for item, text, term in items:
            row = table.row()
            row.cell(pdf.clean(f"{text}\n{term}" if term else text))
            row.cell(str(item.quantity))
            if stated and item.net_amount is not None:
                unit = Decimal(item.unit_price) * tax.HUNDRED / (tax.HUNDRED + invoice.tax_rate)
                row.cell(pdf.clean(display.line_unit_price(item.kind, unit)))
                row.cell(pdf.clean(_money(item.net_amount, invoice.currency)))
            else:
                row.cell(pdf.clean(display.line_unit_price(item.kind, item.unit_price)))
                row.cell(pdf.clean(_money(item.amount, invoice.currency)))
    pdf.ln(2)
    if stated:
        _totals(pdf, invoice, net=invoice.net_total, vat=invoice.tax_amount, total=invoice.total)
    else:
        pdf.text_line(_("Total: %(total)s") % {"total": _money(invoice.total, invoice.currency)},
                      size=12, bold=True, h=7, align="R")

    pdf.heading(_("Settled by"))
    pdf.pair(_("Amount received"), _coins(invoice.crypto_amount, invoice))
    pdf.pair(_("Network"), _(invoice.network_name))  # operator data, in the catalogs where known
    pdf.pair(_("Rate"), f"1 {invoice.asset_symbol} = {_unit_price(invoice.rate, invoice.currency)}")
    pdf.pair(_("Rate source"), _("%(source)s, observed %(time)s") % {"source": _(invoice.rate_source),
                                                                    "time": _moment(invoice.rate_at)})
    return pdf


def _totals(pdf: _Page, invoice: Invoice, *, net, vat, total, total_label: str = "") -> None:
    """Total excluding VAT, the VAT at its rate, the total; then the treatment's mention."""
    pdf.text_line(_("Total excl. VAT: %(amount)s") % {"amount": _money(net, invoice.currency)}, align="R")
    pdf.text_line(_("%(vat)s: %(amount)s") % {"vat": _vat_label(invoice), "amount": _money(vat, invoice.currency)},
                  align="R")
    pdf.text_line((total_label or _("Total: %(total)s")) % {"total": _money(total, invoice.currency)},
                  size=12, bold=True, h=7, align="R")
    mention = _mention(invoice)
    if mention:
        pdf.ln(1)
        pdf.text_line(mention, size=9.5, h=5)  # regular: the Korean fallback font has no bold


def _draw_credit_note(note: CreditNote) -> _Page:
    invoice = note.invoice
    title = _("Credit note")
    pdf = _Page(title=title, number=note.number, issued_at=note.issued_at,
                sample=_customer_text(invoice) + note.reason_for_customer())
    _top(pdf, title, _seller(invoice))
    pdf.pair(_("Credit note number"), note.number)
    pdf.pair(_("Issue date"), _day(note.issued_at))
    pdf.pair(_("Credits invoice"), _("%(number)s of %(date)s") % {"number": invoice.number,
                                                                  "date": _day(invoice.issued_at)})
    pdf.pair(_("Order reference"), invoice.order.reference)
    _billed_to(pdf, invoice)

    pdf.heading(_("Credit"))
    pdf.pair(_("Invoice total"), _money(invoice.total, invoice.currency))
    reason = note.reason_for_customer()
    if reason:
        pdf.pair(_("Reason"), reason)
    if invoice.tax_treatment and note.net_amount is not None:
        pdf.ln(2)
        _totals(pdf, invoice, net=note.net_amount, vat=note.tax_amount, total=note.amount,
                total_label=_("Amount credited: %(total)s"))
    else:
        pdf.pair(_("Amount credited"), _money(note.amount, note.currency))
    refund = note.refund
    if refund is not None:
        pdf.heading(_("Refund sent"))
        # In the base units of the network it was sent on (the same coin; its decimals may differ the invoice's).
        sent_in = refund.asset
        pdf.pair(_("Amount"), display.crypto(refund.amount, sent_in.decimals, sent_in.quoted_places, sent_in.symbol))
        pdf.pair(_("Network"), _(sent_in.network_name))
        pdf.pair(_("To address"), refund.address)
        pdf.pair(_("Transaction"), refund.txid)
    return pdf


def _render(draw, document, language: str) -> bytes:
    with translation.override(language or settings.LANGUAGE_CODE):
        return bytes(draw(document).output())


def invoice_pdf(invoice: Invoice) -> bytes:
    return _render(_draw_invoice, invoice, invoice.order.language)


def credit_note_pdf(note: CreditNote) -> bytes:
    return _render(_draw_credit_note, note, note.invoice.order.language)
