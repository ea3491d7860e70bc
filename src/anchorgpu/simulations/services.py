"""Queueing, claiming and finishing planner simulations.

A job moves queued → running → done | failed. Every change of state is a
conditional UPDATE (``WHERE state = … AND runner = …``), so two runners (the
worker and ``serve``, or two workers) never run one job twice, on SQLite as on
PostgreSQL, and a runner that lost a job (it was declared stale and taken
by another) cannot overwrite what the other wrote.

A running job's runner writes a heartbeat every few seconds; a job whose
heartbeat is older than ``STALE_AFTER`` is put back in the queue (its runner
died) or, after ``MAX_ATTEMPTS``, failed.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext_noop

from anchorgpu.messages import DomainError
from anchorgpu.ops.ratelimit import rate_key_lock
from anchorgpu.planner.measured import MeasuredSteps

from .models import SimulationJob

State, Failure = SimulationJob.State, SimulationJob.Failure

# Bump when the simulation changes what it measures: older results are then not reused.
SIMULATION_REVISION = 1
STALE_AFTER = timedelta(seconds=90)
MAX_ATTEMPTS = 2
KEEP_FINISHED = timedelta(days=30)


class SimulationRefused(DomainError):
    """The shop will not queue this simulation now (the queue or the visitor's share is full)."""


def job_key(model_source: dict, setup: dict, card_counts: list[int]) -> str:
    """The digest of what a job computes: same model, setup and card counts give the same result."""
    text = json.dumps({"model": model_source, "setup": setup, "cards": sorted(set(card_counts)),
                       "revision": SIMULATION_REVISION}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def requester_digest(kind: str, value: Any) -> str:
    """Who asked, as a digest (a user id or an address is not kept in clear)."""
    return hashlib.sha256(f"{kind}:{value}:{settings.SECRET_KEY}".encode()).hexdigest()[:32]


def job_submit(*, model_source: dict, model_label: str, setup: dict, card_counts: list[int],
               requester: str = "") -> tuple[SimulationJob, bool]:
    """The job for this request: an existing one with the same key (queued, running or done), or a new one.

    Returns ``(job, created)``. Raises ``SimulationRefused`` when the queue is
    full or this requester already waits for as many jobs as allowed.
    """
    key = job_key(model_source, setup, card_counts)
    with transaction.atomic():
        # Counted and decided in turns, so requests sent at once cannot all pass the counts before one inserts.
        rate_key_lock(scope="simulation:queue", key="all")
        existing = (SimulationJob.objects.filter(key=key).exclude(state=State.FAILED)
                    .order_by("-created_at").first())
        if existing is not None:
            return existing, False
        unfinished = SimulationJob.objects.filter(state__in=SimulationJob.UNFINISHED)
        if requester and unfinished.filter(requester=requester).count() >= settings.ANCHORGPU_SIMULATION_PER_REQUESTER:
            raise SimulationRefused(gettext_noop(
                "You already have %(n)d simulations waiting or running. Wait for one to finish, or use the "
                "instant estimate."), n=settings.ANCHORGPU_SIMULATION_PER_REQUESTER)
        if unfinished.filter(state=State.QUEUED).count() >= settings.ANCHORGPU_SIMULATION_QUEUE_LIMIT:
            raise SimulationRefused(gettext_noop(
                "The simulation queue is full. Try again in a few minutes, or use the instant estimate."))
        job = SimulationJob.objects.create(key=key, model_label=model_label[:200], model_source=model_source,
                                           setup=setup, card_counts=sorted(set(card_counts)), requester=requester)
    return job, True


def queue_position(job: SimulationJob) -> int:
    """How many queued jobs run before this one (0: it is next)."""
    return SimulationJob.objects.filter(state=State.QUEUED, created_at__lt=job.created_at).count()


def jobs_requeue_stale(now=None) -> int:
    """Running jobs whose runner stopped answering go back to the queue, or fail after ``MAX_ATTEMPTS``."""
    now = now or timezone.now()
    stale = SimulationJob.objects.filter(state=State.RUNNING, heartbeat_at__lt=now - STALE_AFTER)
    failed = stale.filter(attempts__gte=MAX_ATTEMPTS).update(
        state=State.FAILED, failure=Failure.CRASHED, finished_at=now, runner="",
        error="The simulation stopped twice without an answer.")
    requeued = stale.filter(attempts__lt=MAX_ATTEMPTS).update(state=State.QUEUED, runner="", progress="")
    return failed + requeued


def job_claim(runner: str, now=None) -> SimulationJob | None:
    """Takes the oldest queued job for ``runner``; ``None`` when there is none."""
    now = now or timezone.now()
    jobs_requeue_stale(now)
    for _attempt in range(5):  # another runner may take the one we saw; look again
        candidate = SimulationJob.objects.filter(state=State.QUEUED).order_by("created_at").values_list(
            "pk", flat=True).first()
        if candidate is None:
            return None
        taken = SimulationJob.objects.filter(pk=candidate, state=State.QUEUED).update(
            state=State.RUNNING, runner=runner[:100], attempts=F("attempts") + 1, started_at=now, heartbeat_at=now,
            progress="")
        if taken:
            return SimulationJob.objects.get(pk=candidate)
    return None


def _mine(job: SimulationJob, runner: str):
    return SimulationJob.objects.filter(pk=job.pk, state=State.RUNNING, runner=runner)


def job_heartbeat(job: SimulationJob, runner: str, progress: str | None = None) -> bool:
    """Records that ``runner`` still runs ``job`` (and what it is doing); False when the job is no longer its."""
    changes: dict[str, Any] = {"heartbeat_at": timezone.now()}
    if progress is not None:
        changes["progress"] = progress[:200]
    return bool(_mine(job, runner).update(**changes))


def job_finish(job: SimulationJob, runner: str, result: list, seconds: float) -> bool:
    """Stores a finished job's measurements (checked: they must read back as ``MeasuredSteps``)."""
    MeasuredSteps.from_json(result)
    return bool(_mine(job, runner).update(state=State.DONE, result=result, seconds=seconds,
                                          finished_at=timezone.now(), progress="", failure="", error=""))


def job_fail(job: SimulationJob, runner: str, failure: str, error: str, seconds: float | None = None) -> bool:
    return bool(_mine(job, runner).update(state=State.FAILED, failure=failure, error=error[:2000], seconds=seconds,
                                          finished_at=timezone.now(), progress=""))


def jobs_purge_old(now=None) -> int:
    """Deletes finished jobs older than ``KEEP_FINISHED`` (their result is recomputed if asked again)."""
    now = now or timezone.now()
    deleted, _by_model = SimulationJob.objects.filter(
        state__in=(State.DONE, State.FAILED), finished_at__lt=now - KEEP_FINISHED).delete()
    return deleted
