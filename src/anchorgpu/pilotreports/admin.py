from django.contrib import admin

from anchorgpu.admin_base import ReadOnlyModelAdmin

from .models import PilotReport


@admin.register(PilotReport)
class PilotReportAdmin(ReadOnlyModelAdmin):
    list_display = ("uploaded_at", "user", "device_name", "device_count", "tokens_per_s", "restore")
    list_filter = ("restore", "product_slug")
    search_fields = ("user__email", "filename", "device_name")
    exclude = ("report",)
