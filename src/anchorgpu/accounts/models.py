"""What an account keeps: API tokens, the operators' two-factor devices with their recovery codes, and saved
SSH keys. The tables keep the names they had in the ``web`` app (``Meta.db_table``); migration
``web.0004_models_to_accounts_and_api`` moved the models here without touching the database."""

from __future__ import annotations

from django.conf import settings
from django.db import models
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
        db_table = "web_apitoken"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="api_token_by_user")]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.name} (agt_{self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class TwoFactorDevice(models.Model):
    """A staff user's authenticator (TOTP, RFC 6238: SHA-1, 6 digits, 30 s; ``anchorgpu.accounts.totp``).
    Made unconfirmed when the enrolment page is first shown; it counts only once ``confirmed_at`` is
    set, by a correct code. The secret is kept as base32 (it must be, to compute the codes); the
    last accepted time step refuses a code used twice. ``recovery_salt`` salts the SHA-256 hashes
    of the recovery codes."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="two_factor")
    secret = models.CharField(_("secret (base32)"), max_length=64)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    confirmed_at = models.DateTimeField(_("confirmed"), null=True, blank=True)
    last_used_step = models.BigIntegerField(_("last time step used"), null=True, blank=True)
    recovery_salt = models.CharField(_("salt of the recovery codes"), max_length=32, blank=True)

    class Meta:
        db_table = "web_twofactordevice"
        verbose_name = _("two-factor device")
        verbose_name_plural = _("two-factor devices")

    def __str__(self) -> str:
        return f"TOTP of user #{self.user_id}"

    @property
    def is_confirmed(self) -> bool:
        return self.confirmed_at is not None


class RecoveryCode(models.Model):
    """One single-use recovery code of a two-factor device. Only its SHA-256 hash, salted with the
    device's ``recovery_salt``, is stored; the codes are shown once, when they are made."""

    device = models.ForeignKey(TwoFactorDevice, on_delete=models.CASCADE, related_name="recovery_codes")
    code_hash = models.CharField(_("hash of the code"), max_length=64)
    used_at = models.DateTimeField(_("used"), null=True, blank=True)

    class Meta:
        db_table = "web_recoverycode"
        constraints = [models.UniqueConstraint(fields=["device", "code_hash"], name="recovery_code_once")]
        verbose_name = _("recovery code")
        verbose_name_plural = _("recovery codes")

    def __str__(self) -> str:
        return f"recovery code #{self.pk}"


class SavedKey(models.Model):
    """An SSH public key a customer keeps on their account, to tick at checkout instead of pasting it.
    Parsed and checked as checkout checks keys (``anchorgpu.orders.ssh_keys``); an order copies the keys
    it is given into its own ``OrderKey`` rows, so removing a saved key never changes an order."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_keys")
    label = models.CharField(_("label"), max_length=60)
    key_type = models.CharField(_("type"), max_length=64)
    bits = models.PositiveIntegerField(_("bits"))
    fingerprint = models.CharField(_("fingerprint"), max_length=80)
    comment = models.CharField(_("comment"), max_length=200, blank=True)
    public_key = models.TextField(_("public key"))
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        db_table = "web_savedkey"
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["user", "fingerprint"], name="saved_key_once_per_user")]
        verbose_name = _("saved SSH key")
        verbose_name_plural = _("saved SSH keys")

    def __str__(self) -> str:
        return f"{self.label} ({self.key_type} {self.fingerprint})"
