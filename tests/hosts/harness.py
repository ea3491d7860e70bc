"""Real test hosts made by the test suite: one network namespace per host, reached over a veth pair, each with
its own OpenSSH server (own host key, the operator's test key), its own rootful podman storage (runc, cgroupfs,
under this session's folder in /tmp, nothing in /var/lib/containers) and fake GPU cards.

The cards: character device nodes made with ``mknod`` (major 195 as NVIDIA's driver uses, plus ``nvidiactl``
and ``nvidia-uvm``) and a CDI spec in ``/etc/cdi`` whose device names are the cards' UUIDs, so that
``podman run --device nvidia.com/gpu=<uuid>`` passes exactly those nodes and the device cgroup denies the others,
as on a host with the NVIDIA Container Toolkit. There is no GPU and no driver, so the spec also mounts a
STAND-IN for the ``nvidia-smi`` tool (a shell script, plainly marked as such) that answers the two queries the
shop makes from the device nodes it can see. The device nodes and the device cgroup are real; only the tool's
answer is a stand-in.

A folder per session under ``/tmp/anchorgpu-hosts``; ``cleanup_stale`` removes what a crashed run left (its
containers, sshd, namespaces and CDI specs) when the process that made it is gone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import image

ROOT = Path("/tmp/anchorgpu-hosts")
CDI_DIR = Path("/etc/cdi")
IMAGE = "localhost/anchorgpu-test:cuda12.4"
DRIVER_VERSION = "550.54.15"
TOOLS = ("ip", "nsenter", "setsid", "mknod", "podman", "runc", "/usr/sbin/sshd", "ssh-keygen", "/bin/busybox", "ldd")


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None and not Path(t).exists()]


def _run(argv, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("check", True)
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 120)
    return subprocess.run([str(a) for a in argv], **kwargs)


@dataclass
class FakeCard:
    index: int
    uuid: str
    node: Path


@dataclass
class TestHost:
    name: str
    netns: str
    veth: str  # the end in the machine's own namespace: deleting it cuts the host off
    address: str
    folder: Path
    host_key: str  # the public key line sshd answers with
    cards: list[FakeCard] = field(default_factory=list)
    sshd_pid: int = 0

    __test__ = False  # not a test class, for pytest

    @property
    def env(self) -> dict[str, str]:
        return {"CONTAINERS_CONF": str(self.folder / "containers.conf"),
                "CONTAINERS_STORAGE_CONF": str(self.folder / "storage.conf")}

    def podman(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        """podman on this host's storage, run from the test (not over SSH)."""
        return _run(["podman", *args], env={**os.environ, **self.env}, check=check)

    def containers(self, label: str = "anchorgpu.order") -> list[dict]:
        out = self.podman("ps", "-a", "--filter", f"label={label}", "--format", "json", check=True).stdout
        return json.loads(out or "[]")

    def volumes(self) -> list[str]:
        out = self.podman("volume", "ls", "--format", "{{.Name}}", check=True).stdout
        return out.split()

    def cut(self) -> None:
        """The host vanishes: its link is deleted (the other end goes with it)."""
        _run(["ip", "link", "del", self.veth], check=False)

    def restart_sshd_with_new_key(self) -> None:
        """The host answers with another host key from now on (a reinstalled or impostor machine)."""
        key = self.folder / "ssh_host_ed25519_key"
        key.unlink()
        Path(f"{key}.pub").unlink()
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key])
        self._stop_sshd()
        self.start_sshd()

    def start_sshd(self) -> None:
        # OpenSSH refuses to start without its privilege separation folder; the package makes it only when its
        # service starts, which a fresh container may never have done.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.host_key = " ".join(Path(f"{self.folder}/ssh_host_ed25519_key.pub").read_text().split()[:2])
        pidfile = self.folder / "sshd.pid"
        pidfile.unlink(missing_ok=True)
        log = open(self.folder / "sshd.log", "ab")  # noqa: SIM115 - handed to the daemon
        subprocess.Popen(["setsid", "nsenter", f"--net=/run/netns/{self.netns}", "/usr/sbin/sshd", "-D", "-e",
                          "-f", str(self.folder / "sshd_config")], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if pidfile.exists() and pidfile.read_text().strip():
                self.sshd_pid = int(pidfile.read_text())
                return
            time.sleep(0.05)
        raise RuntimeError(f"sshd of test host {self.name} did not start: {(self.folder / 'sshd.log').read_text()}")

    def _stop_sshd(self) -> None:
        if self.sshd_pid:
            _kill(self.sshd_pid)
            self.sshd_pid = 0


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


SSHD_CONFIG = """\
ListenAddress {address}
Port 22
HostKey {folder}/ssh_host_ed25519_key
AuthorizedKeysFile {authorized}
PidFile {folder}/sshd.pid
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
MaxStartups 100:30:200
MaxSessions 50
SetEnv CONTAINERS_CONF={folder}/containers.conf CONTAINERS_STORAGE_CONF={folder}/storage.conf {path}
"""

CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=8192:8192"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{folder}/events.log"
tmp_dir = "{folder}/libpod-tmp"
volume_path = "{folder}/volumes"
"""

STORAGE_CONF = """\
[storage]
driver = "overlay"
runroot = "{folder}/runroot"
graphroot = "{folder}/graph"
"""

# A STAND-IN for nvidia-smi (no GPU here). It lists, for the cards whose device node it can see, the UUID the
# card's table gives, and the driver version below; it understands only the shop's two queries.
STAND_IN_SMI = """\
#!/bin/sh
# STAND-IN for NVIDIA's nvidia-smi, written by the AnchorGPU test suite: there is no GPU on this machine.
# It reports the fake cards whose device node exists here (/dev inside a container, the host's fake-device
# folder outside one). The device nodes and the cgroup that guards them are real; this answer is not.
devdir=/dev
[ -e /run/.containerenv ] || devdir={devices}
query=""
for arg in "$@"; do case "$arg" in --query-gpu=*) query="${{arg#--query-gpu=}}";; esac; done
while read -r index uuid; do
  [ -c "$devdir/nvidia$index" ] || continue
  case "$query" in
    uuid) echo "$uuid";;
    uuid,driver_version) echo "$uuid, {driver}";;
    driver_version) echo "{driver}";;
    *) echo "GPU $index: stand-in card (UUID: $uuid)";;
  esac
