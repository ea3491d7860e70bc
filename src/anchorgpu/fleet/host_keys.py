"""Pinning a host's SSH key: fetch the key a host offers (no login, nothing sent) and, once the operator has
compared its fingerprint with the one the host itself prints (``ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub``
on its console), store it as the host's pinned key. Nothing here trusts a key on first use by itself."""

from __future__ import annotations

import base64
import hashlib
import socket

import paramiko
from django.db import transaction

from anchorgpu.audit.services import audit_record

from .models import Host
from .ssh import HostUnreachable, parse_host_key


def fingerprint(key: paramiko.PKey) -> str:
    """``SHA256:…`` as ``ssh-keygen -l`` prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def fetch_host_key(*, address: str, port: int, timeout: float = 10.0) -> paramiko.PKey:
    """The key the SSH server at ``address:port`` offers (the key exchange only; no authentication)."""
    if not address:
        raise HostUnreachable("the host has no SSH address")
    try:
        sock = socket.create_connection((address, port), timeout=timeout)
    except OSError as exc:
        raise HostUnreachable(f"{address}:{port} unreachable: {exc}") from exc
    transport = paramiko.Transport(sock)
    try:
        transport.banner_timeout = timeout
        transport.start_client(timeout=timeout)
        return transport.get_remote_server_key()
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise HostUnreachable(f"{address}:{port} did not complete an SSH key exchange: {exc}") from exc
    finally:
        transport.close()


def key_line(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.get_base64()}"


@transaction.atomic
def host_pin_key(*, host: Host, key: str, actor: str) -> Host:
    """Store ``key`` (one OpenSSH public key line) as the host's pinned key; raises ``ValueError`` for a bad line."""
    parsed = parse_host_key(key)
    line = f"{parsed.get_name()} {parsed.get_base64()}"
    locked = Host.objects.select_for_update().get(pk=host.pk)
    old = locked.host_key
    if old.strip() != line:
        locked.host_key = line
        locked.save(update_fields=["host_key"])
        audit_record(actor=actor, action="host_key_pinned", obj=locked, data={
            "fingerprint": fingerprint(parsed), "replaced": bool(old.strip())})
    return locked
