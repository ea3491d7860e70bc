"""Shared pieces of the operators' admin."""

from django.contrib import admin


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """Shown to operators, never added, edited or deleted here: these rows
    change only through services (or not at all, like the audit log)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
