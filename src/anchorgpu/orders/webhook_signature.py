"""The signature of the operators' webhooks, and its check for whoever receives them.

Each delivery is a POST whose body is the event as JSON, with the header::

    AnchorGPU-Signature: t=1764687600,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd

``t`` is the Unix time of the attempt and ``v1`` the hex HMAC-SHA256, keyed with the shared secret, of
``"<t>.<body>"`` (the raw bytes received, before any JSON parsing). A receiver recomputes it, compares in
constant time and refuses a ``t`` too far from its own clock (``TOLERANCE``, five minutes), so a captured
delivery cannot be replayed later. Every retry is signed again with its own ``t``; the event id
(``AnchorGPU-Event-Id``, also the body's ``id``) stays the same, so a receiver that saw it already can
answer 2xx and do nothing. Several ``v1=`` entries may appear (reserved for a change of secret); one
matching is enough.

Standard library only: this file can be copied as it is into a receiver (docs/operator-webhooks.md).
"""

from __future__ import annotations

import hashlib
import hmac
import time

HEADER = "AnchorGPU-Signature"
EVENT_ID_HEADER = "AnchorGPU-Event-Id"
EVENT_TYPE_HEADER = "AnchorGPU-Event-Type"
SCHEME = "v1"
TOLERANCE = 300  # seconds


class SignatureError(ValueError):
    """The delivery does not carry a valid, recent signature: answer 400 and drop it."""


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def sign(body: bytes, secret: str, *, timestamp: int | None = None) -> str:
    """The header's value for ``body`` at ``timestamp`` (default: now)."""
    timestamp = int(time.time()) if timestamp is None else int(timestamp)
    return f"t={timestamp},{SCHEME}={_mac(secret, timestamp, body)}"


def verify(body: bytes, header: str | None, secret: str, *, tolerance: int = TOLERANCE,
           now: float | None = None) -> int:
    """Check ``header`` (the ``AnchorGPU-Signature`` received) against the raw ``body``; returns its
    timestamp, or raises ``SignatureError`` saying what is wrong."""
    if not header:
        raise SignatureError(f"no {HEADER} header")
    timestamp, macs = None, []
    for part in header.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            continue
        if name == "t":
            try:
                timestamp = int(value)
            except ValueError:
                raise SignatureError("the timestamp is not a whole number") from None
        elif name == SCHEME:
            macs.append(value)
    if timestamp is None:
        raise SignatureError("the signature has no timestamp (t=)")
    if not macs:
        raise SignatureError(f"the signature has no {SCHEME}= entry")
    now = time.time() if now is None else now
    if abs(now - timestamp) > tolerance:
        raise SignatureError(f"the timestamp is {int(now - timestamp)} s from now, more than {tolerance} s")
    expected = _mac(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, mac) for mac in macs):
        raise SignatureError("the signature does not match the body")
    return timestamp
