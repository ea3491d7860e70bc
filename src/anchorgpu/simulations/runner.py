"""Runs queued planner simulations, one at a time, each in a child process with a time limit.

``SimulationRunner`` is a thread that ``anchorgpu worker`` and ``anchorgpu
serve`` start: it claims the oldest queued job, starts ``python -m
anchorgpu.simulations.child`` at a lower CPU priority, feeds it the job,
turns its ``progress:`` lines into the job's progress and heartbeat, and
stores the answer. A child that runs past ``ANCHORGPU_SIMULATION_TIMEOUT``
is killed and the job fails with that reason; a child that dies is a
crash, logged with its last output. The web request never waits for torch.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections import deque

from django.conf import settings
from django.db import close_old_connections, connections

from .child import PROGRESS
from .models import SimulationJob
from .services import job_claim, job_fail, job_finish, job_heartbeat

log = logging.getLogger("anchorgpu.simulations")
Failure = SimulationJob.Failure

HEARTBEAT_EVERY = 5.0  # seconds; well inside services.STALE_AFTER
PROGRESS_EVERY = 1.0  # at most one progress write per second


def runner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident() % 100000}"


def _child_command() -> list[str]:
    return [sys.executable, "-m", "anchorgpu.simulations.child"]


def _lower_priority() -> None:  # in the child, before exec: the shop's requests come first
    try:
        os.nice(10)
    except OSError:
        pass


def run_job(job: SimulationJob, runner: str, timeout: float | None = None) -> str:
    """Runs one claimed job to its end; returns the state it ended in."""
    timeout = timeout or settings.ANCHORGPU_SIMULATION_TIMEOUT
    request = {"model": job.model_source, "setup": job.setup, "card_counts": job.card_counts}
    started = time.monotonic()
    try:
        child = subprocess.Popen(_child_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, preexec_fn=_lower_priority)
    except OSError as exc:
        log.error("simulation %s: cannot start the child: %s", job.pk, exc)
        job_fail(job, runner, Failure.CRASHED, "The simulation could not be started.")
        return SimulationJob.State.FAILED
    tail: deque[str] = deque(maxlen=20)
    latest = {"progress": None}

    def read_stderr():
        for line in child.stderr:
            line = line.rstrip("\n")
            if line.startswith(PROGRESS):
                latest["progress"] = line[len(PROGRESS):]
            else:
                tail.append(line)

    reader = threading.Thread(target=read_stderr, name=f"simulation-{job.pk}-stderr", daemon=True)
    reader.start()
    out: list[str] = []
    stdout_reader = threading.Thread(target=lambda: out.append(child.stdout.read()), daemon=True)
    stdout_reader.start()
    try:
        child.stdin.write(json.dumps(request))
        child.stdin.close()
    except OSError:  # the child died before reading: its exit status tells
        pass
    last_beat = last_progress = 0.0
    sent_progress = None
    while child.poll() is None or stdout_reader.is_alive():
        stdout_reader.join(0.25)
        now = time.monotonic()
        if now - started > timeout:
            child.kill()
            child.wait(5)
            job_fail(job, runner, Failure.TIMEOUT, f"The simulation ran longer than {timeout:.0f} s and was stopped.",
                     seconds=now - started)
            log.warning("simulation %s: stopped after %.0f s", job.pk, timeout)
            return SimulationJob.State.FAILED
        progress = latest["progress"]
        if (progress != sent_progress and now - last_progress >= PROGRESS_EVERY) or now - last_beat >= HEARTBEAT_EVERY:
            if not job_heartbeat(job, runner, progress if progress != sent_progress else None):
                child.kill()  # declared stale and taken by another runner: its result is the one kept
                child.wait(5)
                log.warning("simulation %s: no longer ours; stopped", job.pk)
                return "lost"
            last_beat, last_progress, sent_progress = now, now, progress
    reader.join(5)
    seconds = time.monotonic() - started
    return _store_answer(job, runner, child.returncode, out[0] if out else "", tail, seconds)


def _store_answer(job, runner, returncode, stdout, tail, seconds) -> str:
    answer = None
    if returncode == 0:
        try:
            answer = json.loads(stdout)
        except ValueError:
            answer = None
    if not isinstance(answer, dict):
        log.error("simulation %s: the child ended with status %s and no answer; last lines:\n%s", job.pk, returncode,
                  "\n".join(tail))
        job_fail(job, runner, Failure.CRASHED, "The simulation stopped without an answer (status "
                                               f"{returncode}); the operators have its log.", seconds=seconds)
        return SimulationJob.State.FAILED
    if answer.get("ok"):
        try:
            job_finish(job, runner, answer.get("steps"), seconds)
        except ValueError as exc:  # PlannerInputError: the steps do not read back
            log.error("simulation %s: malformed answer: %s", job.pk, exc)
            job_fail(job, runner, Failure.CRASHED, "The simulation's answer was malformed.", seconds=seconds)
            return SimulationJob.State.FAILED
        log.info("simulation %s (%s): done in %.1f s", job.pk, job.model_label, seconds)
        return SimulationJob.State.DONE
    failure = answer.get("failure") if answer.get("failure") in Failure.values else Failure.CRASHED
    job_fail(job, runner, failure, str(answer.get("error") or ""), seconds=seconds)
    return SimulationJob.State.FAILED


def run_next(runner: str | None = None, timeout: float | None = None) -> str | None:
    """Claims and runs the oldest queued job; ``None`` when the queue is empty."""
    runner = runner or runner_name()
    job = job_claim(runner)
    if job is None:
        return None
    log.info("simulation %s (%s): started", job.pk, job.model_label)
    return run_job(job, runner, timeout)


class SimulationRunner(threading.Thread):
    """Polls the queue every ``poll`` seconds and runs what it finds, until ``stop()``."""

    def __init__(self, poll: float = 1.0):
        super().__init__(name="simulation-runner", daemon=True)
        self.poll = poll
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        name = runner_name()
        log.info("simulation runner %s started", name)
        try:
            while not self.stopping.is_set():
                close_old_connections()
                try:
                    ran = run_next(name)
                except Exception:  # a database hiccup must not end the thread
                    log.exception("simulation runner: failed to run the next job")
                    ran = None
                if ran is None:
                    self.stopping.wait(self.poll)
        finally:
            connections.close_all()
