from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PilotReportsConfig(AppConfig):
    name = "anchorgpu.pilotreports"
    label = "pilotreports"
    verbose_name = _("Pilot reports")
