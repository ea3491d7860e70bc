from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "anchorgpu.api"
    label = "api"
    verbose_name = "API"  # a name, the same in every language (and a string the catalogs need not hold)
