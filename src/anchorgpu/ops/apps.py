from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class OpsConfig(AppConfig):
    name = "anchorgpu.ops"
    label = "ops"
    verbose_name = _("Operations")

    def ready(self):
        from django.core.signals import request_finished
        from django.db.backends.signals import connection_created

        from .logs import forget_request_id, install_record_factory
        from .pg_times import use_c_loader

        install_record_factory()
        request_finished.connect(forget_request_id, dispatch_uid="anchorgpu_forget_request_id")
        connection_created.connect(use_c_loader, dispatch_uid="anchorgpu_pg_times")
