"""The steps that prepare access after payment (DESIGN §6), as data.

Pure domain code. Each step is idempotent; a worker records when each one
finished and, after a crash, resumes at the first unfinished step.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class Step(str, Enum):
    ALLOCATE_DEVICES = "allocate_devices"
    PREPARE_ENVIRONMENT = "prepare_environment"
    INSTALL_SSH_KEYS = "install_ssh_keys"
    HEALTH_CHECK = "health_check"
    DELIVER_ACCESS = "deliver_access"


PLAN: tuple[Step, ...] = tuple(Step)
# Recorded when the term ends, after the devices are released.
WIPE = "wipe"


def next_step(finished: Iterable[Step | str]) -> Step | None:
    """The first step of the plan not finished yet; None once access is delivered.
    Steps must finish in order: a gap means the record is corrupt."""
    done = {Step(s) for s in finished}
    for position, step in enumerate(PLAN):
        if step not in done:
            later = [s.value for s in PLAN[position + 1:] if s in done]
            if later:
                raise ValueError(f"steps {', '.join(later)} finished before {step.value}")
            return step
    return None
