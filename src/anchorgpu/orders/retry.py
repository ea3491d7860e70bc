"""How often a failed access step or wipe is tried again, and how long the worker waits between tries
(DESIGN §6). Pure: no Django.

Three kinds of failure, told apart by the provisioner's exception:
- a step that could not be done now (``ProvisioningError``): ``MAX_FAILURES`` tries, then the operator's queue;
- a host that did not answer (``HostUnavailable``): ``MAX_UNREACHABLE`` tries, waiting longer, then the queue
  with the reason "host X unreachable: …";
- a host that must not be used (``HostRefused``): no second try, the queue at once.
"""

from __future__ import annotations

from datetime import timedelta

MAX_FAILURES = 3
MAX_UNREACHABLE = 6
MAX_WIPE_FAILURES = 5

STEP_BACKOFF = timedelta(seconds=30)
UNREACHABLE_BACKOFF = timedelta(seconds=60)
BACKOFF_CAP = timedelta(minutes=30)


def backoff(failures: int, base: timedelta = STEP_BACKOFF, cap: timedelta = BACKOFF_CAP) -> timedelta:
    """The wait after the ``failures``-th failure in a row: ``base``, then doubled each time, at most ``cap``."""
    if failures < 1:
        return timedelta(0)
    return min(base * 2 ** min(failures - 1, 20), cap)
