"""Operators' two-factor sign-in: enrol an authenticator (TOTP), check a code or
a recovery code, make new recovery codes, turn it off; and the session flag that
says this session passed the second factor.

The codes themselves are computed by ``anchorgpu.accounts.totp`` (pure). Recovery
codes are stored as SHA-256 hashes salted per user (``TwoFactorDevice.recovery_salt``),
not with the password hashers: they are random, and a slow hash per code would
make each check cost seconds. Each check locks the device row, so a code raced
from two requests is accepted once. Enrolment, turning it off, new recovery
codes and a recovery code used are written to the audit log; refused codes are
logged (who and why, never the code)."""

from __future__ import annotations

import logging
import secrets
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from anchorgpu.audit.services import audit_record

from . import totp
from .models import RecoveryCode, TwoFactorDevice

log = logging.getLogger("anchorgpu.security")

ISSUER = "AnchorGPU"
SESSION_VERIFIED = "two_factor_verified"  # the user id whose second factor this session passed


def _now() -> datetime:
    """The time codes are checked at (one place, so a test can move it on by a step or two)."""
    return timezone.now()


def admin_requires_two_factor() -> bool:
    """ANCHORGPU_ADMIN_2FA: on in production unless turned off, off elsewhere unless turned on."""
    return bool(getattr(settings, "ANCHORGPU_ADMIN_2FA", False))


def confirmed_device(user) -> TwoFactorDevice | None:
    if user is None or not user.is_authenticated:
        return None
    return TwoFactorDevice.objects.filter(user=user, confirmed_at__isnull=False).first()


def session_is_verified(request) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and request.session.get(SESSION_VERIFIED) == user.pk)


def session_mark_verified(request, user) -> None:
    """The session passed the second factor: a new session key (the old one, if someone saw it, no longer
    counts), then the flag."""
    request.session.cycle_key()
    request.session[SESSION_VERIFIED] = user.pk


def provisioning_uri(device: TwoFactorDevice) -> str:
    return totp.provisioning_uri(secret=device.secret, account=device.user.get_username(), issuer=ISSUER)


def two_factor_start(*, user) -> TwoFactorDevice:
    """The user's device, made unconfirmed with a fresh secret if there is none yet."""
    device, _created = TwoFactorDevice.objects.get_or_create(user=user, defaults={"secret": totp.new_secret()})
    return device


def two_factor_restart(*, user) -> TwoFactorDevice:
    """A new secret for an enrolment not yet confirmed (e.g. the old QR code was seen by someone else)."""
    with transaction.atomic():
        device = two_factor_start(user=user)
        device = TwoFactorDevice.objects.select_for_update().get(pk=device.pk)
        if device.confirmed_at is None:
            device.secret = totp.new_secret()
            device.last_used_step = None
            device.save(update_fields=["secret", "last_used_step"])
    return device


def _new_recovery_codes(device: TwoFactorDevice) -> list[str]:
    """Replace the device's recovery codes: a new salt, new codes; returns them in clear, once."""
    codes = totp.new_recovery_codes()
    device.recovery_salt = secrets.token_hex(16)
    device.save(update_fields=["recovery_salt"])
    RecoveryCode.objects.filter(device=device).delete()
    RecoveryCode.objects.bulk_create([
        RecoveryCode(device=device, code_hash=totp.recovery_code_hash(totp.clean_recovery_code(code),
                                                                      device.recovery_salt))
        for code in codes])
    return codes


def _refused(user, purpose: str, why: str) -> None:
    log.warning("two-factor code refused: user %s, %s, %s", user.pk, purpose, why)


def two_factor_confirm(*, user, code: str, now: datetime | None = None) -> list[str] | None:
    """Confirm the enrolment with a code from the app; returns the new recovery codes, or None when the
    code is wrong (or there is nothing to confirm)."""
    now = now or _now()
    with transaction.atomic():
        device = TwoFactorDevice.objects.select_for_update().filter(user=user, confirmed_at__isnull=True).first()
        if device is None:
            return None
        step = totp.matching_step(totp.secret_bytes(device.secret), code, now.timestamp(),
                                  last_used_step=device.last_used_step)
        if step is None:
            _refused(user, "enrolment", "wrong code")
            return None
        device.confirmed_at, device.last_used_step = now, step
        device.save(update_fields=["confirmed_at", "last_used_step"])
        codes = _new_recovery_codes(device)
        audit_record(actor=user.get_username(), action="two_factor_enrol", obj=user, to_state="on",
                     data={"recovery_codes": len(codes)})
    return codes


