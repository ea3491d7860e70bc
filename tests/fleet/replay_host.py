"""A real SSH host on a loopback address for fleet discovery's tests.

It is this machine's own OpenSSH server (``/usr/sbin/sshd``) with its own host key, authorised key and PID file,
and a PATH whose first folder holds stand-in ``nvidia-smi`` and ``podman`` executables. There is no GPU here:
the stand-ins REPLAY OUTPUT RECORDED ON REAL MACHINES (tests/fleet/fixtures, see SOURCES.md), the machine a test
picks with ``use(...)``. Everything else the discovery runs (``nproc``, ``lscpu``, ``cat /proc/meminfo``, ``df``)
is the real command on this machine.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
ADDRESS = "127.0.231.50"

# A recorded machine: the files its stand-ins print. A missing entry makes that command fail, as on a host
# without it.
MACHINES = {
    "h100": {"query": "nvidia-smi-query-h100-80gb-hbm3.csv", "topo": "nvidia-smi-topo-h100-80gb-hbm3.txt",
             "images": "podman-images-this-machine.json"},
    "h200": {"query": "nvidia-smi-query-h200.csv", "topo": "nvidia-smi-topo-h200.txt",
             "images": "podman-images-this-machine.json"},
    "l40s": {"query": "nvidia-smi-query-l40s.csv", "topo": "nvidia-smi-topo-l40s.txt",
             "images": "podman-images-this-machine.json"},
    "rtx2080-old-driver": {"query": "nvidia-smi-query-rtx2080super-466.csv",
                           "images": "podman-images-this-machine.json"},
    "h100-no-images": {"query": "nvidia-smi-query-h100-80gb-hbm3.csv", "topo": "nvidia-smi-topo-h100-80gb-hbm3.txt",
                       "images": "podman-images-empty-this-machine.json"},
}

NVIDIA_SMI = """#!/bin/sh
# Stand-in for nvidia-smi on a test host without a GPU: it replays output recorded on a real machine.
M={machine}
case "$1" in
  --query-gpu=*) f="$M/query" ;;
  topo) f="$M/topo" ;;
  *) echo "stand-in nvidia-smi: not recorded: $*" >&2; exit 2 ;;
esac
if [ -f "$f" ]; then cat "$f"; else echo "NVIDIA-SMI has failed (not recorded for this machine)" >&2; exit 9; fi
"""

PODMAN = """#!/bin/sh
# Stand-in for podman's image list on a test host: replays a list recorded on a real machine.
M={machine}
if [ "$1" = images ] && [ -f "$M/images" ]; then cat "$M/images"; exit 0; fi
echo "stand-in podman: not recorded: $*" >&2; exit 125
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((ADDRESS, 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


class ReplayHost:
    def __init__(self, root: Path):
        self.root = root
        self.machine = root / "machine"
        self.bin = root / "bin"
        self.bin.mkdir()
        self.host_key = _keygen(root / "host_ed25519")
        self.other_key = _keygen(root / "other_ed25519")  # a key this host does not have
        self.operator_key_file = root / "operator_ed25519"
        (root / "authorized_keys").write_text(_keygen(self.operator_key_file) + "\n")
        for name, body in (("nvidia-smi", NVIDIA_SMI), ("podman", PODMAN)):
            exe = self.bin / name
            exe.write_text(body.format(machine=self.machine))
            exe.chmod(0o755)
        self.port = _free_port()
        config = root / "sshd_config"
        config.write_text("\n".join([
            f"ListenAddress {ADDRESS}:{self.port}", f"HostKey {root / 'host_ed25519'}",
            f"AuthorizedKeysFile {root / 'authorized_keys'}", f"PidFile {root / 'sshd.pid'}",
            "UsePAM no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password", "StrictModes no", "LogLevel ERROR",
            f"SetEnv PATH={self.bin}:/usr/local/bin:/usr/bin:/bin", ""]))
        # OpenSSH refuses to start without its privilege separation folder, which the package makes only when
        # its service runs (tests/hosts/harness.py does the same).
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd did not start: {self.proc.stderr.read().decode()[-500:]}")
            try:
                socket.create_connection((ADDRESS, self.port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError("sshd did not listen within 10 s")

    def use(self, name: str) -> None:
        """Make the stand-ins replay the recorded machine ``name``."""
        if self.machine.exists():
            shutil.rmtree(self.machine)
        self.machine.mkdir()
        for kind, fixture in MACHINES[name].items():
            shutil.copyfile(FIXTURES / fixture, self.machine / kind)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # this sshd, by its PID; its sessions end with it
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stderr:
            self.proc.stderr.close()
