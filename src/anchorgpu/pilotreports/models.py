"""Pilot reports customers upload: the report as sent (checked), and the figures the shop uses from it."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class PilotReport(models.Model):
    class Restore(models.TextChoices):
        PASSED = "passed", _("passed")
        FAILED = "failed", _("failed")
        SKIPPED = "skipped", _("skipped")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)  # not guessable, not counted
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="pilot_reports")
    uploaded_at = models.DateTimeField(_("uploaded"), auto_now_add=True)
    filename = models.CharField(_("file name"), max_length=200, blank=True)
    size_bytes = models.PositiveIntegerField(_("size (bytes)"))
    schema_version = models.PositiveSmallIntegerField(_("schema version"))
    tokens_per_s = models.FloatField(_("tokens per second (all cards)"))
    peak_memory_bytes = models.BigIntegerField(_("peak memory per card (bytes)"))
    device_name = models.CharField(_("device"), max_length=200, blank=True)
    device_count = models.PositiveSmallIntegerField(_("devices"))
    product_slug = models.CharField(_("product"), max_length=40, blank=True,
                                    help_text=_("The catalog product the report's device is, when recognised."))
    restore = models.CharField(_("restore proof"), max_length=10, choices=Restore.choices)
    report = models.JSONField(_("report"))

    class Meta:
        ordering = ["-uploaded_at"]
        indexes = [models.Index(fields=["user", "-uploaded_at"], name="pilotreport_by_user")]
        verbose_name = _("pilot report")
        verbose_name_plural = _("pilot reports")

    def __str__(self) -> str:
        return f"{self.filename or self.pk} ({self.device_name or self.product_slug or 'device unknown'})"
