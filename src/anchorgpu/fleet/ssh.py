"""SSH to the operator's GPU hosts: the one way the shop runs anything on them.

- The host's key is pinned (``Host.host_key``). A host that answers with another key is refused before
  anything is sent (``HostKeyMismatch``); one with no pinned key is refused too (the operator pins it with
  ``ssh-keyscan`` first; trust-on-first-use would let anyone in the path answer first).
- The operator's private key comes from the file or the secret the settings name, read when a connection is
  opened; it is never stored in the database.
- Commands are argument lists. Each argument is quoted with ``shlex.quote`` and the line is joined here, so a
  customer's text (a key comment, an order reference) can never become shell syntax on the host.

paramiko does the protocol. Nothing here touches the database: callers hold no transaction or row lock
while a command runs (DESIGN §6).
"""

from __future__ import annotations

import io
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

import paramiko
from django.conf import settings


class SSHError(Exception):
    """A host could not be reached or a command on it failed. The message says which host and what."""


class HostUnreachable(SSHError):
    """No connection: the address does not answer, the link is down, or the login was refused."""


class HostKeyMismatch(SSHError):
    """The host answered with a key other than the pinned one (or none is pinned): nothing was sent to it."""


class CommandFailed(SSHError):
    def __init__(self, message: str, result: CommandResult):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class Target:
    """Where to connect: read from a ``Host`` row, so no ORM object crosses into network code."""

    name: str
    address: str
    port: int
    user: str
    host_key: str

    @classmethod
    def of(cls, host) -> Target:
        return cls(name=host.name, address=host.ssh_address, port=host.ssh_port, user=host.ssh_user,
                   host_key=(host.host_key or "").strip())


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    def brief(self, limit: int = 400) -> str:
        """The command and the end of its output, for an error message or a step's record."""
        text = (self.stderr.strip() or self.stdout.strip())[-limit:]
        return f"`{shlex.join(self.argv)[:200]}` exited {self.exit_status}: {text}"


def command_line(argv: Sequence[str]) -> str:
    """One shell line from an argument list, every argument quoted."""
    if not argv:
        raise ValueError("empty command")
    return " ".join(shlex.quote(str(a)) for a in argv)


def parse_host_key(line: str) -> paramiko.PKey:
    """A pinned key from one OpenSSH line: ``type base64 [comment]``, or a known_hosts line
    (``name type base64``) as ``ssh-keyscan`` prints it."""
    parts = (line or "").split()
    if len(parts) >= 3 and not parts[0].startswith(("ssh-", "ecdsa-", "sk-")):
        parts = parts[1:]  # a known_hosts line: drop the host name
    if len(parts) < 2:
        raise ValueError("a host key is one line: its type and its base64 body, e.g. 'ssh-ed25519 AAAA…'")
    try:
        return paramiko.PKey.from_type_string(parts[0], _b64(parts[1]))
    except Exception as exc:  # noqa: BLE001 - paramiko raises several kinds for a bad key
        raise ValueError(f"not a public key paramiko can read: {exc}") from exc


def _b64(text: str) -> bytes:
    import base64
    import binascii

    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError("the key's body is not base64") from exc


def operator_key() -> paramiko.PKey:
    """The operator's private key, from ``ANCHORGPU_HOST_SSH_KEY_FILE`` or ``ANCHORGPU_HOST_SSH_KEY``."""
    path = getattr(settings, "ANCHORGPU_HOST_SSH_KEY_FILE", "")
    text = getattr(settings, "ANCHORGPU_HOST_SSH_KEY", "")
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise SSHError(f"cannot read the operator's SSH key file {path}: {exc.strerror}") from exc
    if not text.strip():
        raise SSHError("no operator SSH key: set ANCHORGPU_HOST_SSH_KEY_FILE (or ANCHORGPU_HOST_SSH_KEY)")
    for kind in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return kind.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError):
            continue
    raise SSHError("the operator's SSH key is not an unencrypted OpenSSH private key (ed25519, ECDSA or RSA)")


def _known_name(target: Target) -> str:
    return target.address if target.port == 22 else f"[{target.address}]:{target.port}"


class Connection:
    """One SSH connection to one host; use as a context manager."""

    def __init__(self, target: Target, *, key: paramiko.PKey | None = None, timeout: float | None = None):
        self.target = target
        self.timeout = float(timeout or getattr(settings, "ANCHORGPU_HOST_SSH_TIMEOUT", 30))
        self._key = key
        self._client: paramiko.SSHClient | None = None

    def __enter__(self) -> Connection:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        """Connect; a connection already open is kept (so ``with connect(host) as conn:`` connects once)."""
        if self._client is not None:
            return
        t = self.target
        if not t.address:
            raise HostUnreachable(f"host {t.name} has no SSH address")
        if not t.host_key:
            raise HostKeyMismatch(f"host {t.name} has no pinned host key: pin it (ssh-keyscan) before connecting")
        try:
            pinned = parse_host_key(t.host_key)
        except ValueError as exc:
            raise HostKeyMismatch(f"host {t.name}: the pinned host key cannot be read ({exc})") from exc
        client = paramiko.SSHClient()
        client.get_host_keys().add(_known_name(t), pinned.get_name(), pinned)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(t.address, port=t.port, username=t.user, pkey=self._key or operator_key(),
                           timeout=self.timeout, banner_timeout=self.timeout, auth_timeout=self.timeout,
                           allow_agent=False, look_for_keys=False, channel_timeout=self.timeout)
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyMismatch(
                f"host {t.name} ({t.address}:{t.port}) answered with host key {exc.key.get_fingerprint().hex()} "
                f"({exc.key.get_name()}), not the pinned one: refused") from exc
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):  # the host offered a key of another type than the pinned one
                raise HostKeyMismatch(f"host {t.name} ({t.address}:{t.port}) did not offer the pinned host key "
                                      f"({pinned.get_name()}): refused") from exc
            raise HostUnreachable(f"host {t.name} ({t.address}:{t.port}): {exc}") from exc
        except (OSError, EOFError) as exc:
            client.close()
            raise HostUnreachable(f"host {t.name} ({t.address}:{t.port}) unreachable: {exc}") from exc
        self._client = client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def run(self, argv: Sequence[str], *, check: bool = True, timeout: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        """Run one command; raise ``CommandFailed`` on a non-zero exit when ``check``."""
        if self._client is None:
            raise SSHError("not connected")
        line = command_line(argv)
        try:
            stdin_f, stdout_f, stderr_f = self._client.exec_command(line, timeout=timeout or self.timeout)
            if stdin is not None:
                stdin_f.write(stdin)
            stdin_f.channel.shutdown_write()
            out = stdout_f.read().decode("utf-8", "replace")
            err = stderr_f.read().decode("utf-8", "replace")
            status = stdout_f.channel.recv_exit_status()
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise HostUnreachable(f"host {self.target.name}: connection lost during `{line[:120]}`: {exc}") from exc
        result = CommandResult(tuple(str(a) for a in argv), status, out, err)
        if check and not result.ok:
            raise CommandFailed(f"host {self.target.name}: {result.brief()}", result)
        return result


def connect(host, **kwargs) -> Connection:
    """An open connection to a ``Host`` row (or a ``Target``)."""
    conn = Connection(host if isinstance(host, Target) else Target.of(host), **kwargs)
    conn.open()
    return conn