done <<'CARDS'
{table}
CARDS
"""


def _cdi_spec(host: TestHost, smi: Path) -> dict:
    devices = [{"name": card.uuid, "containerEdits": {"deviceNodes": [
        {"path": f"/dev/nvidia{card.index}", "hostPath": str(card.node)}]}} for card in host.cards]
    shared = host.folder / "devices"
    return {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devices,
            "containerEdits": {
                "deviceNodes": [{"path": "/dev/nvidiactl", "hostPath": str(shared / "nvidiactl")},
                                {"path": "/dev/nvidia-uvm", "hostPath": str(shared / "nvidia-uvm")}],
                "mounts": [{"hostPath": str(smi), "containerPath": "/usr/bin/nvidia-smi",
                            "options": ["ro", "nosuid", "nodev", "bind"]}]}}


class Fleet:
    """``count`` test hosts of ``cards`` fake cards each. Use ``close()`` (or a fixture's finalizer)."""

    def __init__(self, count: int, *, cards: int = 8, operator_key: Path | None = None):
        cleanup_stale()
        self.session = f"{os.getpid():x}{uuid.uuid4().hex[:4]}"
        self.folder = ROOT / self.session
        self.folder.mkdir(parents=True)
        (self.folder / "owner").write_text(str(os.getpid()))
        self.hosts: list[TestHost] = []
        self.operator_key = self.folder / "operator_ed25519"
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "anchorgpu-test-operator",
              "-f", self.operator_key])
        subnet = _free_subnet()
        tarball = image.build_rootfs(self.folder / "rootfs")
        try:
            for n in range(count):
                self.hosts.append(self._make_host(n, subnet, cards))
            for host in self.hosts:
                image.import_image(tarball, IMAGE, host.env)
        except BaseException:
            self.close()
            raise

    def _make_host(self, n: int, subnet: int, cards: int) -> TestHost:
        name = f"th{n}"
        netns = f"agpu-{self.session}-{n}"
        veth = f"ag{self.session[-6:]}{n}"[:15]
        folder = self.folder / name
        (folder / "devices").mkdir(parents=True)
        (folder / "bin").mkdir()
        root_side, host_side = f"10.231.{subnet}.{4 * n + 1}", f"10.231.{subnet}.{4 * n + 2}"
        host = TestHost(name=name, netns=netns, veth=veth, address=host_side, folder=folder, host_key="")
        _run(["ip", "netns", "add", netns])
        (self.folder / "netns").open("a").write(netns + "\n")
        _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns])
        _run(["ip", "addr", "add", f"{root_side}/30", "dev", veth])
        _run(["ip", "link", "set", veth, "up"])
        for argv in (["ip", "addr", "add", f"{host_side}/30", "dev", "eth0"], ["ip", "link", "set", "eth0", "up"],
                     ["ip", "link", "set", "lo", "up"]):
            _run(["ip", "netns", "exec", netns, *argv])
        for index in range(cards):
            node = folder / "devices" / f"nvidia{index}"
            _run(["mknod", node, "c", 195, index])
            host.cards.append(FakeCard(index=index, uuid=f"GPU-{uuid.uuid4()}", node=node))
        _run(["mknod", folder / "devices" / "nvidiactl", "c", 195, 255])
        _run(["mknod", folder / "devices" / "nvidia-uvm", "c", 234, 0])
        smi = folder / "bin" / "nvidia-smi"
        smi.write_text(STAND_IN_SMI.format(devices=folder / "devices", driver=DRIVER_VERSION,
                                           table="\n".join(f"{c.index} {c.uuid}" for c in host.cards)))
        smi.chmod(0o755)
        CDI_DIR.mkdir(parents=True, exist_ok=True)
        (CDI_DIR / f"anchorgpu-test-{self.session}-{name}.json").write_text(json.dumps(_cdi_spec(host, smi)))
        (folder / "containers.conf").write_text(CONTAINERS_CONF.format(folder=folder))
        (folder / "storage.conf").write_text(STORAGE_CONF.format(folder=folder))
        (folder / "authorized_keys").write_text(Path(f"{self.operator_key}.pub").read_text())
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", folder / "ssh_host_ed25519_key"])
        (folder / "sshd_config").write_text(SSHD_CONFIG.format(address=host_side, folder=folder,
                                                               authorized=folder / "authorized_keys",
                                                               path=f"PATH={folder}/bin:/usr/sbin:/usr/bin:/sbin:/bin"))
        host.start_sshd()
        (self.folder / "sshd_pids").open("a").write(f"{host.sshd_pid}\n")
        return host

    def close(self) -> None:
        _teardown(self.folder, [h.sshd_pid for h in self.hosts])


