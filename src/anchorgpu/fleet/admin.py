"""The operators' fleet tools: sites, hosts with their devices, maintenance windows."""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import widgets as admin_widgets
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from anchorgpu.admin_base import ReadOnlyModelAdmin
from anchorgpu.allocation import selectors as allocation_selectors
from anchorgpu.allocation import services as allocation_services
from anchorgpu.allocation.errors import AllocationError
from anchorgpu.allocation.models import Booking
from anchorgpu.audit.services import audit_record

from .models import Device, Host, Site, validate_topology

# --- sites -----------------------------------------------------------------


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = ("code", "name", "country", "host_count")
    search_fields = ("code", "name")

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_host_count=Count("hosts"))

    @admin.display(description=_("hosts"), ordering="_host_count")
    def host_count(self, obj):
        return obj._host_count


# --- hosts and their devices -----------------------------------------------


def _stranded_message(bookings) -> str:
    refs = ", ".join(f"#{b.pk}{f' ({b.reference})' if b.reference else ''}" for b in bookings[:10])
    return _("%(count)d live booking(s) would be stranded: %(refs)s. End, refund or cancel their orders first (each "
             "order's admin page has the tools); for a planned window, use “Schedule maintenance”.") % {"count": len(bookings), "refs": refs}


class HostAdminForm(forms.ModelForm):
    """Refuses inventory changes that would strand a hold or a paid term."""

    class Meta:
        model = Host
        fields = "__all__"

    def clean(self):
        cleaned = super().clean()
        host = self.instance
        if host.pk is None:
            return cleaned
        leaves_sale = "status" in self.changed_data and cleaned.get("status") != Host.Status.ACTIVE
        if leaves_sale or "product" in self.changed_data:
            bookings = list(allocation_selectors.live_customer_bookings(host_id=host.pk))
            if bookings:
                raise ValidationError(_stranded_message(bookings))
        return cleaned


class DeviceInlineFormSet(forms.BaseInlineFormSet):
    """Checks the host's NVLink topology across all its devices at once."""

    def clean(self):
        super().clean()
        if any(self.errors):
            return  # the rows' own errors first; their values are not trustworthy yet
        repaired = [form.instance.pk for form in self.forms
                    if form.instance.pk is not None and "nvlink_pair" in form.changed_data]
        if repaired:
            bookings = list(allocation_selectors.live_customer_bookings(device_ids=repaired))
            if bookings:
                raise ValidationError(_stranded_message(bookings))
        pairs = []
        for form in self.forms:
            if not form.has_changed() and form.instance.pk is None:
                continue  # an empty extra row
            if self.can_delete and self._should_delete_form(form):
                continue
            pairs.append(form.cleaned_data.get("nvlink_pair"))
        product = getattr(self.instance, "product", None) if self.instance.product_id else None
        # Its ValidationError shows above the devices table.
        validate_topology(pairs, cards_per_unit=product.cards_per_unit if product else 1)


