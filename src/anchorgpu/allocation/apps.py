from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AllocationConfig(AppConfig):
    name = "anchorgpu.allocation"
    label = "allocation"
    verbose_name = _("Allocation")
