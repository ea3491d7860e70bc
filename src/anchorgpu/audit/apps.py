from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "anchorgpu.audit"
    label = "audit"
    verbose_name = "Audit log"
