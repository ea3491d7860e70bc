"""The real provisioner: each order in a container of its own on the hosts that hold its cards, over SSH.

Every method reads what it needs from the database first (``records.order_work``: plain reads, copied into
frozen values), then does its network work with no transaction or row lock held (DESIGN §6). Each step is
idempotent by name: the container and volume are named by the order, a step run again after a crash finds what
the first run made and carries on, and a container made with another configuration is removed and made again.

Errors: a host that does not answer (or goes away mid-step) raises ``HostUnavailable``; a host key other than the
pinned one raises ``HostRefused(block_host=True)``; a missing image, or cards and a driver that contradict the
fleet record, raise ``HostRefused``; anything else that may pass raises ``ProvisioningError``. Each message
names the host and the order.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from anchorgpu.fleet import ssh
from anchorgpu.orders.provisioner import HostRefused, HostUnavailable, Provisioner, ProvisioningError

from . import containers as c
from .checks import card_check, health_findings, host_share, render_nodes
from .records import HostPart, OrderWork, order_work

SSHD_WAIT_SECONDS = 20


@contextmanager
def session(part: HostPart, work: OrderWork, step: str) -> Iterator[ssh.Connection]:
    """An SSH connection to the part's host; the fleet's SSH errors become the provisioner's."""
    where = f"order {work.reference}, {step}, host {part.name}"
    conn = ssh.Connection(part.target)
    try:
        with conn:
            yield conn
    except ssh.HostKeyMismatch as exc:
        raise HostRefused(f"{where}: {exc}", host=part.name, block_host=True) from exc
    except ssh.HostUnreachable as exc:
        raise HostUnavailable(f"{where}: {exc}", host=part.name) from exc
    except ssh.CommandFailed as exc:
        err = ProvisioningError(f"{where}: {exc}")
        err.host = part.name
        raise err from exc
    except ssh.SSHError as exc:
        err = ProvisioningError(f"{where}: {exc}")
        err.host = part.name
        raise err from exc


def _inspect(conn: ssh.Connection, runtime: str, name: str) -> tuple[dict, bool] | None:
    found = conn.run(c.inspect_argv(runtime, name), check=False)
    return c.parse_inspect(found.stdout) if found.ok else None


def _spec(conn: ssh.Connection, part: HostPart, work: OrderWork) -> c.ContainerSpec:
    cards = part.cards
    if work.vendor == "amd":
        nodes = render_nodes(conn, part, work)
        cards = tuple(c.Card(index=card.index, uuid=card.uuid, render_node=node)
                      for card, node in zip(cards, nodes, strict=True))
    return c.ContainerSpec(reference=work.reference, runtime=part.runtime, vendor=work.vendor, image=work.image,
                           cards=cards, share=host_share(conn, part))


def _running(conn: ssh.Connection, part: HostPart, work: OrderWork, step: str) -> str:
    name = c.container_name(work.reference)
    state = _inspect(conn, part.runtime, name)
    if state is None or not state[1]:
        raise ProvisioningError(f"order {work.reference}, {step}, host {part.name}: container {name} is "
                                f"{'gone' if state is None else 'not running'}; the environment must be prepared "
                                "again (operator: retry after checking the host)")
    return name


def _host_key_fingerprint(conn: ssh.Connection, runtime: str, name: str) -> str:
    out = conn.run(c.exec_argv(runtime, name, "ssh-keygen", "-lf", f"{c.HOST_KEY}.pub")).stdout.split()
    return out[1] if len(out) > 1 else ""


