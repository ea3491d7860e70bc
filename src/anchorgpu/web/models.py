"""What the web layer stores of its own: API tokens and the idempotency
keys of orders placed through the API."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class ApiToken(models.Model):
    """A customer's bearer token for the JSON API. Only a SHA-256 hash of the
    secret is kept; the full token is shown once, when it is made."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(_("name"), max_length=60)
    prefix = models.CharField(_("prefix"), max_length=8, unique=True,
                              help_text=_("The first characters of the token, shown to tell tokens apart."))
    secret_hash = models.CharField(_("hash of the secret"), max_length=64)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="api_token_by_user")]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.name} (agt_{self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class ApiIdempotency(models.Model):
    """An Idempotency-Key a customer sent with POST /api/v1/orders, the
    fingerprint of the body it came with and the order it made."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(_("idempotency key"), max_length=64)
    fingerprint = models.CharField(_("fingerprint of the request body"), max_length=64)
    order = models.OneToOneField("orders.Order", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="api_idempotency_key_once"),
            models.CheckConstraint(condition=~Q(key=""), name="api_idempotency_key_not_empty"),
        ]
        verbose_name = _("API idempotency key")
        verbose_name_plural = _("API idempotency keys")

    def __str__(self) -> str:
        return self.key