def _free_subnet() -> int:
    used = _run(["ip", "-4", "addr"]).stdout
    taken = {int(line.split("10.231.")[1].split(".")[0]) for line in used.splitlines() if "10.231." in line}
    for candidate in range(20 + os.getpid() % 200, 20 + os.getpid() % 200 + 230):
        third = 20 + (candidate - 20) % 230
        if third not in taken:
            return third
    raise RuntimeError("no free 10.231.X.0/24 for test hosts")


def _teardown(folder: Path, pids: list[int]) -> None:
    """Remove one session's hosts: containers and volumes, sshd, namespaces, CDI specs, files."""
    session = folder.name
    for host_dir in sorted(folder.glob("th*")):
        if (host_dir / "containers.conf").exists():
            env = {**os.environ, "CONTAINERS_CONF": str(host_dir / "containers.conf"),
                   "CONTAINERS_STORAGE_CONF": str(host_dir / "storage.conf")}
            _run(["podman", "rm", "-a", "-f", "-t", "0"], env=env, check=False)
            _run(["podman", "volume", "prune", "-f"], env=env, check=False)
            _run(["podman", "system", "reset", "-f"], env=env, check=False)
    recorded = folder / "sshd_pids"
    for pid in set(pids) | ({int(p) for p in recorded.read_text().split()} if recorded.exists() else set()):
        if pid and _alive(pid):
            _kill(pid)
    for host_dir in sorted(folder.glob("th*")):
        pidfile = host_dir / "sshd.pid"
        if pidfile.exists() and pidfile.read_text().strip().isdigit():
            _kill(int(pidfile.read_text()))
    names = (folder / "netns").read_text().split() if (folder / "netns").exists() else []
    for netns in names:
        _run(["ip", "netns", "del", netns], check=False)
    for spec in CDI_DIR.glob(f"anchorgpu-test-{session}-*.json"):
        spec.unlink(missing_ok=True)
    _run(["umount", "-R", "-l", str(folder)], check=False)
    shutil.rmtree(folder, ignore_errors=True)


def cleanup_stale() -> None:
    """What a previous run left behind when its process died without cleaning up."""
    if not ROOT.exists():
        return
    for folder in ROOT.iterdir():
        owner = folder / "owner"
        pid = int(owner.read_text()) if owner.exists() and owner.read_text().strip().isdigit() else 0
        if pid and _alive(pid):
            continue
        _teardown(folder, [])
