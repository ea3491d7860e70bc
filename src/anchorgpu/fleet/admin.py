"""The operators' fleet tools: sites, hosts with their devices, maintenance windows."""

from __future__ import annotations

from datetime import UTC, datetime

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

from anchorgpu.admin_base import ReadOnlyModelAdmin, missing_object_redirect
from anchorgpu.allocation import rules as allocation_rules
from anchorgpu.allocation.errors import AllocationError
from anchorgpu.allocation.models import Booking
from anchorgpu.audit.services import audit_record
from anchorgpu.orders.maintenance import maintenance_enter

from . import discovery
from . import services as fleet_services
from .admin_inventory import INVENTORY_HELP, SSH_HELP, inventory_html
from .models import Device, Host, HostFault, Site

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


class HostAdminForm(forms.ModelForm):
    """The host's own fields. Whether an edit may strand a booking is the ``host_update`` service's call,
    asked once for the host and its devices together (``DeviceInlineFormSet.clean``)."""

    class Meta:
        model = Host
        fields = "__all__"


def device_edits(formset) -> list[fleet_services.DeviceEdit]:
    """The device rows the operator added, changed or removed, as the service takes them."""
    edits = []
    for form in formset.forms:
        pk = form.instance.pk
        if formset.can_delete and formset._should_delete_form(form):
            if pk is not None:
                edits.append(fleet_services.DeviceEdit(pk, delete=True))
            continue
        if not form.has_changed():
            continue  # an unchanged row, or an empty extra one
        data = form.cleaned_data
        edits.append(fleet_services.DeviceEdit(pk, index=data.get("index"), uid=data.get("uid", ""),
                                               nvlink_pair=data.get("nvlink_pair")))
    return edits


class DeviceInlineFormSet(forms.BaseInlineFormSet):
    """Asks the service whether the host's edit (its fields, already on ``self.instance``, and its devices) may
    be made: it checks the NVLink topology across all devices, and the bookings the edit would strand, with
    the product's row lock taken in the admin's transaction (held until the save commits)."""

    def clean(self):
        super().clean()
        if any(self.errors):
            return  # the rows' own errors first; their values are not trustworthy yet
        host = self.instance
        changes = {"status": host.status} if host.status else {}
        if host.product_id:
            changes["product"] = host.product_id
        try:
            fleet_services.host_update_check(host=host, changes=changes, devices=device_edits(self))
        except fleet_services.HostUpdateRefused as exc:
            raise ValidationError(exc.message) from None  # shown above the devices table


