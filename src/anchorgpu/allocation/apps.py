from django.apps import AppConfig


class AllocationConfig(AppConfig):
    name = "anchorgpu.allocation"
    label = "allocation"
    verbose_name = "Allocation"
