"""A provisioner for tests that run ``anchorgpu worker`` in child processes.

The worker loads it by name (``ANCHORGPU_PROVISIONER=tests.faults.provisioners.Marking``).
It does what the simulated provisioner does, slowly (``ANCHORGPU_FAULT_PAUSE``
seconds per step), and appends a line to ``ANCHORGPU_FAULT_LOG`` when it enters
a step and when it leaves it: ``enter|exit <pid> <order id> <step> <unix time>``.
The test reads the file to know where each worker was when it was killed, and
which worker ran which step.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from anchorgpu.orders.provisioner import SimulatedProvisioner


def _mark(event: str, order, step) -> None:
    line = f"{event} {os.getpid()} {order.pk} {getattr(step, 'value', step)} {time.time():.6f}\n"
    fd = os.open(os.environ["ANCHORGPU_FAULT_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write of a short line in append mode: lines never interleave
        os.fsync(fd)
    finally:
        os.close(fd)


class Marking(SimulatedProvisioner):
    name = "marking"

    def run(self, step, order):
        _mark("enter", order, step)
        time.sleep(float(os.environ.get("ANCHORGPU_FAULT_PAUSE", "0.1")))
        detail = super().run(step, order)
        _mark("exit", order, step)
        return detail


@dataclass(frozen=True)
class Mark:
    event: str
    pid: int
    order: int
    step: str
    at: float


def marks(path: Path) -> list[Mark]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        event, pid, order, step, at = line.split()
        out.append(Mark(event, int(pid), int(order), step, float(at)))
    return out


def _ledger(line: str) -> None:
    fd = os.open(os.environ["ANCHORGPU_FAULT_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def ledger(path: Path) -> list[tuple[int, int, str, str]]:
    """(pid, order id, step, "created" or "found") per line of the ledger."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        pid, order, step, what = line.split()
        out.append((int(pid), int(order), step, what))
    return out


class Ledger(Marking):
    """Like ``Marking``, with a step that leaves something behind on the "host" before its pause: a line in
    the ledger file (``ANCHORGPU_FAULT_LEDGER``) naming what the step made for the order (its container, its
    keys…). A step repeated after a kill looks its thing up first, as a real one looks its container up by
    name, finds it and carries on ("found"), so the ledger shows whether anything was made twice."""

    name = "ledger"

    def run(self, step, order):
        _mark("enter", order, step)
        name = getattr(step, "value", step)
        made = {(o, s) for _pid, o, s, what in ledger(Path(os.environ["ANCHORGPU_FAULT_LEDGER"])) if what == "created"}
        _ledger(f"{os.getpid()} {order.pk} {name} {'found' if (order.pk, name) in made else 'created'}\n")
        time.sleep(float(os.environ.get("ANCHORGPU_FAULT_PAUSE", "0.1")))
        detail = SimulatedProvisioner.run(self, step, order)
        _mark("exit", order, step)
        return detail