class DeviceInline(admin.TabularInline):
    model = Device
    formset = DeviceInlineFormSet
    fields = ("index", "uid", "nvlink_pair", "gpu_uuid", "pci_bus_id")
    readonly_fields = ("gpu_uuid", "pci_bus_id")
    extra = 0
    ordering = ("index",)


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    form = HostAdminForm
    list_display = ("name", "site", "product", "status", "device_count", "last_contact_at", "sold")
    list_filter = ("site", "product", "status")
    list_select_related = ("site", "product")
    search_fields = ("name", "devices__uid", "devices__gpu_uuid", "ssh_address")
    fieldsets = (
        (None, {"fields": ("name", "site", "product", "status", "notes")}),
        (_("How the shop reaches it"), {"fields": ("ssh_address", "ssh_port", "ssh_user", "host_key", "runtime"),
                                        "description": SSH_HELP}),
        (_("What it really has"), {"fields": ("inventory_table", "discovered_at", "last_contact_at", "sale_block"),
                                   "description": INVENTORY_HELP}),
    )
    readonly_fields = ("inventory_table", "discovered_at", "last_contact_at")
    inlines = [DeviceInline]
    actions = ["schedule_maintenance", "read_inventory", "mark_faulty"]
    DISCOVER_AT_ONCE = 10  # hosts read by one click; each takes a few seconds over SSH

    @admin.display(description=_("discovered inventory"))
    def inventory_table(self, obj):
        return inventory_html(obj.inventory or {})

    @admin.display(description=_("sold"), boolean=True)
    def sold(self, obj):
        return not obj.sale_block

    @admin.action(description=_("Read the inventory over SSH"), permissions=["change"])
    def read_inventory(self, request, queryset):
        hosts = list(queryset.select_related("product")[:self.DISCOVER_AT_ONCE + 1])
        if len(hosts) > self.DISCOVER_AT_ONCE:
            self.message_user(request, _("Select at most %(n)d hosts at a time.") % {"n": self.DISCOVER_AT_ONCE},
                              messages.WARNING)
            return None
        for host in hosts:
            try:
                result = discovery.host_discover(host=host, actor=request.user.get_username())
            except discovery.DiscoveryError as exc:
                self.message_user(request, _("%(host)s could not be read: %(why)s") % {
                    "host": host.name, "why": exc.message}, messages.ERROR)
                continue
            cards = len(result.inventory.get("cards") or [])
            if result.host.sale_block:
                self.message_user(request, _("%(host)s: %(cards)d card(s) read; not sold: %(why)s") % {
                    "host": host.name, "cards": cards, "why": result.host.sale_block}, messages.WARNING)
            else:
                self.message_user(request, _("%(host)s: %(cards)d card(s) read; it matches its product.") % {
                    "host": host.name, "cards": cards}, messages.SUCCESS)
        return None

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_device_count=Count("devices"))

    def save_model(self, request, obj, form, change):
        if change:
            return  # an edit is written by the host_update service, with its devices (save_related)
        super().save_model(request, obj, form, change)
        audit_record(actor=request.user.get_username(), action="host_add", obj=obj, to_state=obj.status,
                     data={"changed": form.changed_data})

    def save_related(self, request, form, formsets, change):
        if not change:
            return super().save_related(request, form, formsets, change)
        devices = [edit for formset in formsets for edit in device_edits(formset)]
        changes = {name: form.cleaned_data[name] for name in form.changed_data if name in fleet_services.HOST_FIELDS}
        fleet_services.host_update(host=form.instance, actor=request.user.get_username(), changes=changes,
                                   devices=devices)
        for formset in formsets:  # what the admin's own change log reads (the audit row has the details)
            formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        return None

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except fleet_services.HostUpdateRefused as exc:  # refused at the save itself: nothing was written
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

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

    @admin.action(description=_("Mark the selected host faulty"), permissions=["change"])
    def mark_faulty(self, request, queryset):
        hosts = list(queryset[:2])
        if len(hosts) != 1:
            self.message_user(request, _("Select exactly one host to mark faulty."), messages.WARNING)
            return None
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:fleet_hostfault_mark", args=[hosts[0].pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        fault = (HostFault.objects.filter(host_id=object_id, cleared_at__isnull=True).first()
                 if str(object_id).isdigit() else None)
        # The host's faults, listed on its page (read-only: marked and cleared on the faults' own pages).
        extra = {"open_fault": fault, "faults": HostFault.objects.filter(host_id=object_id).order_by("-started_at")[:20]
                 if str(object_id).isdigit() else []}
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **extra})

    def _maintenance_url(self, host: Host) -> str:
        return reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_maintenance",
                       args=[host.pk])

    def maintenance_view(self, request, object_id):
        host = self.get_object(request, object_id)
        if host is None:
            return missing_object_redirect(self, request, self.opts, object_id)
        if not self.has_change_permission(request, host):
            raise PermissionDenied
        if request.method == "POST":
            form = MaintenanceForm(request.POST)
            if form.is_valid():
                try:
                    result, hits = maintenance_enter(
                        host=host, start=form.cleaned_data["start"], end=form.cleaned_data["end"],
                        actor=request.user.get_username(), reason=form.cleaned_data["reason"])
                except AllocationError as exc:
                    form.add_error(None, str(exc))
                else:
                    return self._maintenance_done(request, host, result, hits)
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

    def _maintenance_done(self, request, host: Host, result, hits) -> HttpResponseRedirect:
        booking = result.booking
        self.message_user(request, _("Maintenance for %(host)s is scheduled from %(start)s to %(end)s UTC.") % {
            "host": host.name, "start": f"{booking.starts_at:%Y-%m-%d %H:%M}",
            "end": f"{booking.ends_at:%Y-%m-%d %H:%M}"}, messages.SUCCESS)
        if hits:
            refs = ", ".join(_describe(h.booking) for h in hits)
            self.message_user(request, ngettext(
                "%(count)d live booking lies in the window: %(refs)s. The window's page proposes a move for it; "
                "until it is moved, the window leaves its cards out.",
                "%(count)d live bookings lie in the window: %(refs)s. The window's page proposes a move for each; "
                "until they are moved, the window leaves their cards out.",
                len(hits)) % {"count": len(hits), "refs": refs}, messages.WARNING)
        for hit in hits:
            if not hit.proposal.possible:
                self.message_user(request, f"{_describe(hit.booking)}: {hit.text}", messages.ERROR)
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
            return datetime.combine(*data_list).replace(tzinfo=UTC)
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
        now = timezone.now()
        if start and start > now + allocation_rules.MAINTENANCE_AHEAD:
            self.add_error("start", _("A maintenance window starts at most %(days)d days from now.")
                           % {"days": allocation_rules.MAINTENANCE_AHEAD.days})
        elif start and end and end > start and end - max(start, now) > allocation_rules.MAX_MAINTENANCE:
            self.add_error("end", _("A maintenance window lasts at most %(days)d days; retire a host that is out "
                                    "for longer.") % {"days": allocation_rules.MAX_MAINTENANCE.days})
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

