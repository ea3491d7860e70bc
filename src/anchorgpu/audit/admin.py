from django.contrib import admin

from anchorgpu.admin_base import ReadOnlyModelAdmin

from .models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyModelAdmin):
    """The log is append-only: nobody edits or deletes it, not even operators."""

    list_display = ("at", "actor", "action", "object_type", "object_id", "from_state", "to_state")
    list_filter = ("action", "object_type")
    search_fields = ("object_id", "actor", "reason")
    date_hierarchy = "at"
