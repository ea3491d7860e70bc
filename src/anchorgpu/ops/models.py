from django.db import models
from django.utils.translation import gettext_lazy as _


class SweepRecord(models.Model):
    """How the worker's sweeps have been going (one row per sweep), for /metrics and the operators."""

    name = models.CharField(_("sweep"), max_length=60, unique=True)
    runs = models.PositiveBigIntegerField(_("runs"), default=0)
    failures = models.PositiveBigIntegerField(_("failures"), default=0)
    last_started_at = models.DateTimeField(_("last started"), null=True, blank=True)
    last_seconds = models.FloatField(_("last run took (s)"), default=0.0)
    total_seconds = models.FloatField(_("time spent in all runs (s)"), default=0.0)
    last_result = models.BigIntegerField(_("last result"), null=True, blank=True)
    last_error = models.TextField(_("last error"), blank=True)
    last_failed_at = models.DateTimeField(_("last failed"), null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("worker sweep")
        verbose_name_plural = _("worker sweeps")

    def __str__(self) -> str:
        return self.name


class RateEvent(models.Model):
    """One attempt at a rate-limited action (see ``ops.ratelimit``); the key is a keyed hash, never the
    address or e-mail itself. Purged by the worker once older than the longest window."""

    scope = models.CharField(_("scope"), max_length=40)
    key = models.CharField(_("key"), max_length=64)
    at = models.DateTimeField(_("at"))
    undecided = models.BooleanField(
        _("still being decided"), default=False,
        help_text=_("Taken before the check it counts (a password): given back if the check passes, kept as a "
                    "failure otherwise. Counted as a failure once older than a few seconds."))

    class Meta:
        indexes = [models.Index(fields=["scope", "key", "at"], name="rate_event_window")]
        verbose_name = _("rate-limited attempt")
        verbose_name_plural = _("rate-limited attempts")

    def __str__(self) -> str:
        return f"{self.scope} {self.key[:12]}… {self.at:%Y-%m-%d %H:%M:%S}"


class RateKey(models.Model):
    """The row a rate-limited key's deciders take turns on (``ops.ratelimit``): a request locks it, counts
    the attempts in the window, decides and records its own before the next one may look. Purged with the
    attempts once unused for longer than the longest window."""

    scope = models.CharField(_("scope"), max_length=40)
    key = models.CharField(_("key"), max_length=64)
    used_at = models.DateTimeField(_("last used"))

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "key"], name="rate_key_once")]
        verbose_name = _("rate-limited key")
        verbose_name_plural = _("rate-limited keys")

    def __str__(self) -> str:
        return f"{self.scope} {self.key[:12]}…"
