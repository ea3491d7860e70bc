"""Bookings for the operator: read-only, changed only through the services."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from anchorgpu.admin_base import ReadOnlyModelAdmin, missing_object_redirect
from anchorgpu.orders.errors import OrderError
from anchorgpu.orders.maintenance import maintenance_hits, maintenance_move, maintenance_move_all
from anchorgpu.orders.states import KEEPS_ITS_BOOKING

from . import services
from .admin_moves import MoveForm, proposal_text
from .errors import AllocationError
from .models import Booking, BookingDevice


class ReleaseForm(forms.Form):
    reason = forms.CharField(label=_("Reason"), widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
                             help_text=_("Written to the audit log with your name."))


class BookingDeviceInline(admin.TabularInline):
    model = BookingDevice
    verbose_name = _("device slot")
    verbose_name_plural = _("device slots")
    fields = ("device", "starts_at", "ends_at", "expires_at", "live")
    readonly_fields = fields
    ordering = ("device__host__name", "device__index", "starts_at")
    extra = 0
    can_delete = False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("device__host")

    def has_view_permission(self, request, obj=None):
        return _may_see_bookings(request)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def _may_see_bookings(request) -> bool:
    opts = Booking._meta
    return (request.user.has_perm(f"{opts.app_label}.view_{opts.model_name}")
            or request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}"))


@admin.register(Booking)
class BookingAdmin(ReadOnlyModelAdmin):
    list_display = ("id", "kind", "state", "target", "quantity", "period", "expires_at", "reference")
    list_display_links = ("id",)
    list_filter = ("kind", "state", "product", "host")
    list_select_related = ("product", "host")
    search_fields = ("reference", "slots__device__uid")
    search_help_text = _("Search by reference (e.g. an order number) or by a device's stable id.")
    date_hierarchy = "starts_at"
    fields = ("kind", "state", "product", "host", "quantity", "starts_at", "ends_at", "expires_at",
              "reference", "reason", "created_at", "bookings_to_move")
    readonly_fields = fields
    inlines = [BookingDeviceInline]
    actions = ["release_bookings"]

    # Bookings are created and changed only by the allocation services, which
    # check availability and write the audit log. The admin shows them and
    # offers the one operator use case, "release", through a service.
    def has_release_permission(self, request, obj=None):
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    def get_fields(self, request, obj=None):
        fields = list(super().get_fields(request, obj))
        if obj is not None and obj.kind == Booking.Kind.MAINTENANCE:
            hidden = {"product", "quantity", "expires_at"}  # a window is for a host, not for units of a product
        else:
            hidden = {"host", "bookings_to_move"}
            if obj is not None and obj.kind != Booking.Kind.HOLD:
                hidden.add("expires_at")
        return [name for name in fields if name not in hidden]

    @admin.display(description=_("product / host"))
    def target(self, obj):
        if obj.host_id:
            return obj.host
        return obj.product or "—"

    @admin.display(description=_("period (UTC)"), ordering="starts_at")
    def period(self, obj):
        return f"{obj.starts_at:%Y-%m-%d %H:%M} – {obj.ends_at:%Y-%m-%d %H:%M}"

    @admin.display(description=_("live bookings in this window"))
    def bookings_to_move(self, obj):
        """For a live maintenance window: the live bookings of other kinds on the host's devices in what is left
        of it, each with the shop's proposed move (or why there is none) and a link to move it."""
        if obj.kind != Booking.Kind.MAINTENANCE or obj.state != Booking.State.LIVE or obj.host_id is None:
            return "—"
        hits = maintenance_hits(window=obj)
        if not hits:
            return _("None: nothing to move.")
        moves_url = reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_moves",
                            args=[obj.pk])
        rows = format_html_join(
            "", "<tr><td><a href=\"{}\">#{}</a></td><td>{}</td><td>{} – {}</td><td>{}</td><td>{}</td><td>{}</td>"
                "<td><a class=\"button move-link\" href=\"{}?booking={}\">{}</a></td></tr>",
            ((reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_change",
                      args=[h.booking.pk]),
              h.booking.pk, h.booking.get_kind_display(), f"{h.booking.starts_at:%Y-%m-%d %H:%M}",
              f"{h.booking.ends_at:%Y-%m-%d %H:%M}", h.booking.quantity, h.booking.reference or "—",
              proposal_text(h), moves_url, h.booking.pk, _("Move…"))
             for h in hits))
        return format_html(
            "<table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th></th></tr>"
            "</thead><tbody>{}</tbody></table><p><a class=\"button move-all-link\" href=\"{}\">{}</a></p>",
            _("booking"), _("kind"), _("period (UTC)"), _("units"), _("reference"), _("proposed move"), rows,
            moves_url, _("Move all…"))

    # --- release ------------------------------------------------------------

    def get_urls(self):
        opts = self.opts
        return [
            path("<path:object_id>/release/", self.admin_site.admin_view(self.release_view),
                 name=f"{opts.app_label}_{opts.model_name}_release"),
            path("<path:object_id>/moves/", self.admin_site.admin_view(self.moves_view),
                 name=f"{opts.app_label}_{opts.model_name}_moves"),
            *super().get_urls(),
        ]

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        context["may_release"] = (obj is not None and obj.state == Booking.State.LIVE
                                  and self.has_release_permission(request, obj))
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)

    @admin.action(description=_("Release the selected bookings"), permissions=["release"])
    def release_bookings(self, request, queryset):
        return self._release(request, list(queryset.select_related("product", "host")), from_action=True)

    def release_view(self, request, object_id):
        booking = self.get_object(request, object_id)
        if booking is None:
            return missing_object_redirect(self, request, self.opts, object_id)
        if not self.has_release_permission(request, booking):
            raise PermissionDenied
        return self._release(request, [booking], from_action=False)

    def _release(self, request, bookings: list[Booking], *, from_action: bool):
        form = ReleaseForm(request.POST if request.method == "POST" and "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            released = 0
            for booking in bookings:
                try:
                    services.booking_release(booking=booking, actor=request.user.get_username(),
                                             reason=form.cleaned_data["reason"])
                except AllocationError as exc:
                    self.message_user(request, _("Booking #%(id)s was not released: %(error)s") % {
                        "id": booking.pk, "error": exc}, messages.ERROR)
                else:
                    released += 1
            if released:
                self.message_user(request, ngettext("%(count)d booking released.", "%(count)d bookings released.",
                                                    released) % {"count": released}, messages.SUCCESS)
            if from_action:
                return None  # back to the changelist, with its filters
            return HttpResponseRedirect(reverse(
                f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_change", args=[bookings[0].pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": _("Release bookings"),
            "subtitle": None,
            "opts": self.opts,
            "bookings": bookings,
            "form": form,
            "from_action": from_action,
            "kept_states": sorted(state.value for state in KEEPS_ITS_BOOKING),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media + form.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/allocation/booking/release.html", context)

    # --- moves out of a maintenance window -----------------------------------

    def moves_view(self, request, object_id):
        """Move one booking the window hits (``?booking=``), to the shop's proposal or the operator's cards, or
        all of them to the shop's proposals; each move gives the freed part of the window to it."""
        window = self.get_object(request, object_id)
        if window is None:
            return missing_object_redirect(self, request, self.opts, object_id)
        if not self.has_release_permission(request, window):
            raise PermissionDenied
        change_url = reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_change",
                             args=[window.pk])
        hits = maintenance_hits(window=window)
        wanted = request.GET.get("booking") or request.POST.get("booking") or ""
        if wanted:
            hits = [h for h in hits if str(h.booking.pk) == wanted]
            if not hits:
                self.message_user(request, _("Booking #%(id)s is not in this window any more.") % {"id": wanted},
                                  messages.WARNING)
                return HttpResponseRedirect(change_url)
        form = MoveForm(request.POST if request.method == "POST" else None, one=bool(wanted))
        if form.is_bound and form.is_valid() and hits:
            actor, reason = request.user.get_username(), form.cleaned_data["reason"]
            if wanted:
                try:
                    maintenance_move(window=window, booking=hits[0].booking, devices=form.cleaned_data["devices"],
                                     actor=actor, reason=reason)
                except (AllocationError, OrderError) as exc:
                    form.add_error(None, str(exc))
                else:
                    self.message_user(request, _("Booking #%(id)s was moved; the window now covers its cards.")
                                      % {"id": hits[0].booking.pk}, messages.SUCCESS)
                    return HttpResponseRedirect(change_url)
            else:
                outcomes = maintenance_move_all(window=window, actor=actor, reason=reason)
                done = sum(1 for o in outcomes if o.moved is not None)
                if done:
                    self.message_user(request, ngettext("%(count)d booking moved.", "%(count)d bookings moved.",
                                                        done) % {"count": done}, messages.SUCCESS)
                for outcome in outcomes:
                    if outcome.moved is None:
                        self.message_user(request, _("Booking #%(id)s was not moved: %(error)s") % {
                            "id": outcome.booking.pk, "error": outcome.error}, messages.ERROR)
                return HttpResponseRedirect(change_url)
        context = {
            **self.admin_site.each_context(request),
            "title": _("Move bookings out of maintenance window #%(id)s") % {"id": window.pk},
            "subtitle": None,
            "opts": self.opts,
            "window": window,
            "hits": [(h, proposal_text(h)) for h in hits],
            "form": form,
            "booking": wanted,
            "change_url": change_url,
            "media": self.media + form.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/allocation/booking/moves.html", context)
