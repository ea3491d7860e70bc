"""Log-in under attack: lock the guessing, not the account.

Every log-in attempt is counted before its password is checked (``ops.ratelimit``, under the key's row lock,
so attempts sent at once are decided one after the other too):

* per address: 20 failures in 15 minutes, then that address is refused (429). Only failures: a right password
  gives its slot back, and while slots are still being checked (undecided) a new attempt waits for them
  (``LOGIN_SETTLE_SECONDS``) instead of being refused, so customers signing in together behind one address
  never lock each other, or an operator, out. A success gives back only its own slot: the failures of other
  accounts from the address still count (credential stuffing from one address stays limited). A browser that
  is a known device (below) of the account typed is not refused by the address's limit (its owner is not held
  up by the failures of others behind the same address); its attempt still counts there, and in the account's;
* per account, keyed by the username typed, from anywhere: 10 failures in 15 minutes or 30 in 24 hours.
  Never refused (ten wrong passwords from ten addresses would lock the owner out); past either window the
  account is *under attack*.

Not under attack, the log-in is the usual one; a right password gives both slots back and signs in, or asks
an operator's two-factor code.

Under attack, from a browser that is not a known device of that account (below), the answer does not depend
on the password, so a guesser with many addresses learns nothing from it:

* an account with two-factor sign-in on (a confirmed TOTP device): right and wrong passwords alike go to the
  code step's authenticator page; after a wrong one it is a decoy (``DECOY``: nobody is signed in, every code
  is refused as a wrong one is, counted under the two-factor limits of the account and the address);
* any other name typed, an account or not: each attempt first takes a slot of ``login_code_email`` (3 per
  account in 15 minutes; past it, everyone gets the same 429 with the wait); then a right password is e-mailed
  a 6-digit code (valid for the ten minutes of the password step, checked under the two-factor limits: 5 per
  account and 20 per address in 15 minutes) and a wrong one gets a decoy; both go to the e-mail code page. No
  e-mail is sent for a wrong password, and a mail server's failure is logged, not shown (the page would tell);
* on that path with e-mail turned off (``ANCHORGPU_EMAIL_DISABLED``) no code can be sent: right and wrong
  alike get the same 429, with the account's wait, until its windows have room again;
* no slot is given back at the password step (that too would tell, through the windows, when the guess was
  right); a right code gives back the password step's two.

A guesser who finds the password thus still needs the owner's mailbox (all a password reset needs anyway) or
their authenticator. The guesses that get an answer are those made while the account is not under attack: at
most 10 in 15 minutes and 30 in 24 hours, so about 30 a day (some 11,000 a year) against one account,
whatever the number of addresses. A decoy's codes count for the account typed, or for a stand-in keyed by
the name when there is no account, so the two-factor limits answer as they would for a real code step.

Known devices (OWASP's "device cookies"): a complete sign-in (the password alone, or the code step passed)
sets a signed cookie (``DEVICE_COOKIE``, 90 days, HttpOnly, SameSite=Lax, Secure with the session's cookie)
holding the user and a hash of their session auth hash, so a password change voids it. Under attack, a
browser with a valid one for the account typed is handled as if the account were not under attack (the owner
signs in, also with e-mail off); its failures still count. A browser remembers the last account signed in.

Not hidden: under attack, the kind of code page says whether the name typed is an account with two-factor on
(from the name, never the password); a right password's answer takes the time of sending its e-mail (sent
within the request); and a guesser can keep an account under attack with its e-mailed codes used up, so that
an owner without a known device waits, as with e-mail off.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.mail import send_mail
from django.template.loader import render_to_string
from django.utils.crypto import salted_hmac

log = logging.getLogger("anchorgpu.security")

SENT, OFF, FAILED = "sent", "off", "failed"
DECOY = "decoy"  # in a password step's pending session: the password was wrong, nobody is behind it
DEVICE_COOKIE = "anchorgpu_device"
# The salts keep the module's old name (it lived in anchorgpu.web): a new one would forget every remembered device.
DEVICE_SALT = "anchorgpu.web.login_guard.known-device"
DECOY_SALT = "anchorgpu.web.login_guard.decoy"
DEVICE_SECONDS = 90 * 24 * 3600
# How long a log-in waits for the attempts from its address still being checked (a password hash takes about
# 0.1 s) before the address's full window refuses it.
LOGIN_SETTLE_SECONDS = 5.0


def typed_username(request) -> str:
    """The name typed in the log-in form, as the form and the account's limits read it."""
    return (request.POST.get("username") or "").strip().lower()


