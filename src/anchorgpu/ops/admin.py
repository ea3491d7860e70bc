from django.contrib import admin

from anchorgpu.admin_base import ReadOnlyModelAdmin

from .models import SweepRecord


@admin.register(SweepRecord)
class SweepRecordAdmin(ReadOnlyModelAdmin):
    """The worker writes these after every sweep; /metrics exports them."""

    list_display = ("name", "runs", "failures", "last_started_at", "last_seconds", "last_result", "last_failed_at")
    readonly_fields = ("name", "runs", "failures", "last_started_at", "last_seconds", "total_seconds", "last_result",
                       "last_error", "last_failed_at")
