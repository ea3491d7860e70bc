"""Time-based one-time passwords (RFC 6238 over RFC 4226's HOTP), written here
from the two RFCs: HMAC-SHA-1, 6 digits, 30-second steps counted from the Unix
epoch. Pure Python, no Django: the operators' two-factor sign-in
(``anchorgpu.accounts.two_factor``) keeps the secret and the last step used; this
module only computes and compares codes.

A code is accepted for the current step and one step either side (clocks
drift, and people type slowly), and only for a step later than the last one
accepted: a code, or any code of an earlier step, cannot be used twice.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import struct
from urllib.parse import quote, urlencode

PERIOD = 30  # seconds per step
DIGITS = 6
WINDOW = 1  # steps accepted either side of the current one
SECRET_BYTES = 20  # 160 bits, the HMAC-SHA-1 block output size RFC 4226 recommends

_SPACES = re.compile(r"[\s-]+")
_BASE32 = re.compile(r"^[A-Z2-7]+=*$")


def new_secret() -> str:
    """A fresh random secret, as unpadded base32 (what authenticator apps expect)."""
    return base64.b32encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii").rstrip("=")


def secret_bytes(secret: str) -> bytes:
    """The key a base32 secret stands for; spaces, dashes and lower case are allowed, padding optional.
    Raises ``ValueError`` for anything else."""
    text = _SPACES.sub("", secret or "").upper()
    if not text or not _BASE32.match(text):
        raise ValueError("not a base32 secret")
    text = text.rstrip("=")
    return base64.b32decode(text + "=" * (-len(text) % 8))


def hotp(key: bytes, counter: int, *, digits: int = DIGITS) -> str:
    """RFC 4226: HMAC-SHA-1 of the 8-byte big-endian counter, dynamically truncated to 31 bits,
    then the last ``digits`` decimal digits, zero-padded."""
    if counter < 0:
        raise ValueError("the counter cannot be negative")
    if not 6 <= digits <= 10:
        raise ValueError("codes have 6 to 10 digits")
    mac = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    start = mac[-1] & 0x0F
    number = struct.unpack(">I", mac[start:start + 4])[0] & 0x7FFFFFFF
    return str(number % 10 ** digits).zfill(digits)


def time_step(unix_time: float, *, period: int = PERIOD) -> int:
    """The step a moment falls in: whole periods since the epoch (T0 = 0)."""
    return int(unix_time // period)


def totp(key: bytes, unix_time: float, *, digits: int = DIGITS, period: int = PERIOD) -> str:
    return hotp(key, time_step(unix_time, period=period), digits=digits)


def clean_code(text: str, *, digits: int = DIGITS) -> str | None:
    """The code a person typed, without spaces; None unless it is exactly ``digits`` digits."""
    code = _SPACES.sub("", text or "")
    if len(code) != digits or not code.isascii() or not code.isdigit():
        return None
    return code


def matching_step(key: bytes, code: str, unix_time: float, *, last_used_step: int | None,
                  window: int = WINDOW, digits: int = DIGITS, period: int = PERIOD) -> int | None:
    """The step whose code ``code`` is, within ``window`` steps of now and after ``last_used_step``;
    None if there is none (wrong, too old, too early, or already used). Every candidate is compared,
    in constant time, whatever matched first."""
    typed = clean_code(code, digits=digits)
    if typed is None:
        return None
    now = time_step(unix_time, period=period)
    found = None
    for step in range(now - window, now + window + 1):
        if step < 0 or (last_used_step is not None and step <= last_used_step):
            continue
        if hmac.compare_digest(hotp(key, step, digits=digits), typed) and found is None:
            found = step
    return found


def provisioning_uri(*, secret: str, account: str, issuer: str) -> str:
    """The ``otpauth://totp/…`` address an authenticator app reads from the QR code: the label is
    "issuer:account", and the parameters say the algorithm, digits and period outright."""
    label = quote(f"{issuer}:{account}", safe=":@")
    query = urlencode({"secret": secret, "issuer": issuer, "algorithm": "SHA1", "digits": DIGITS,
                       "period": PERIOD}, quote_via=quote)
    return f"otpauth://totp/{label}?{query}"


def grouped(secret: str, size: int = 4) -> str:
    """A secret in groups of four characters, easier to type by hand."""
    return " ".join(secret[i:i + size] for i in range(0, len(secret), size))


# --- recovery codes -----------------------------------------------------------------------------

RECOVERY_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: read off paper without doubt
RECOVERY_LENGTH = 12  # 12 characters of a 31-letter alphabet: about 59 bits each
RECOVERY_COUNT = 10


def new_recovery_codes(count: int = RECOVERY_COUNT) -> list[str]:
    """Fresh one-time recovery codes, shown as three groups of four (``abcd-efgh-jkmn``)."""
    codes = set()
    while len(codes) < count:
        raw = "".join(secrets.choice(RECOVERY_ALPHABET) for _ in range(RECOVERY_LENGTH))
        codes.add("-".join(raw[i:i + 4] for i in range(0, RECOVERY_LENGTH, 4)))
    return sorted(codes)


def clean_recovery_code(text: str) -> str | None:
    """A recovery code as typed (any case, with or without dashes and spaces), reduced to its
    characters; None if it cannot be one."""
    code = _SPACES.sub("", text or "").lower()
    if len(code) != RECOVERY_LENGTH or any(c not in RECOVERY_ALPHABET for c in code):
        return None
    return code


def recovery_code_hash(code: str, salt: str) -> str:
    """SHA-256 of the per-user salt and the cleaned code, in hex. The codes are random (about 59
    bits), so a fast hash with a salt suffices; a password hasher would make every check slow."""
    return hashlib.sha256(f"{salt}:{code}".encode("ascii")).hexdigest()
