"""The operators' admin site: Django's, under the shop's own name (``apps.OperationsAdminConfig`` makes it
``admin.site``, so every ``@admin.register`` lands here)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _


class OperationsAdminSite(admin.AdminSite):
    site_header = _("AnchorGPU operations")
    site_title = _("AnchorGPU operations")
    index_title = _("Fleet, prices, orders and payments")
