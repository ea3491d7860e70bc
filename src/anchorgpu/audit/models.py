from django.db import models
from django.utils.translation import gettext_lazy as _


class AuditEntry(models.Model):
    """One state change, written by the service that made it. Append-only."""

    at = models.DateTimeField(_("at"), auto_now_add=True, db_index=True)
    actor = models.CharField(_("actor"), max_length=150, help_text=_("User name, or 'system' for the worker."))
    action = models.CharField(_("action"), max_length=64)
    object_type = models.CharField(_("object type"), max_length=64)
    object_id = models.CharField(_("object id"), max_length=64)
    from_state = models.CharField(_("from"), max_length=32, blank=True)
    to_state = models.CharField(_("to"), max_length=32, blank=True)
    reason = models.TextField(_("reason"), blank=True)
    data = models.JSONField(_("data"), default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]
        verbose_name = _("audit entry")
        verbose_name_plural = _("audit entries")

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.object_type}#{self.object_id}"
