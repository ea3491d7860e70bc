"""``anchorgpu worker`` in child processes, on the test database, with the marking provisioner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.db import connection

from tests.ops.test_backup_drill import _url

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    def __init__(self, process: subprocess.Popen, output: Path):
        self.process, self.output = process, output

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL: no handler runs, no transaction is committed or rolled back by the process itself."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> int:
        """SIGTERM: the worker finishes its sweep and exits."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)

    def ready(self) -> bool:
        """True once it has started sweeping (its signal handlers are in place)."""
        return self.output.exists() and "worker started" in self.output.read_text()

    def alive(self) -> bool:
        return self.process.poll() is None


class Workers:
    """Starts workers that write their output under ``folder`` and their step marks to ``marks``."""

    def __init__(self, folder: Path, marks: Path, *, pause: float = 0.1, interval: float = 0.2,
                 provisioner: str = "tests.faults.provisioners.Marking", ledger: Path | None = None):
        self.folder, self.marks, self.pause, self.interval = folder, marks, pause, interval
        self.provisioner, self.ledger = provisioner, ledger
        self.started: list[Worker] = []
        # The child connects to the database this test uses, as committed rows (a transactional test).
        self.url = _url(connection.settings_dict)

    def start(self) -> Worker:
        output = self.folder / f"worker-{len(self.started)}.log"
        env = {**os.environ, "ANCHORGPU_DATABASE_URL": self.url, "DATABASE_URL": self.url,
               "ANCHORGPU_PROVISIONER": self.provisioner, "ANCHORGPU_FAULT_LEDGER": str(self.ledger or ""),
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


def wait_for(condition, *, timeout: float = 90.0, what: str = "", workers: Workers | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    detail = workers.outputs() if workers is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{detail}")
