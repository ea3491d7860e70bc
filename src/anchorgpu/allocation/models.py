from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from anchorgpu.catalog.models import Product
from anchorgpu.fleet.models import Device, Host


class Booking(models.Model):
    """A set of devices reserved for the half-open period ``[starts_at, ends_at)``."""

    class Kind(models.TextChoices):
        HOLD = "hold", _("hold")
        CONFIRMED = "confirmed", _("confirmed")
        MAINTENANCE = "maintenance", _("maintenance")

    class State(models.TextChoices):
        LIVE = "live", _("live")
        RELEASED = "released", _("released")
        EXPIRED = "expired", _("expired")

    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    state = models.CharField(_("state"), max_length=16, choices=State.choices, default=State.LIVE)
    product = models.ForeignKey(Product, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    host = models.ForeignKey(Host, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                             help_text=_("The host a maintenance window is for."))
    quantity = models.PositiveIntegerField(_("units"), default=0)
    starts_at = models.DateTimeField(_("starts"))
    ends_at = models.DateTimeField(_("ends"))
    expires_at = models.DateTimeField(_("hold expires"), null=True, blank=True)
    reference = models.CharField(_("reference"), max_length=64, blank=True, db_index=True,
                                 help_text=_("What the booking is for, e.g. an order number."))
    reason = models.TextField(_("reason"), blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    devices = models.ManyToManyField(Device, through="BookingDevice", related_name="bookings")

    class Meta:
        ordering = ["-starts_at", "-id"]
        indexes = [
            models.Index(fields=["kind", "state", "expires_at"], name="booking_hold_expiry"),
            # Live maintenance windows by host: a few rows among every booking ever made.
            models.Index(fields=["host", "ends_at"], condition=Q(kind="maintenance", state="live"),
                         name="booking_live_maintenance"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(ends_at__gt=models.F("starts_at")), name="booking_period_not_empty"),
            models.CheckConstraint(condition=~Q(kind="hold") | Q(expires_at__isnull=False), name="hold_has_expiry"),
        ]
        verbose_name = _("booking")
        verbose_name_plural = _("bookings")

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk} [{self.starts_at:%Y-%m-%d %H:%M}, {self.ends_at:%Y-%m-%d %H:%M})"


class BookingDevice(models.Model):
    """One device's share of a booking. The no-overlap invariant lives here:
    no device has two ``live`` rows whose periods overlap. PostgreSQL
    enforces it with an exclusion constraint and SQLite with triggers (see
    migration 0002). The period and the hold expiry are copied from the
    booking so the database can check and index them on this row alone; a
    maintenance window may be cut into several rows around bookings it hits.
    """

    booking = models.ForeignKey(Booking, on_delete=models.CASCADE, related_name="slots")
    # No index of its own on the device: ``slot_by_device`` starts with it and serves every lookup by device.
    device = models.ForeignKey(Device, on_delete=models.PROTECT, related_name="slots", db_index=False)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)
    live = models.BooleanField(default=True)

    class Meta:
        indexes = [
            # A device's rows by end: a read of a period skips the device's history. One index for all rows,
            # not a partial one beside a plain index on the device: at fleet scale PostgreSQL then chose the
            # plain one and filtered every past booking of each device (issue 22).
            models.Index(fields=["device", "ends_at", "starts_at"], name="slot_by_device"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(ends_at__gt=models.F("starts_at")), name="slot_period_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.device} [{self.starts_at:%Y-%m-%d %H:%M}, {self.ends_at:%Y-%m-%d %H:%M})"