def _port_answer(address: str, port: int, timeout: float = 5.0) -> str:
    """What listens on the order's port, seen from the shop: 'refused', 'no answer' or the SSH banner."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(64).decode("ascii", "replace").strip() or "closed"
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return f"no answer ({exc})"


class SSHProvisioner(Provisioner):
    """Containers on the operator's hosts over SSH (podman with CDI, or Docker)."""

    name = "ssh"

    def allocate_devices(self, order) -> dict:
        """Check that each host has the booked cards the fleet record names (by UUID)."""
        work = order_work(order)
        hosts = {}
        for part in work.parts:
            with session(part, work, "allocate_devices") as conn:
                hosts[part.name] = card_check(conn, part, work)
        return {"hosts": hosts, "devices": [card.uuid for p in work.parts for card in p.cards]}

    def prepare_environment(self, order) -> dict:
        """Volume and container made (or found, from a run before a crash), started, sshd listening."""
        work = order_work(order)
        made = {}
        for part in work.parts:
            with session(part, work, "prepare_environment") as conn:
                made[part.name] = self._prepare(conn, part, work)
        return {"image": work.image, "hosts": made}

    def _prepare(self, conn: ssh.Connection, part: HostPart, work: OrderWork) -> dict:
        where = f"order {work.reference}, prepare_environment, host {part.name}"
        if not conn.run(c.image_exists_argv(part.runtime, work.image), check=False).ok:
            raise HostRefused(f"{where}: the host does not have image {work.image}", host=part.name)
        spec = _spec(conn, part, work)
        if not conn.run(c.exists_argv(part.runtime, "volume", spec.volume), check=False).ok:
            conn.run(c.volume_create_argv(spec))
        state = _inspect(conn, part.runtime, spec.name)
        action = "found"
        if state is not None and state[0].get("anchorgpu.config") != spec.digest:
            conn.run(c.remove_argv(part.runtime, spec.name))  # half-made, or made with another configuration
            state, action = None, "made again"
        if state is None:
            conn.run(c.create_argv(spec))
            action = "made" if action == "found" else action
        if state is None or not state[1]:
            conn.run([part.runtime, "start", spec.name])
        self._wait_for_sshd(conn, part, spec, where)
        return {"container": spec.name, "volume": spec.volume, "config": spec.digest, "action": action,
                "port": spec.port, "cpus": spec.cpus, "memory_mib": spec.memory_mib, "pids_limit": c.PIDS_LIMIT,
                "devices": c.device_args(spec)[1::2] if work.vendor == "nvidia" else c.device_args(spec),
                "host_key": _host_key_fingerprint(conn, part.runtime, spec.name)}

    def _wait_for_sshd(self, conn, part: HostPart, spec: c.ContainerSpec, where: str) -> None:
        deadline = time.monotonic() + SSHD_WAIT_SECONDS
        while True:
            if conn.run(c.exec_argv(part.runtime, spec.name, "test", "-s", c.SSHD_PID), check=False).ok:
                return
            state = _inspect(conn, part.runtime, spec.name)
            if state is not None and not state[1] or time.monotonic() > deadline:
                logs = conn.run([part.runtime, "logs", "--tail", "20", spec.name], check=False)
                raise ProvisioningError(f"{where}: sshd did not start in container {spec.name}: "
                                        f"{(logs.stdout + logs.stderr).strip()[-400:]}")
            time.sleep(0.2)

    def install_ssh_keys(self, order) -> dict:
        """The order's public keys, through standard input, as the container's only authorized keys; read back."""
        work = order_work(order)
        lines = ("\n".join(work.keys) + "\n").encode()
        done = {}
        for part in work.parts:
            with session(part, work, "install_ssh_keys") as conn:
                name = _running(conn, part, work, "install_ssh_keys")
                conn.run(c.exec_argv(part.runtime, name, "/bin/sh", "-c", c.WRITE_KEYS, stdin=True), stdin=lines)
                listed = conn.run(c.exec_argv(part.runtime, name, "ssh-keygen", "-lf", c.KEYS_FILE)).stdout
                found = sorted(line.split()[1] for line in listed.splitlines() if len(line.split()) > 1)
                wanted = sorted(work.fingerprints)
                if found != wanted:
                    raise ProvisioningError(f"order {work.reference}, install_ssh_keys, host {part.name}: the "
                                            f"container holds keys {found}, not the order's {wanted}")
                done[part.name] = found
        return {"fingerprints": sorted(work.fingerprints), "user": c.LOGIN_USER, "hosts": done}

    def health_check(self, order) -> dict:
        """Inside each container: exactly the booked cards, another card's node refused, CUDA against the driver,
        the disk sold; and the order's sshd answering on its port."""
        work = order_work(order)
        seen = {}
        for part in work.parts:
            with session(part, work, "health_check") as conn:
                name = _running(conn, part, work, "health_check")
                findings = health_findings(conn, part, work, name)
            port = c.BASE_PORT + min(card.index for card in part.cards)
            answer = _port_answer(part.target.address, port)
            if not answer.startswith("SSH-"):
                findings.problems.append(f"nothing answers SSH on port {port} ({answer})")
            seen[part.name] = {**vars(findings), "ssh_port": port, "ssh_answer": answer}
            if findings.problems:
                raise HostRefused(f"order {work.reference}, health_check, host {part.name}: "
                                  + "; ".join(findings.problems), host=part.name,
                                  block_host=findings.isolation_broken)
        return {"hosts": seen}

    def deliver_access(self, order) -> dict:
        """The login: the host's address, the order's port, ``root``, and the container's host key fingerprint."""
        work = order_work(order)
        logins = []
        for part in work.parts:
            with session(part, work, "deliver_access") as conn:
                name = _running(conn, part, work, "deliver_access")
                logins.append({"host": part.target.address, "port": c.BASE_PORT + min(x.index for x in part.cards),
                               "user": c.LOGIN_USER, "host_key": _host_key_fingerprint(conn, part.runtime, name),
                               "host_name": part.name})
        return {**logins[0], "logins": logins}

    def wipe(self, order) -> dict:
        """Stop (grace period, then kill), remove the container and the volume, and prove it: neither exists any
        more and nothing answers on the order's port."""
        return self._wipe(order_work(order))

    def wipe_cards(self, order, device_ids) -> dict:
        """The same on the hosts of the cards a move left (``orders.move_wipes``), before access is prepared on
        the new ones: the container and volume there are the order's, named by it."""
        return self._wipe(order_work(order, device_ids))

    def _wipe(self, work: OrderWork) -> dict:
        proof = {}
        for part in work.parts:
            name, volume = c.container_name(work.reference), c.volume_name(work.reference)
            with session(part, work, "wipe") as conn:
                if conn.run(c.exists_argv(part.runtime, "container", name), check=False).ok:
                    conn.run(c.stop_argv(part.runtime, name), check=False, timeout=c.STOP_GRACE_SECONDS + 30)
                    conn.run(c.remove_argv(part.runtime, name))
                if conn.run(c.exists_argv(part.runtime, "volume", volume), check=False).ok:
                    conn.run(c.volume_remove_argv(part.runtime, volume))
                container_left = conn.run(c.exists_argv(part.runtime, "container", name), check=False).ok
                volume_left = conn.run(c.exists_argv(part.runtime, "volume", volume), check=False).ok
            port = c.BASE_PORT + min(x.index for x in part.cards)
            answer = _port_answer(part.target.address, port)
            proof[part.name] = {"container": name, "container_exists": container_left, "volume": volume,
                                "volume_exists": volume_left, "port": port, "login": answer}
            if container_left or volume_left or answer.startswith("SSH-"):
                raise ProvisioningError(f"order {work.reference}, wipe, host {part.name}: not proven: "
                                        f"container left {container_left}, volume left {volume_left}, "
                                        f"port {port}: {answer}")
        return {"hosts": proof, "proven": True}