class DeviceInline(admin.TabularInline):
    model = Device
    formset = DeviceInlineFormSet
    fields = ("index", "uid", "nvlink_pair")
    extra = 0
    ordering = ("index",)


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    form = HostAdminForm
    list_display = ("name", "site", "product", "status", "device_count")
    list_filter = ("site", "product", "status")
    list_select_related = ("site", "product")
    search_fields = ("name", "devices__uid")
    fields = ("name", "site", "product", "status", "notes")
    inlines = [DeviceInline]
    actions = ["schedule_maintenance"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_device_count=Count("devices"))

    def save_model(self, request, obj, form, change):
        before = Host.objects.filter(pk=obj.pk).values_list("status", flat=True).first() if change else ""
        super().save_model(request, obj, form, change)
        if form.changed_data:
            audit_record(actor=request.user.get_username(), action="host_change" if change else "host_add", obj=obj,
                         from_state=before or "", to_state=obj.status, data={"changed": form.changed_data})

    @admin.display(description=_("devices"), ordering="_device_count")
    def device_count(self, obj):
        return obj._device_count

    def get_urls(self):
        opts = self.opts
        return [
            path("<path:object_id>/maintenance/", self.admin_site.admin_view(self.maintenance_view),
                 name=f"{opts.app_label}_{opts.model_name}_maintenance"),
            *super().get_urls(),
        ]

    @admin.action(description=_("Schedule maintenance for the selected host"), permissions=["change"])
    def schedule_maintenance(self, request, queryset):
        hosts = list(queryset[:2])
        if len(hosts) != 1:
            self.message_user(request, _("Select exactly one host to schedule maintenance for."), messages.WARNING)
            return None
        return HttpResponseRedirect(self._maintenance_url(hosts[0]))

    def _maintenance_url(self, host: Host) -> str:
        return reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_maintenance",
                       args=[host.pk])

    def maintenance_view(self, request, object_id):
        host = self.get_object(request, object_id)
        if host is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_change_permission(request, host):
            raise PermissionDenied
        if request.method == "POST":
            form = MaintenanceForm(request.POST)
            if form.is_valid():
                try:
                    result = allocation_services.host_enter_maintenance(
                        host=host, start=form.cleaned_data["start"], end=form.cleaned_data["end"],
                        actor=request.user.get_username(), reason=form.cleaned_data["reason"])
                except AllocationError as exc:
                    form.add_error(None, str(exc))
                else:
                    return self._maintenance_done(request, host, result)
        else:
            form = MaintenanceForm()
        now = timezone.now()
        windows = (Booking.objects.filter(kind=Booking.Kind.MAINTENANCE, state=Booking.State.LIVE, host=host,
                                          ends_at__gt=now).order_by("starts_at"))
        context = {
            **self.admin_site.each_context(request),
            "title": _("Schedule maintenance for %(host)s") % {"host": host.name},
            "subtitle": None,
            "opts": self.opts,
            "host": host,
            "object": host,  # for the breadcrumbs of admin/anchorgpu/object_tool.html
            "form": form,
            "media": self.media + form.media,
            "windows": windows,
            "booking_opts": Booking._meta,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/fleet/host/maintenance.html", context)

    def _maintenance_done(self, request, host: Host, result) -> HttpResponseRedirect:
        booking = result.booking
        self.message_user(request, _("Maintenance for %(host)s is scheduled from %(start)s to %(end)s UTC.") % {
            "host": host.name, "start": f"{booking.starts_at:%Y-%m-%d %H:%M}",
            "end": f"{booking.ends_at:%Y-%m-%d %H:%M}"}, messages.SUCCESS)
        if result.hits:
            refs = ", ".join(_describe(b) for b in result.hits)
            self.message_user(request, ngettext(
                "%(count)d live booking lies in the window and must be moved to another host: %(refs)s.",
                "%(count)d live bookings lie in the window and must be moved to another host: %(refs)s.",
                len(result.hits)) % {"count": len(result.hits), "refs": refs}, messages.WARNING)
        bookings = Booking._meta
        if (request.user.has_perm(f"{bookings.app_label}.view_{bookings.model_name}")
                or request.user.has_perm(f"{bookings.app_label}.change_{bookings.model_name}")):
            # The window's own page lists the bookings to move for as long as they are in it.
            return HttpResponseRedirect(reverse(
                f"{self.admin_site.name}:{bookings.app_label}_{bookings.model_name}_change", args=[booking.pk]))
        return HttpResponseRedirect(reverse(
            f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_change", args=[host.pk]))


def _describe(booking: Booking) -> str:
    ref = booking.reference or f"#{booking.pk}"
    period = f"{booking.starts_at:%Y-%m-%d %H:%M} – {booking.ends_at:%Y-%m-%d %H:%M}"
    return f"{ref} ({booking.get_kind_display()}, {period})"


class UTCSplitDateTimeField(forms.SplitDateTimeField):
    """A date and a time, read as UTC whatever the browser or the active time zone."""

    widget = admin_widgets.AdminSplitDateTime

    def compress(self, data_list):
        if data_list:
            if data_list[0] in self.empty_values:
                raise ValidationError(self.error_messages["invalid_date"], code="invalid_date")
            if data_list[1] in self.empty_values:
                raise ValidationError(self.error_messages["invalid_time"], code="invalid_time")
            return datetime.combine(*data_list).replace(tzinfo=dt_timezone.utc)
        return None


class MaintenanceForm(forms.Form):
    start = UTCSplitDateTimeField(label=_("Start (UTC)"))
    end = UTCSplitDateTimeField(label=_("End (UTC)"),
                                help_text=_("The host takes bookings again from this moment."))
    reason = forms.CharField(label=_("Reason"), widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
                             help_text=_("Written to the audit log with your name."))

    def clean(self):
        cleaned = super().clean()
        start, end = cleaned.get("start"), cleaned.get("end")
        if start and end:
            if end <= start:
                self.add_error("end", _("The end must be after the start."))
            elif end <= timezone.now():
                self.add_error("end", _("The end is in the past; a maintenance window must end in the future."))
        return cleaned


# --- devices ---------------------------------------------------------------


@admin.register(Device)
class DeviceAdmin(ReadOnlyModelAdmin):
    """Read-only: devices are added, renumbered and paired on their host's page,
    where the whole topology is checked at once."""

    list_display = ("uid", "host", "index", "nvlink_pair")
    list_filter = ("host__site", "host__product")
    list_select_related = ("host",)
    search_fields = ("uid", "host__name")
    fields = ("host", "index", "uid", "nvlink_pair")

