from django.contrib import admin

from .models import SimulationJob


@admin.register(SimulationJob)
class SimulationJobAdmin(admin.ModelAdmin):
    """Read-only: the operators watch the queue; jobs change only through the runner."""

    list_display = ("created_at", "model_label", "state", "progress", "attempts", "seconds", "failure")
    list_filter = ("state", "failure")
    search_fields = ("model_label", "id", "key")
    readonly_fields = [f.name for f in SimulationJob._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