def account_for(username: str):
    """The account the log-in form would check the password of, or None."""
    if not username:
        return None
    model = get_user_model()
    return model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()


def email_off() -> bool:
    return bool(getattr(settings, "ANCHORGPU_EMAIL_DISABLED", False))


class RateAs:
    """Whom a decoy's codes are counted for under the two-factor limits: the account typed when there is one
    (the limits then answer as they would for its real code step), otherwise a stand-in keyed by the name."""

    is_authenticated = True

    def __init__(self, pk: int | str):
        self.pk = pk


def decoy_rate_as(account, username: str) -> int | str:
    if account is not None:
        return account.pk
    return "typed:" + salted_hmac(DECOY_SALT, username).hexdigest()


def _device_hash(user) -> str:
    return salted_hmac(DEVICE_SALT, user.get_session_auth_hash()).hexdigest()


def device_remember(response, user) -> None:
    """After a complete sign-in: this browser is a known device of ``user`` (until their password changes)."""
    value = signing.dumps({"u": user.pk, "h": _device_hash(user)}, salt=DEVICE_SALT)
    response.set_cookie(DEVICE_COOKIE, value, max_age=DEVICE_SECONDS, httponly=True, samesite="Lax",
                        secure=bool(getattr(settings, "SESSION_COOKIE_SECURE", False)))


def device_known(request, account) -> bool:
    """Whether this browser holds a valid known-device cookie of ``account``."""
    value = request.COOKIES.get(DEVICE_COOKIE)
    if account is None or not value:
        return False
    try:
        data = signing.loads(value, salt=DEVICE_SALT, max_age=DEVICE_SECONDS)
    except signing.BadSignature:  # also an expired one
        return False
    if not isinstance(data, dict) or data.get("u") != account.pk:
        return False
    return hmac.compare_digest(str(data.get("h", "")), _device_hash(account))


def _digest(user_pk: int, code: str) -> str:
    return hmac.new(settings.SECRET_KEY.encode(), f"login-email-code:{user_pk}:{code}".encode(),
                    hashlib.sha256).hexdigest()


def email_code_send(*, user, pending: dict) -> str:
    """Make a code, keep its keyed hash in ``pending`` (the session's password step) and e-mail it to the
    account's address. Returns SENT, OFF (this shop sends no e-mail) or FAILED (the mail server refused)."""
    if email_off():
        return OFF
    code = f"{secrets.randbelow(10**6):06d}"
    context = {"user": user, "code": code, "site_url": settings.ANCHORGPU_SITE_URL.rstrip("/")}
    subject = " ".join(render_to_string("accounts/login_code_subject.txt", context).split())
    body = render_to_string("accounts/login_code_email.txt", context)
    try:
        send_mail(subject, body, None, [user.email or user.get_username()])
    except Exception as exc:  # noqa: BLE001 - any mail server failure: logged, never shown (it would tell)
        log.error("sign-in code e-mail to user %s not sent: %s", user.pk, type(exc).__name__)
        return FAILED
    pending["email_code"] = _digest(user.pk, code)
    log.warning("sign-in code e-mailed: user %s, too many failed log-ins on the account", user.pk)
    return SENT


def email_code_matches(*, user, pending: dict, code: str) -> bool:
    expected = pending.get("email_code") or ""
    if user is None or pending.get(DECOY):
        return False
    return bool(expected) and hmac.compare_digest(expected, _digest(user.pk, code.strip()))
