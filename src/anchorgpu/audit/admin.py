from django.contrib import admin

from .models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("at", "actor", "action", "object_type", "object_id", "from_state", "to_state")
    list_filter = ("action", "object_type")
    search_fields = ("object_id", "actor", "reason")
    date_hierarchy = "at"

    # The log is append-only: nobody edits or deletes it, not even operators.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
