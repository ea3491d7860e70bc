"""The operators' host faults: mark a host faulty, clear the fault, and the list of faults (``orders.faults``).

Registered here, not in ``fleet.admin``, because marking and clearing reach the orders a fault hits (the fleet
never imports orders). The host's page (``fleet.admin``) lists its faults and links here by URL name: "Mark
faulty" (``admin:fleet_hostfault_mark``), and each fault's page offers "Clear fault"."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _l
from django.utils.translation import ngettext

from anchorgpu.admin_base import ReadOnlyModelAdmin, missing_object_redirect
from anchorgpu.fleet.admin import UTCSplitDateTimeField
from anchorgpu.fleet.models import Host, HostFault

from .errors import OrderError
from .faults import HIT_STATES, fault_move_offers, host_fault_clear, host_mark_faulty
from .models import Order


class FaultForm(forms.Form):
    at = UTCSplitDateTimeField(label=_l("Since (UTC)"), required=False,
                               help_text=_l("Leave empty for now. Never in the future."))
    reason = forms.CharField(label=_l("Reason"), max_length=2000,
                             widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
                             help_text=_l("Written to the audit log with your name."))

    def clean_reason(self):
        reason = " ".join(self.cleaned_data["reason"].split())
        if not reason:
            raise forms.ValidationError(_("Give a reason."))
        return reason


@admin.register(HostFault)
class HostFaultAdmin(ReadOnlyModelAdmin):
    list_display = ("host", "started_at", "cleared_at", "reason", "orders_hit", "settled_at")
    list_filter = ("host__site", ("cleared_at", admin.EmptyFieldListFilter))
    list_select_related = ("host",)
    search_fields = ("host__name", "reason")
    fields = ("host", "started_at", "marked_at", "marked_by", "reason", "cleared_at", "cleared_by",
              "clear_reason", "orders_hit", "previous_block", "settled_at")
    readonly_fields = fields

    @admin.display(description=_l("orders hit"))
    def orders_hit(self, obj):
        orders = Order.objects.filter(pk__in=obj.orders or []).order_by("pk")
        if not orders:
            return "—"
        offers = fault_move_offers([o for o in orders if o.order_state in HIT_STATES], now=timezone.now())
        site = self.admin_site.name
        return format_html_join(mark_safe("<br>"), '<a href="{}">{}</a> {} {}', (
            (reverse(f"{site}:orders_order_change", args=[o.pk]), o.reference,
             f"({offers[o.pk]})" if o.pk in offers else "",
             format_html('<a href="{}">{}</a>', reverse(f"{site}:orders_order_move_term", args=[o.pk]),
                         _("Move…")) if o.pk in offers and not obj.cleared_at else "")
            for o in orders))

    def may_operate(self, request) -> bool:
        return request.user.has_perm("fleet.change_host")

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("mark/<path:host_id>/", wrap(self.mark_view), name="fleet_hostfault_mark"),
            path("<path:object_id>/clear/", wrap(self.clear_view), name="fleet_hostfault_clear"),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        fault = HostFault.objects.filter(pk=object_id).first() if str(object_id).isdigit() else None
        extra = {"clear_url": (reverse(f"{self.admin_site.name}:fleet_hostfault_clear", args=[fault.pk])
                               if fault is not None and fault.is_open and self.may_operate(request) else None)}
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **extra})

    def _page(self, request, *, obj, host, title, intro, button, form, back):
        context = {**self.admin_site.each_context(request), "title": title, "subtitle": None,
                   "opts": HostFault._meta if obj is not None else Host._meta, "object": obj or host,
                   "host": host, "intro": intro, "button": button, "form": form, "back_url": back,
                   "media": self.media + form.media,
                   "orders": Order.objects.filter(pk__in=(obj.orders if obj is not None else [])).order_by("pk")}
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/fleet/hostfault/tool.html", context)

    def mark_view(self, request, host_id):
        if not self.may_operate(request):
            raise PermissionDenied
        host = Host.objects.filter(pk=host_id).first() if str(host_id).isdigit() else None
        if host is None:
            return missing_object_redirect(self, request, Host._meta, host_id)
        back = reverse(f"{self.admin_site.name}:fleet_host_change", args=[host.pk])
        form = FaultForm(request.POST if request.method == "POST" else None)
        if form.is_bound and form.is_valid():
            try:
                fault = host_mark_faulty(host=host, actor=request.user.get_username(),
                                         reason=form.cleaned_data["reason"], at=form.cleaned_data["at"])
            except OrderError as exc:
                form.add_error(None, exc.message)
            else:
                hit = len(fault.orders)
                self.message_user(request, ngettext(
                    "%(host)s is marked faulty and off sale; %(n)d paid term is hit: it is credited when the fault "
                    "is cleared, the term is moved, or it ends.",
                    "%(host)s is marked faulty and off sale; %(n)d paid terms are hit: each is credited when the "
                    "fault is cleared, the term is moved, or it ends.", hit) % {"host": host.name, "n": hit},
                    messages.WARNING if hit else messages.SUCCESS)
                return HttpResponseRedirect(back)
        return self._page(request, obj=None, host=host, title=_("Mark %(host)s faulty") % {"host": host.name},
                          intro=_("The host is taken off sale at once. The paid terms on it since the fault "
                                  "started are listed for you and get their service credit without arithmetic: "
                                  "when the fault is cleared, when they are moved, or when they end."),
                          button=_("Mark faulty"), form=form, back=back)

    def clear_view(self, request, object_id):
        if not self.may_operate(request):
            raise PermissionDenied
        fault = (HostFault.objects.filter(pk=object_id).select_related("host").first()
                 if str(object_id).isdigit() else None)
        if fault is None:
            return missing_object_redirect(self, request, HostFault._meta, object_id)
        back = reverse(f"{self.admin_site.name}:fleet_host_change", args=[fault.host_id])
        form = FaultForm(request.POST if request.method == "POST" else None)
        if form.is_bound and form.is_valid():
            try:
                host_fault_clear(fault=fault, actor=request.user.get_username(),
                                 reason=form.cleaned_data["reason"], at=form.cleaned_data["at"])
            except OrderError as exc:
                form.add_error(None, exc.message)
            else:
                self.message_user(request, _("The fault of %(host)s is cleared; the orders it hit are credited.")
                                  % {"host": fault.host.name}, messages.SUCCESS)
                return HttpResponseRedirect(back)
        return self._page(request, obj=fault, host=fault.host,
                          title=_("Clear the fault of %(host)s") % {"host": fault.host.name},
                          intro=_("The host goes back on sale (unless something else keeps it off) and each order "
                                  "the fault hit is credited for the time it lost, by the published rule."),
                          button=_("Clear the fault"), form=form, back=back)

