"""Fixtures for tests against real test hosts (see ``harness``). They need root and the tools ``.ci/run``
installs (openssh-server, podman, runc, busybox-static); without them the tests are skipped with the reason,
except under CI (CI=true), where that is an error."""

from __future__ import annotations

import os

import pytest

from .harness import Fleet, missing_tools


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "test hosts need root (network namespaces, mknod, rootful podman)"
    missing = missing_tools()
    if missing:
        return f"test hosts need {', '.join(missing)} (apt-get install openssh-server podman runc busybox-static)"
    return None


def _require() -> None:
    problem = _why_not()
    if problem is None:
        return
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"{problem}: under CI the test-host tests must run, not skip.")
    pytest.skip(problem)


@pytest.fixture
def make_fleet():
    """``make_fleet(count, cards=8)``: test hosts torn down after the test, even when it fails."""
    _require()
    made: list[Fleet] = []

    def make(count: int = 1, *, cards: int = 8) -> Fleet:
        fleet = Fleet(count, cards=cards)
        made.append(fleet)
        return fleet

    yield make
    for fleet in made:
        fleet.close()


@pytest.fixture
def real_access(settings, tmp_path):
    """Settings for the real provisioner against test hosts (the fleet's operator key is set by ``bind_fleet``)."""
    settings.ANCHORGPU_PROVISIONER = "anchorgpu.access.provisioner.SSHProvisioner"
    settings.ANCHORGPU_HOST_SSH_TIMEOUT = 5
    settings.ANCHORGPU_WORKSPACE_GIB_PER_CARD = 1
    return settings
