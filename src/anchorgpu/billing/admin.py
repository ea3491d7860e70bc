"""Invoices and credit notes for the operators: read-only (they are issued by
the services and never edited), each with its PDF behind an admin-only URL."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from anchorgpu.admin_base import ReadOnlyModelAdmin
from anchorgpu.audit.services import audit_record
from anchorgpu.payments.uri import whole_units

from . import pdf
from .models import CreditNote, Invoice, InvoiceLine, VatRate
from .views import pdf_response


def _order_link(site_name: str, order) -> str:
    opts = order._meta
    url = reverse(f"{site_name}:{opts.app_label}_{opts.model_name}_change", args=[order.pk])
    return format_html('<a href="{}">{}</a>', url, order.reference)


class _PdfMixin:
    """An admin-only ``<pk>/pdf/`` URL that downloads the document, and a link to it."""

    render = None  # staticmethod: the function of ``pdf`` that draws this model's document

    def _pdf_url_name(self) -> str:
        return f"{self.opts.app_label}_{self.opts.model_name}_pdf"

    def get_urls(self):
        return [path("<path:object_id>/pdf/", self.admin_site.admin_view(self.pdf_view), name=self._pdf_url_name()),
                *super().get_urls()]

    def pdf_view(self, request, object_id):
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404("no such document")
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        return pdf_response(self.render(obj), obj.number)

    @admin.display(description=_("PDF"))
    def pdf_link(self, obj):
        url = reverse(f"{self.admin_site.name}:{self._pdf_url_name()}", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, _("Download %(number)s.pdf") % {"number": obj.number})


@admin.register(VatRate)
class VatRateAdmin(admin.ModelAdmin):
    """The operator's VAT rates (``billing.tax`` applies them). Every change is in the audit log; no invoice
    already issued changes with it."""

    list_display = ("country", "rate", "note", "updated_at")
    search_fields = ("country", "note")
    fields = ("country", "rate", "note")

    def save_model(self, request, obj, form, change):
        before = VatRate.objects.filter(pk=obj.pk).values("country", "rate").first() if change else None
        super().save_model(request, obj, form, change)
        if form.changed_data:
            audit_record(actor=request.user.get_username(), action="vat_rate_change" if change else "vat_rate_add",
                         obj=obj, data={"country": str(obj.country), "rate": str(obj.rate),
                                        "before": {k: str(v) for k, v in (before or {}).items()},
                                        "changed": form.changed_data})

    def delete_model(self, request, obj):
        audit_record(actor=request.user.get_username(), action="vat_rate_delete", obj=obj,
                     data={"country": str(obj.country), "rate": str(obj.rate)})
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)


class InvoiceLineInline(admin.TabularInline):
    model = InvoiceLine
    fields = ("position", "description", "quantity", "unit_price", "amount", "net_amount", "period_start",
              "period_end")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_view_permission(self, request, obj=None):  # the lines are part of the invoice
        return request.user.has_perm("billing.view_invoice") or request.user.has_perm("billing.change_invoice")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class CreditNoteInline(admin.TabularInline):
    model = CreditNote
    fields = ("number", "issued_at", "amount", "tax_amount", "currency", "customer_reason", "reason", "refund")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = _("credit notes against this invoice")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Invoice)
class InvoiceAdmin(_PdfMixin, ReadOnlyModelAdmin):
    render = staticmethod(pdf.invoice_pdf)
    list_display = ("number", "order_reference", "customer", "total_amount", "issued_at", "pdf_link")
    list_filter = ("year",)
    list_select_related = ("order",)
    search_fields = ("number", "order__reference", "email")
    search_help_text = _("Search by invoice number, order reference or email.")
    ordering = ("-year", "-sequence")
    fieldsets = (
        (None, {"fields": ("number", "order_reference", "issued_at", "total_amount", "pdf_link")}),
        (_("Billed to"), {"fields": ("name", "company", "business", "email", "country", "billing_address",
                                     "vat_id")}),
        (_("VAT"), {"fields": ("tax_treatment", "tax_rate", "tax_country", "net_total", "tax_amount", "seller")}),
        (_("Settled by"), {"fields": ("asset_symbol", "network_name", "coins", "rate", "rate_source", "rate_at")}),
    )
    readonly_fields = ("order_reference", "total_amount", "pdf_link", "coins")
    inlines = [InvoiceLineInline, CreditNoteInline]

    @admin.display(description=_("order"), ordering="order__reference")
    def order_reference(self, obj):
        return _order_link(self.admin_site.name, obj.order)

    @admin.display(description=_("customer"), ordering="name")
    def customer(self, obj):
        who = f"{obj.name} ({obj.company})" if obj.company else obj.name
        return format_html("{}<br><small>{}</small>", who, obj.email)

    @admin.display(description=_("total"), ordering="total")
    def total_amount(self, obj):
        return f"{obj.total} {obj.currency}"

    @admin.display(description=_("amount received"))
    def coins(self, obj):
        return f"{whole_units(obj.crypto_amount, obj.decimals)} {obj.asset_symbol} ({obj.crypto_amount} base units)"


@admin.register(CreditNote)
class CreditNoteAdmin(_PdfMixin, ReadOnlyModelAdmin):
    render = staticmethod(pdf.credit_note_pdf)
    list_display = ("number", "invoice", "order_reference", "customer", "credited", "issued_at", "pdf_link")
    list_filter = ("year",)
    list_select_related = ("invoice__order",)
    search_fields = ("number", "invoice__number", "invoice__order__reference", "invoice__email")
    search_help_text = _("Search by credit note or invoice number, order reference or email.")
    ordering = ("-year", "-sequence")
    fields = ("number", "invoice", "order_reference", "issued_at", "credited", "net_amount", "tax_amount",
              "customer_reason", "customer_reason_text", "reason", "refund", "pdf_link")
    readonly_fields = ("order_reference", "credited", "pdf_link")

    @admin.display(description=_("order"), ordering="invoice__order__reference")
    def order_reference(self, obj):
        return _order_link(self.admin_site.name, obj.invoice.order)

    @admin.display(description=_("customer"), ordering="invoice__name")
    def customer(self, obj):
        return format_html("{}<br><small>{}</small>", obj.invoice.name, obj.invoice.email)

    @admin.display(description=_("amount credited"), ordering="amount")
    def credited(self, obj):
        return f"{obj.amount} {obj.currency}"
