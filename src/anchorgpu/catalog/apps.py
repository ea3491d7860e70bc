from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "anchorgpu.catalog"
    label = "catalog"
    verbose_name = "Catalog and prices"
