"""App configurations of the project as a whole (each part's own live in its folder)."""

from django.contrib.admin.apps import AdminConfig


class OperationsAdminConfig(AdminConfig):
    """Django's admin, with the shop's own site (``admin_site.OperationsAdminSite``) as ``admin.site``."""

    default_site = "anchorgpu.admin_site.OperationsAdminSite"
