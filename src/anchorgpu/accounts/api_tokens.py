"""Bearer tokens for the JSON API: made and revoked by the customer on the
account page, checked on every API request.

A token reads ``agt_<prefix>_<secret>``. The prefix finds the row; only a
SHA-256 hash of the secret is stored, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.audit.services import audit_record

from .models import ApiToken

_PREFIX_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
_TOKEN = re.compile(r"^agt_([a-z0-9]{8})_([A-Za-z0-9_-]{43})$")
MAX_TOKENS = 20  # active tokens per customer
_TOUCH_EVERY = timedelta(minutes=1)  # last_used_at is written at most this often


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


class TooManyTokens(Exception):
    """The customer already has ``MAX_TOKENS`` active tokens."""

    def __init__(self, count: int = MAX_TOKENS):
        self.count = count
        self.message = _("You have %(count)d active tokens; revoke one before making another.") % {"count": count}
        super().__init__(self.message)


def api_token_create(*, user, name: str) -> tuple[ApiToken, str]:
    """Make a token; returns the row and the full token, which is never stored. Refused (``TooManyTokens``)
    when the customer has ``MAX_TOKENS`` active ones: counted with the customer's row locked, so two requests
    at once cannot both pass the limit (on SQLite the transaction holds the write lock from its start)."""
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        if ApiToken.objects.filter(user=user, revoked_at__isnull=True).count() >= MAX_TOKENS:
            raise TooManyTokens()
        for _attempt in range(5):
            prefix = "".join(secrets.choice(_PREFIX_ALPHABET) for _ in range(8))
            if not ApiToken.objects.filter(prefix=prefix).exists():
                break
        secret = secrets.token_urlsafe(32)  # 43 characters
        token = ApiToken.objects.create(user=user, name=name.strip(), prefix=prefix, secret_hash=_hash(secret))
        audit_record(actor=user.get_username(), action="api_token_create", obj=token, data={"name": token.name})
    return token, f"agt_{prefix}_{secret}"


def api_token_revoke(*, token: ApiToken, actor: str) -> ApiToken:
    with transaction.atomic():
        locked = ApiToken.objects.select_for_update().get(pk=token.pk)
        if locked.revoked_at is None:
            locked.revoked_at = timezone.now()
            locked.save(update_fields=["revoked_at"])
            audit_record(actor=actor, action="api_token_revoke", obj=locked, data={"name": locked.name})
    return locked


def token_user(authorization: str):
    """The active user a ``Bearer`` Authorization header stands for, or None."""
    scheme, _space, value = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    match = _TOKEN.match(value.strip())
    if match is None:
        return None
    prefix, secret = match.groups()
    token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
    if token is None or not hmac.compare_digest(token.secret_hash, _hash(secret)):
        return None
    if token.revoked_at is not None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > _TOUCH_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user
