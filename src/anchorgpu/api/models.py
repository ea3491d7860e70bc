"""What the JSON API stores of its own: the idempotency keys of orders placed through it. The table keeps the
name it had in the ``web`` app (``Meta.db_table``); migration ``web.0004_models_to_accounts_and_api`` moved the
model here without touching the database."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class ApiIdempotency(models.Model):
    """An Idempotency-Key a customer sent with POST /api/v1/orders, the
    fingerprint of the body it came with and the order it made."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(_("idempotency key"), max_length=64)
    fingerprint = models.CharField(_("fingerprint of the request body"), max_length=64)
    order = models.OneToOneField("orders.Order", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        db_table = "web_apiidempotency"
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="api_idempotency_key_once"),
            models.CheckConstraint(condition=~Q(key=""), name="api_idempotency_key_not_empty"),
        ]
        verbose_name = _("API idempotency key")
        verbose_name_plural = _("API idempotency keys")

    def __str__(self) -> str:
        return self.key
