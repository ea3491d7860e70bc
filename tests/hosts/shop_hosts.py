"""The demo shop's fleet pointed at test hosts, customers with key pairs of their own, and a real SSH login."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import paramiko

from anchorgpu.catalog.models import Environment
from anchorgpu.fleet.models import Device, Host
from anchorgpu.orders.ssh_keys import parse_keys
from tests import shop

from .harness import IMAGE, Fleet

PRODUCT = "h100-sxm-80gb"
ENVIRONMENT = "pytorch-cuda124"


def bind_fleet(fleet: Fleet, settings, *, product: str = PRODUCT, image: str = IMAGE) -> list[Host]:
    """The product's hosts become the test hosts (one each, in name order); the others are retired so every
    booking lands on a test host. The environment's image is the test image. The operator key is set on
    ``settings`` (pytest-django's fixture in tests, so it is put back afterwards)."""
    hosts = list(Host.objects.filter(product__slug=product).order_by("name"))
    assert len(hosts) >= len(fleet.hosts), "the demo fleet has fewer hosts than the test fleet"
    for row, test_host in zip(hosts, fleet.hosts, strict=False):
        row.ssh_address, row.ssh_port, row.ssh_user = test_host.address, 22, "root"
        row.host_key, row.runtime = test_host.host_key, "podman"
        row.save()
        Device.objects.filter(host=row, index__gte=len(test_host.cards)).delete()
        for card in test_host.cards:
            Device.objects.filter(host=row, index=card.index).update(gpu_uuid=card.uuid)
    Host.objects.filter(pk__in=[h.pk for h in hosts[len(fleet.hosts):]]).update(status=Host.Status.RETIRED)
    Environment.objects.filter(slug=ENVIRONMENT).update(image=image)
    settings.ANCHORGPU_HOST_SSH_KEY_FILE = str(fleet.operator_key)
    return hosts[:len(fleet.hosts)]


@dataclass
class KeyPair:
    private: Path
    public: str

    def pkey(self) -> paramiko.PKey:
        return paramiko.Ed25519Key.from_private_key_file(str(self.private))


def key_pair(folder: Path, name: str) -> KeyPair:
    path = folder / f"{name}_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@test", "-f", str(path)],
                   check=True)
    return KeyPair(private=path, public=Path(f"{path}.pub").read_text().strip())


def place(user, keys: KeyPair, *, quantity: int = 1, **kwargs):
    return shop.place(user, product=PRODUCT, quantity=quantity, ssh_keys=parse_keys(keys.public), **kwargs)


class Login:
    """A customer's real SSH login to a delivered container (paramiko, the customer's private key)."""

    def __init__(self, host: str, port: int, user: str, keys: KeyPair, *, timeout: float = 10):
        self.client = paramiko.SSHClient()
        self.client.set_missing_host_key_policy(paramiko.AutoAddPolicy())  # compared with the delivered one below
        self.client.connect(host, port=port, username=user, pkey=keys.pkey(), timeout=timeout,
                            banner_timeout=timeout, auth_timeout=timeout, allow_agent=False, look_for_keys=False)

    def host_key_fingerprint(self) -> str:
        import base64
        import hashlib

        key = self.client.get_transport().get_remote_server_key()
        return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")

    def run(self, command: str) -> tuple[int, str]:
        _in, out, err = self.client.exec_command(command, timeout=30)
        text = out.read().decode() + err.read().decode()
        return out.channel.recv_exit_status(), text

    def close(self) -> None:
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def login_refused(host: str, port: int, user: str, keys: KeyPair) -> str:
    """Why a login with the customer's key fails now (an assertion error if it succeeds)."""
    try:
        with Login(host, port, user, keys, timeout=5):
            pass
    except paramiko.ssh_exception.NoValidConnectionsError as exc:  # the port: every address refused the connection
        return "connection refused" if all(isinstance(e, ConnectionRefusedError) for e in exc.errors.values()) \
            else f"{type(exc).__name__}: {exc.errors}"
    except (paramiko.SSHException, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError(f"a login to {host}:{port} with the customer's key still succeeds")

