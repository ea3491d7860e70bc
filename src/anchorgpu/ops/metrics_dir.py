"""The folder where prometheus-client keeps each server process's metrics (its multiprocess mode).

Under gunicorn the shop runs in several processes, and each would otherwise count only the requests it
answered: a scrape would see the share of whichever process answered it. With ``PROMETHEUS_MULTIPROC_DIR``
set, prometheus-client writes every process's counters and histograms to memory-mapped files in that folder,
and ``/metrics`` adds them up (``anchorgpu.ops.metrics``). The variable must be in the environment before
prometheus-client is first imported: the library picks its storage then.

This module imports neither prometheus-client nor Django, so the gunicorn configuration and ``anchorgpu
serve`` can prepare the folder before anything else is loaded. Only prometheus-client's own files (``*.db``
directly in the folder) are removed when it is emptied; anything else an operator put there stays.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

ENV = "PROMETHEUS_MULTIPROC_DIR"


class MetricsDirError(Exception):
    """The folder cannot hold the metrics files; the message says why."""


def configured() -> str | None:
    """The folder set in the environment, or None when multiprocess mode is off."""
    value = os.environ.get(ENV)
    if value is None:
        return None
    if not value.strip():
        raise MetricsDirError(f"{ENV} is set but empty: set it to a folder for the metrics files, or unset it.")
    return value


def empty(path: str) -> int:
    """Create the folder if needed and remove the metrics files a previous run left there (their counts
    would otherwise be added to this run's). Returns how many were removed."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MetricsDirError(f"{ENV}={path}: cannot create the folder ({exc.strerror}).") from exc
    if not folder.is_dir():
        raise MetricsDirError(f"{ENV}={path} is not a folder.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise MetricsDirError(f"{ENV}={path}: this user cannot write there.")
    removed = 0
    for stale in folder.glob("*.db"):
        if stale.is_file():
            stale.unlink()
            removed += 1
    return removed


def ensure() -> tuple[str, bool]:
    """The folder in force: the one configured, or a new private temporary folder, put into the environment
    so that every process started from here uses it. Returns (path, whether it was created here)."""
    path = configured()
    if path is not None:
        return path, False
    path = tempfile.mkdtemp(prefix="anchorgpu-metrics-")
    os.environ[ENV] = path
    return path, True
