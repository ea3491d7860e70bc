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

from django.db import transaction
from django.utils import timezone

from anchorgpu.audit.services import audit_record

from .models import ApiToken

_PREFIX_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
_TOKEN = re.compile(r"^agt_([a-z0-9]{8})_([A-Za-z0-9_-]{43})$")
MAX_TOKENS = 20  # active tokens per customer
_TOUCH_EVERY = timedelta(minutes=1)  # last_used_at is written at most this often


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def api_token_create(*, user, name: str) -> tuple[ApiToken, str]:
    """Make a token; returns the row and the full token, which is never stored."""
    with transaction.atomic():
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
