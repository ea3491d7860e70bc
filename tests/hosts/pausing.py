"""The real provisioner for ``anchorgpu worker`` child processes in tests, with marks and pauses around each
step's remote work, so a test knows where a SIGKILL landed.

The worker loads it by name (``ANCHORGPU_PROVISIONER=tests.hosts.pausing.Pausing``). Around each step it appends
to ``ANCHORGPU_FAULT_LOG`` (see ``tests.faults.provisioners``): ``enter`` before anything is sent to the host,
``remote`` once the step's work on the host is done (then it waits ``ANCHORGPU_FAULT_PAUSE`` seconds, so a kill
lands after the remote work and before the step is recorded), ``exit`` when it returns.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from django.db import connection

from anchorgpu.access.provisioner import SSHProvisioner
from tests.faults.provisioners import _mark
from tests.faults.workers import Worker
from tests.ops.test_backup_drill import _url

ROOT = Path(__file__).resolve().parents[2]


def _pause() -> None:
    time.sleep(float(os.environ.get("ANCHORGPU_FAULT_PAUSE", "0.3")))


class Pausing(SSHProvisioner):
    def run(self, step, order):
        _mark("enter", order, step)
        _pause()
        detail = super().run(step, order)
        _mark("remote", order, step)
        _pause()
        _mark("exit", order, step)
        return detail


class RealWorkers:
    """``anchorgpu worker`` processes on the test database with the pausing real provisioner."""

    def __init__(self, folder: Path, marks: Path, operator_key: Path, *, pause: float = 0.3, interval: float = 0.3):
        self.folder, self.marks, self.pause, self.interval = folder, marks, pause, interval
        self.operator_key = operator_key
        self.started: list[Worker] = []
        self.url = _url(connection.settings_dict)

    def start(self) -> Worker:
        output = self.folder / f"worker-{len(self.started)}.log"
        env = {**os.environ, "ANCHORGPU_DATABASE_URL": self.url, "DATABASE_URL": self.url,
               "ANCHORGPU_PROVISIONER": "tests.hosts.pausing.Pausing",
               "ANCHORGPU_HOST_SSH_KEY_FILE": str(self.operator_key), "ANCHORGPU_HOST_SSH_TIMEOUT": "5",
               "ANCHORGPU_WORKSPACE_GIB_PER_CARD": "1", "ANCHORGPU_STEP_LEASE_SECONDS": "30",
               "ANCHORGPU_FAULT_LOG": str(self.marks), "ANCHORGPU_FAULT_PAUSE": str(self.pause),
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        with output.open("wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-m", "anchorgpu.cli", "worker", "--interval", str(self.interval),
                 "--no-simulations"], cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
        worker = Worker(process, output)
        self.started.append(worker)
        return worker

    def kill_all(self) -> None:
        for worker in self.started:
            if worker.alive():
                worker.kill()

    def outputs(self) -> str:
        return "\n".join(f"--- {w.output.name} (pid {w.pid})\n{w.output.read_text()[-3000:]}"
                         for w in self.started if w.output.exists())
