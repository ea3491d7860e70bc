"""Orders for the operators: read-only (orders change only through the
services), with the payment tools on each order's page, and the payment
queue of orders that wait for a person, oldest first."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from anchorgpu.admin_base import ReadOnlyModelAdmin

from . import (
    admin_faults,  # noqa: F401 - registers the host faults' admin
    admin_steps,
)
from . import admin_panels as panels
from .admin_actions import BACK_TO_QUEUE, OrderToolsMixin
from .admin_moves import MoveInline
from .models import Order, OrderEmail, WebhookDelivery
from .queue import PaymentQueueEntry


@admin.register(Order)
class OrderAdmin(OrderToolsMixin, ReadOnlyModelAdmin):
    list_display = ("reference", "email", "product", "quantity", "term_days", "state", "total", "created_at")
    readonly_fields = ("extends_link", "extensions_list")
    list_filter = ("state", "product")
    list_select_related = ("product",)
    search_fields = ("reference", "email", "user__email", "quote__address", "transfers__txid", "claimed_txid")
    search_help_text = _("Search by reference, email, deposit address or transaction id.")
    date_hierarchy = "created_at"
    inlines = [MoveInline]
    fieldsets = (
        (None, {"fields": ("reference", "state", "user", "created_at", "updated_at")}),
        (_("What was ordered"), {"fields": ("product", "quantity", "term_days", "start_asap", "starts_at", "ends_at",
                                            "environment", "option_slugs", "booking")}),
        (_("Extensions"), {"fields": ("extends_link", "extended_days", "extensions_list")}),
        (_("Price"), {"fields": ("currency", "lines", "fiat_total")}),
        (_("Customer"), {"fields": ("name", "email", "company", "country", "billing_address", "vat_id",
                                    "language")}),
        (_("Payment"), {"fields": ("claimed_txid", "claimed_at", "paid_at", "excess", "refund_due",
                                   "refund_address", "chain_alert", "chain_alert_at")}),
        (_("Access"), {"fields": ("provisioner", "access_host", "access_port", "access_user",
                                  "provisioning_attempts", "unreachable_attempts", "last_error", "lease_step",
                                  "lease_owner", "lease_started_at", "lease_until", "retry_at", "end_warned_at",
                                  "end_warned_hour_at",
                                  "wipe_due_at", "wipe_attempts")}),
    )

    @admin.display(description=_("total"), ordering="fiat_total")
    def total(self, obj):
        return f"{obj.fiat_total} {obj.currency}"

    @admin.display(description=_("extends order"))
    def extends_link(self, obj):
        if not obj.extends_id:
            return "—"
        return format_html('<a href="{}">{}</a>', reverse("admin:orders_order_change", args=[obj.extends_id]),
                           obj.extends.reference)

    @admin.display(description=_("extensions"))
    def extensions_list(self, obj):
        rows = obj.extensions.select_related("invoice").order_by("created_at", "pk")
        if not rows:
            return "—"
        return format_html_join(", ", '<a href="{}">{}</a> ({} d, {}{})', (
            (reverse("admin:orders_order_change", args=[e.pk]), e.reference, e.term_days, e.state_label,
             f", {e.invoice.number}" if hasattr(e, "invoice") else "") for e in rows))

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None:
            context.update(self.panels_context(request, obj))
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)

    def panels_context(self, request, order: Order) -> dict:
        summary = panels.payment_summary(order)
        tools = panels.tools_for(order, summary) if self.may_operate(request) else []
        credit = panels.service_credit(order)
        return {
            "credit": credit,
            "credit_lost": panels.lost_rows(credit),
            "credit_url": (reverse(self.tool_url_name("issue_credit"), args=[order.pk])
                           if credit is not None and credit.due > 0 and self.may_operate(request) else None),
            "summary": summary,
            "to_do": panels.to_do(order, summary),
            "tools": [(t.label, reverse(self.tool_url_name(t.name), args=[order.pk])) for t in tools],
            "may_operate": self.may_operate(request),
            "transfers": order.transfers.all(),
            "claim_checks": panels.claim_checks(order),
            "refunds": order.refunds.all(),
            "ssh_keys": order.ssh_keys.all(),
            "steps": admin_steps.step_rows(order),
            "access_status": admin_steps.access_status(order),
            "emails": order.emails.exclude(kind=OrderEmail.Kind.OPERATOR_ALERT, event__isnull=False),
            "operator_events": order.operator_events.prefetch_related("emails", "deliveries"),
            "audit_trail": panels.audit_trail(order),
        }


@admin.register(PaymentQueueEntry)
class PaymentQueueAdmin(ReadOnlyModelAdmin):
    """Claimed, short and late payments, refunds owed and failed access: what
    an operator has to decide, oldest first. Each row leads to the order."""

    # Each column fits a 1366 px screen with the admin's menu open (queue.css): the state under the reference,
    # the claimed id shortened above its automatic check, unconfirmed and excess money under what was received,
    # the tools one per line, the filters above the table.
    list_display = ("order_link", "what_to_do", "claim", "due", "received", "shortfall", "age", "tools")
    list_display_links = None
    list_filter = ("state", "refund_due")
    search_fields = ("reference", "email", "quote__address", "claimed_txid", "transfers__txid")
    ordering = ("created_at", "id")
    list_per_page = 50

    change_list_template = "admin/orders/paymentqueueentry/change_list.html"

    class Media:
        css = {"all": ["orders/admin/queue.css"]}

    def changelist_view(self, request, extra_context=None):
        """Above the queue: each watched network's watcher, so a stalled one explains payments waiting on it."""
        from anchorgpu.payments.watch_status import watch_networks

        networks = [g for g in watch_networks() if g.status != "off"]
        return super().changelist_view(request, extra_context={**(extra_context or {}), "watch_networks": networks})

    def get_queryset(self, request):
        return (super().get_queryset(request).select_related("quote__asset", "product")
                .prefetch_related("transfers", "refunds", "claim_checks"))

    # Whoever may see or handle orders may see the queue.
    def has_view_permission(self, request, obj=None):
        opts = Order._meta
        return (super().has_view_permission(request, obj)
                or request.user.has_perm(f"{opts.app_label}.view_{opts.model_name}")
                or request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}"))

    def get_list_display(self, request):
        opts = Order._meta
        if request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}"):
            return self.list_display
        return tuple(name for name in self.list_display if name != "tools")

    def has_module_permission(self, request):
        return self.has_view_permission(request)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        return HttpResponseRedirect(self._order_url(object_id))

    def _order_url(self, pk, tool: str = "change") -> str:
        opts = Order._meta
        return reverse(f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_{tool}", args=[pk])

    @staticmethod
    def _summary(obj) -> panels.PaymentSummary:
        if not hasattr(obj, "_payment_summary"):
            obj._payment_summary = panels.payment_summary(obj)
        return obj._payment_summary

    @admin.display(description=_("order"), ordering="reference")
    def order_link(self, obj):
        quote = getattr(obj, "quote", None)
        network = quote.asset.network_name if quote is not None else ""
        return format_html('<a href="{}">{}</a><br><small class="queue-state">{}</small>{}', self._order_url(obj.pk),
                           obj.reference, obj.state_label,
                           format_html('<br><small class="queue-network">{}</small>', network) if network else "")

    @admin.display(description=_("claimed transaction and its check"))
    def claim(self, obj):
        if not obj.claimed_txid:
            return "—"
        txid = obj.claimed_txid
        short = f"{txid[:10]}…{txid[-6:]}" if len(txid) > 20 else txid
        verdict = panels.claim_verdict(obj)
        return format_html('<code title="{}">{}</code><br><span class="queue-verdict">{}</span>', txid, short,
                           verdict or _("not checked yet"))

    @admin.display(description=_("to do"))
    def what_to_do(self, obj):
        return panels.to_do(obj, self._summary(obj), with_txid=False) or "—"

    def _coins(self, obj, name: str) -> str:
        money = getattr(self._summary(obj), name)
        return money.coins if money is not None else "—"

    @admin.display(description=_("amount due"))
    def due(self, obj):
        return self._coins(obj, "due")

    @admin.display(description=_("received (confirmed)"))
    def received(self, obj):
        text = self._coins(obj, "received")
        summary = self._summary(obj)
        notes = []
        if summary.unconfirmed is not None and summary.unconfirmed.units:
            notes.append(_("+ %(coins)s unconfirmed") % {"coins": summary.unconfirmed.coins})
        if summary.excess is not None and summary.excess.units:
            notes.append(_("%(coins)s more than quoted") % {"coins": summary.excess.coins})
        return format_html("{}{}", text, format_html_join("", '<br><small class="queue-note">{}</small>',
                                                          ((note,) for note in notes)))

    @admin.display(description=_("shortfall"))
    def shortfall(self, obj):
        return self._coins(obj, "shortfall")

    @admin.display(description=_("excess"))
    def overpaid(self, obj):  # not "excess": that name is the order's own field, which the admin would show
        return self._coins(obj, "excess")

    @admin.display(description=_("age"), ordering="created_at")
    def age(self, obj):
        return panels.age(obj)

    @admin.display(description=_("tools"))
    def tools(self, obj):
        summary = self._summary(obj)
        query = urlencode({"back": BACK_TO_QUEUE})
        return format_html_join("", '<a class="queue-tool" href="{}?{}">{}</a>',
                                ((self._order_url(obj.pk, t.name), query, t.label)
                                 for t in panels.tools_for(obj, summary)))


class DeliveryStatusFilter(admin.SimpleListFilter):
    title = _("status")
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return [("pending", _("pending")), ("delivered", _("delivered")), ("given_up", _("given up"))]

    def queryset(self, request, queryset):
        if self.value() == "pending":
            return queryset.filter(sent_at__isnull=True, failed_at__isnull=True)
        if self.value() == "delivered":
            return queryset.filter(sent_at__isnull=False)
        if self.value() == "given_up":
            return queryset.filter(failed_at__isnull=False)
        return queryset


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyModelAdmin):
    """The operators' webhooks as the worker sent them: delivered, waiting for the next attempt, or given up
    after the last one (and sent again from here, once the receiver is fixed)."""

    list_display = ("event_kind", "order_link", "endpoint", "state", "attempts", "last_status", "last_error",
                    "created_at")
    list_filter = (DeliveryStatusFilter, "event__kind")
    list_select_related = ("event__order", "event__host")
    search_fields = ("event__order__reference", "url")
    ordering = ("-created_at", "-id")
    actions = ["send_again"]
    fields = ("event_kind", "order_link", "endpoint", "state", "attempts", "last_status", "last_error",
              "created_at", "due_at", "sent_at", "failed_at", "event_id", "payload")
    readonly_fields = fields

    def has_view_permission(self, request, obj=None):
        opts = Order._meta
        return (super().has_view_permission(request, obj)
                or request.user.has_perm(f"{opts.app_label}.view_{opts.model_name}"))

    def has_module_permission(self, request):
        return self.has_view_permission(request)

    def get_actions(self, request):
        opts = Order._meta
        if not request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}"):
            return {}
        return super().get_actions(request)

    @admin.display(description=_("event"), ordering="event__kind")
    def event_kind(self, obj):
        return obj.event.get_kind_display()

    @admin.display(description=_("event id"))
    def event_id(self, obj):
        return obj.event.event_id

    @admin.display(description=_("payload"))
    def payload(self, obj):
        import json

        return format_html("<pre>{}</pre>", json.dumps(obj.event.payload, indent=2, sort_keys=True))

    @admin.display(description=_("order"), ordering="event__order__reference")
    def order_link(self, obj):
        order = obj.event.order
        if order is None:  # an alert about a host alone
            host = obj.event.host
            return format_html('<a href="{}">{}</a>', reverse("admin:fleet_host_change", args=[host.pk]),
                               obj.event.subject) if host is not None else "—"
        return format_html('<a href="{}">{}</a>', reverse("admin:orders_order_change", args=[order.pk]),
                           order.reference)

    @admin.display(description=_("URL"))
    def endpoint(self, obj):
        return obj.shown_url

    @admin.display(description=_("status"))
    def state(self, obj):
        if obj.sent_at:
            return _("delivered")
        if obj.failed_at:
            return format_html("<strong>{}</strong>", _("given up"))
        return _("pending")

    @admin.action(description=_("Send the given-up deliveries again"))
    def send_again(self, request, queryset):
        from .webhooks import webhook_retry

        again = sum(webhook_retry(delivery=d, actor=request.user.get_username()) for d in queryset)
        self.message_user(request, ngettext("%(count)d delivery is queued again.",
                                            "%(count)d deliveries are queued again.", again) % {"count": again})
