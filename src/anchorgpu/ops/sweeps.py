"""The worker's record of each sweep it ran: counts and times, read by /metrics."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import DatabaseError
from django.db.models import F

from .models import SweepRecord

log = logging.getLogger("anchorgpu.worker")


def sweep_recorded(*, name: str, started_at: datetime, seconds: float, result: int | None = None,
                   error: str = "") -> None:
    """Add one run to the sweep's record. Never raises: a sweep's work must not be undone by its bookkeeping."""
    try:
        SweepRecord.objects.get_or_create(name=name)
        changes = dict(runs=F("runs") + 1, last_started_at=started_at, last_seconds=seconds,
                       total_seconds=F("total_seconds") + seconds)
        if error:
            changes.update(failures=F("failures") + 1, last_error=error[:2000], last_failed_at=started_at)
        else:
            changes.update(last_result=result)
        SweepRecord.objects.filter(name=name).update(**changes)
    except DatabaseError:
        log.exception("could not record the run of sweep %s", name)
