"""SSH public keys a customer gives for access: parsed, checked, fingerprinted.

Pure domain code (the ``cryptography`` package parses the key; no Django).
A private key pasted by mistake is refused with the warning that it must be
treated as leaked: it has passed through a web form and our logs' reach.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key

from anchorgpu.messages import DomainError, gettext_noop

MAX_KEYS = 10
MAX_LINE = 16_384  # an 8192-bit RSA key is about 1.4 KB; anything far longer is not a key
MIN_RSA_BITS = 2048
_PRIVATE_MARKERS = ("PRIVATE KEY", "PuTTY-User-Key-File")
_COMMENT_OK = re.compile(r"^[\x20-\x7e]{0,200}$")


class SSHKeyError(DomainError):
    """A key we refuse; ``leaked`` is True when it was a private key."""

    def __init__(self, template: str, *, leaked: bool = False, line: int | None = None, **params):
        super().__init__(template, **params)
        self.leaked = leaked
        self.line = line


@dataclass(frozen=True)
class PublicKey:
    type: str  # e.g. "ssh-ed25519"
    bits: int
    fingerprint: str  # "SHA256:…", as ssh-keygen -l prints it
    comment: str
    line: str  # the normalised authorized_keys line

    @property
    def label(self) -> str:
        return f"{self.type} {self.bits} {self.fingerprint} {self.comment}".strip()


def _bits(key) -> int:
    if isinstance(key, rsa.RSAPublicKey):
        return key.key_size
    if isinstance(key, ec.EllipticCurvePublicKey):
        return key.curve.key_size
    if isinstance(key, ed25519.Ed25519PublicKey):
        return 256
    raise SSHKeyError(gettext_noop("This key type is not accepted; use Ed25519, ECDSA or RSA of at least 2048 bits."))


def parse_key(text: str, *, line: int | None = None) -> PublicKey:
    text = text.strip()
    if any(marker in text for marker in _PRIVATE_MARKERS):
        raise SSHKeyError(gettext_noop("This is a PRIVATE key. Never share it: consider it leaked, delete it, make a "
                                       "new key pair and paste only the public key (the .pub file)."),
                          leaked=True, line=line)
    if len(text) > MAX_LINE:
        raise SSHKeyError(gettext_noop("This line is far too long to be an SSH public key."), line=line)
    parts = text.split(None, 2)
    if len(parts) < 2:
        raise SSHKeyError(gettext_noop("An SSH public key looks like “ssh-ed25519 AAAA… comment”."), line=line)
    key_type, blob_b64 = parts[0], parts[1]
    comment = parts[2].strip() if len(parts) > 2 else ""
    try:
        blob = base64.b64decode(blob_b64, validate=True)
        key = load_ssh_public_key(f"{key_type} {blob_b64}".encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise SSHKeyError(gettext_noop("This is not a valid SSH public key (the key data does not decode)."),
                          line=line) from None
    except Exception:  # cryptography raises UnsupportedAlgorithm for unknown types  # noqa: BLE001
        raise SSHKeyError(gettext_noop("The key type “%(type)s” is not accepted; use Ed25519, ECDSA or RSA."),
                          line=line, type=key_type[:40]) from None
    bits = _bits(key)
    if isinstance(key, rsa.RSAPublicKey) and bits < MIN_RSA_BITS:
        raise SSHKeyError(gettext_noop("This RSA key has %(bits)d bits; use at least %(least)d (or Ed25519)."),
                          line=line, bits=bits, least=MIN_RSA_BITS)
    if not _COMMENT_OK.match(comment):
        raise SSHKeyError(
            gettext_noop("The key's comment must be printable ASCII of at most 200 characters."), line=line
        )
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return PublicKey(type=key_type, bits=bits, fingerprint=f"SHA256:{digest}", comment=comment,
                     line=f"{key_type} {blob_b64}" + (f" {comment}" if comment else ""))


def parse_keys(text: str) -> list[PublicKey]:
    """One key per line; blank lines and ``#`` comments are skipped; no duplicates."""
    if any(marker in text for marker in _PRIVATE_MARKERS):
        raise SSHKeyError(gettext_noop("This contains a PRIVATE key. Never share it: consider it leaked, delete it, "
                                       "make a new key pair and paste only the public key (the .pub file)."),
                          leaked=True)
    keys: list[PublicKey] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        key = parse_key(raw, line=number)
        if any(k.fingerprint == key.fingerprint for k in keys):
            raise SSHKeyError(gettext_noop("Line %(number)d repeats a key given above (%(fingerprint)s)."),
                              line=number, number=number, fingerprint=key.fingerprint)
        keys.append(key)
        if len(keys) > MAX_KEYS:
            raise SSHKeyError(gettext_noop("At most %(most)d keys per order."), line=number, most=MAX_KEYS)
    if not keys:
        raise SSHKeyError(gettext_noop("Give at least one SSH public key."))
    return keys
