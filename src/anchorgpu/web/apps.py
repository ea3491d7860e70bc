from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "anchorgpu.web"
    label = "web"
    verbose_name = "Shop"
