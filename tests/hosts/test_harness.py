"""The test hosts themselves: what a run killed with SIGKILL leaves behind (its sshd, namespaces, containers, CDI
specs) is removed by the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import harness

ROOT = Path(__file__).resolve().parents[2]
CRASHING_RUN = """
import time
from tests.hosts.harness import Fleet, IMAGE
fleet = Fleet(1, cards=2)
host = fleet.hosts[0]
host.podman("run", "-d", "--name", "left-behind", "--label", "anchorgpu.order=AG-LEFT", IMAGE, "sleep", "600",
            check=True)
print("ready", fleet.folder, host.netns, host.sshd_pid, flush=True)
time.sleep(600)
"""


def _netns() -> list[str]:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout


def test_what_a_killed_run_left_is_cleaned_up_by_the_next(make_fleet):
    make_fleet(0)  # the checks for root and the tools (and a fleet of no hosts)
    child = subprocess.Popen([sys.executable, "-c", CRASHING_RUN], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"})
    try:
        line = child.stdout.readline().split()
        assert line and line[0] == "ready", line
        folder, netns, sshd_pid = Path(line[1]), line[2], int(line[3])
        env = {"CONTAINERS_CONF": str(folder / "th0" / "containers.conf"),
               "CONTAINERS_STORAGE_CONF": str(folder / "th0" / "storage.conf")}
        exists = subprocess.run(["podman", "container", "exists", "left-behind"], env={**os.environ, **env})
        assert exists.returncode == 0
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert netns in _netns() and harness._alive(sshd_pid)  # the kill left them

    harness.cleanup_stale()

    assert netns not in _netns()
    for _ in range(50):
        if not harness._alive(sshd_pid):
            break
        time.sleep(0.1)
    assert not harness._alive(sshd_pid)
    assert not folder.exists()
    assert not list(harness.CDI_DIR.glob(f"anchorgpu-test-{folder.name}-*"))
    leftover = subprocess.run(["pgrep", "-f", f"conmon.*{folder}"], capture_output=True, text=True).stdout
    assert leftover.strip() == ""


def test_each_host_has_its_own_sshd_key_storage_and_cards(make_fleet):
    cards = 3
    fleet = make_fleet(2, cards=cards)
    first, second = fleet.hosts
    assert first.address != second.address and first.host_key != second.host_key
    assert len({c.uuid for h in fleet.hosts for c in h.cards}) == 2 * cards
    assert all(oct(c.node.stat().st_mode)[:4] == "0o20" for h in fleet.hosts for c in h.cards)  # character devices
    first.podman("create", "--name", "only-here", harness.IMAGE, "true", check=True)
    assert first.podman("container", "exists", "only-here").returncode == 0
    assert second.podman("container", "exists", "only-here").returncode == 1
