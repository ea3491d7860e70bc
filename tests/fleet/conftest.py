"""The SSH test host of fleet discovery's tests (see replay_host.py), one sshd for the session, stopped by PID."""

from __future__ import annotations

import pytest

from .replay_host import ReplayHost


@pytest.fixture(scope="session")
def replay(tmp_path_factory):
    host = ReplayHost(tmp_path_factory.mktemp("replay-host"))
    yield host
    host.stop()


@pytest.fixture
def ssh_settings(settings, replay):
    settings.ANCHORGPU_HOST_SSH_KEY_FILE = str(replay.operator_key_file)
    settings.ANCHORGPU_HOST_SSH_TIMEOUT = 10
    return settings
