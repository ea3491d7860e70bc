from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BillingConfig(AppConfig):
    name = "anchorgpu.billing"
    label = "billing"
    verbose_name = _("Invoices and credit notes")