def _verify_locked(device: TwoFactorDevice, *, user, code: str, purpose: str, now: datetime) -> str | None:
    typed = totp.clean_code(code)
    if typed is not None:
        step = totp.matching_step(totp.secret_bytes(device.secret), typed, now.timestamp(),
                                  last_used_step=device.last_used_step)
        if step is None:
            _refused(user, purpose, "wrong, expired or already used code")
            return None
        device.last_used_step = step
        device.save(update_fields=["last_used_step"])
        return "code"
    recovery = totp.clean_recovery_code(code)
    if recovery is not None and device.recovery_salt:
        used = RecoveryCode.objects.filter(device=device, used_at__isnull=True,
                                           code_hash=totp.recovery_code_hash(recovery, device.recovery_salt))
        if used.update(used_at=now) == 1:
            left = RecoveryCode.objects.filter(device=device, used_at__isnull=True).count()
            audit_record(actor=user.get_username(), action="two_factor_recovery_code_used", obj=user,
                         reason=purpose, data={"recovery_codes_left": left})
            return "recovery code"
    _refused(user, purpose, "wrong or used recovery code" if recovery is not None else "not a code")
    return None


def two_factor_verify(*, user, code: str, purpose: str, now: datetime | None = None) -> str | None:
    """Check a code from the app, or a recovery code (which is then spent); returns what was used
    ("code" or "recovery code"), or None when refused."""
    now = now or _now()
    with transaction.atomic():
        device = _confirmed_device_locked(user)
        if device is None:
            return None
        return _verify_locked(device, user=user, code=code, purpose=purpose, now=now)


def _confirmed_device_locked(user) -> TwoFactorDevice | None:
    """The user's confirmed device, its row locked until the transaction ends (one code check at a time)."""
    return TwoFactorDevice.objects.select_for_update().filter(user=user, confirmed_at__isnull=False).first()


def two_factor_disable(*, user, code: str, now: datetime | None = None) -> bool:
    """Turn two-factor sign-in off; needs a current code or a recovery code."""
    now = now or _now()
    with transaction.atomic():
        device = _confirmed_device_locked(user)
        if device is None:
            return False
        used = _verify_locked(device, user=user, code=code, purpose="turning it off", now=now)
        if used is None:
            return False
        device.delete()
        audit_record(actor=user.get_username(), action="two_factor_disable", obj=user, from_state="on",
                     to_state="off", data={"with": used})
    return True


def recovery_codes_renew(*, user, code: str, now: datetime | None = None) -> list[str] | None:
    """New recovery codes (the old ones stop working); needs a current code or a recovery code."""
    now = now or _now()
    with transaction.atomic():
        device = _confirmed_device_locked(user)
        if device is None:
            return None
        used = _verify_locked(device, user=user, code=code, purpose="new recovery codes", now=now)
        if used is None:
            return None
        codes = _new_recovery_codes(device)
        audit_record(actor=user.get_username(), action="two_factor_recovery_codes_renew", obj=user,
                     data={"recovery_codes": len(codes), "with": used})
    return codes


def recovery_codes_left(device: TwoFactorDevice) -> int:
    return device.recovery_codes.filter(used_at__isnull=True).count()


def two_factor_reset(*, user, actor: str, reason: str) -> bool:
    """An operator who lost both the app and the recovery codes: someone with shell access to the shop turns
    it off for them (``anchorgpu two_factor_reset``); they set it up again at their next visit to the admin.
    Returns False when the user had nothing to reset."""
    with transaction.atomic():
        deleted, _counts = TwoFactorDevice.objects.filter(user=user).delete()
        if deleted:
            audit_record(actor=actor, action="two_factor_reset", obj=user, to_state="off", reason=reason)
    return bool(deleted)
