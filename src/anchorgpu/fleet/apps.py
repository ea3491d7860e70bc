from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class FleetConfig(AppConfig):
    name = "anchorgpu.fleet"
    label = "fleet"
    verbose_name = _("Fleet")
