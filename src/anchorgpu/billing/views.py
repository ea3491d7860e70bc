"""Invoice and credit-note PDFs for the customer who owns the order (and for staff)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.utils.cache import patch_cache_control
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_safe

from anchorgpu.orders.models import Order

from . import pdf
from .models import CreditNote, Invoice


def pdf_response(content: bytes, number: str) -> HttpResponse:
    response = HttpResponse(content, content_type="application/pdf")
    response["Content-Disposition"] = content_disposition_header(True, f"{number}.pdf")
    patch_cache_control(response, private=True, no_store=True)  # a customer's address and payment
    return response


def _order(request, reference: str) -> Order:
    # Operators who may see invoices in the admin may download any; a customer only their own.
    may_see_all = request.user.is_staff and request.user.has_perm("billing.view_invoice")
    orders = Order.objects.all() if may_see_all else Order.objects.filter(user=request.user)
    order = orders.filter(reference=reference).first()
    if order is None:
        raise Http404("no such order")
    return order


@login_required
@require_safe
def invoice_pdf(request, reference: str):
    invoice = Invoice.objects.select_related("order").filter(order=_order(request, reference)).first()
    if invoice is None:
        raise Http404("this order has no invoice yet")
    return pdf_response(pdf.invoice_pdf(invoice), invoice.number)


@login_required
@require_safe
def credit_note_pdf(request, reference: str, number: str):
    note = (CreditNote.objects.select_related("invoice__order", "refund")
            .filter(invoice__order=_order(request, reference), number=number).first())
    if note is None or not (note.shown_to_customer or request.user.is_staff):
        # A refund of a watched asset is the customer's to see once the chain shows it (payments.refunds).
        raise Http404("no such credit note for this order")
    return pdf_response(pdf.credit_note_pdf(note), note.number)
