from django.apps import AppConfig


class FleetConfig(AppConfig):
    name = "anchorgpu.fleet"
    label = "fleet"
    verbose_name = "Fleet"
