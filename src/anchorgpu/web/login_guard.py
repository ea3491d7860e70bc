"""Log-in under attack: lock the guessing, not the account.

Failed log-ins are counted per address and per account (``ops.ratelimit``); each attempt takes both slots
before its password is checked and a right password gives them back, so guesses sent at once are decided
one after the other too. An address past its limit
(20 failures in 15 minutes) is refused: that is the guesser. An account past its limit (10 failures in
15 minutes, from anywhere) is not locked, since ten wrong passwords from ten addresses would then keep
its owner out: its password is still checked, and a right one does not sign in by itself. An account
with two-factor sign-in gives its code as always; any other account is sent a one-time code by e-mail
(six digits, valid for the ten minutes of the password step, checked under the two-factor limits: 5 per
account in 15 minutes). A guesser who finds the password thus still needs the owner's mailbox, which
is all a password reset needs anyway. With e-mail turned off (``ANCHORGPU_EMAIL_DISABLED``) no code can
be sent, and the account's sign-ins wait until its window has room again.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string

log = logging.getLogger("anchorgpu.security")

SENT, OFF, FAILED = "sent", "off", "failed"


def _digest(user_pk: int, code: str) -> str:
    return hmac.new(settings.SECRET_KEY.encode(), f"login-email-code:{user_pk}:{code}".encode(),
                    hashlib.sha256).hexdigest()


def email_code_send(*, user, pending: dict) -> str:
    """Make a code, keep its keyed hash in ``pending`` (the session's password step) and e-mail it to the
    account's address. Returns SENT, OFF (this shop sends no e-mail) or FAILED (the mail server refused)."""
    if getattr(settings, "ANCHORGPU_EMAIL_DISABLED", False):
        return OFF
    code = f"{secrets.randbelow(10**6):06d}"
    context = {"user": user, "code": code, "site_url": settings.ANCHORGPU_SITE_URL.rstrip("/")}
    subject = " ".join(render_to_string("accounts/login_code_subject.txt", context).split())
    body = render_to_string("accounts/login_code_email.txt", context)
    try:
        send_mail(subject, body, None, [user.email or user.get_username()])
    except Exception as exc:  # noqa: BLE001 - any mail server failure: the page says so, the log says why
        log.error("sign-in code e-mail to user %s not sent: %s", user.pk, type(exc).__name__)
        return FAILED
    pending["email_code"] = _digest(user.pk, code)
    log.warning("sign-in code e-mailed: user %s, too many failed log-ins on the account", user.pk)
    return SENT


def email_code_matches(*, user, pending: dict, code: str) -> bool:
    expected = pending.get("email_code") or ""
    return bool(expected) and hmac.compare_digest(expected, _digest(user.pk, code.strip()))
