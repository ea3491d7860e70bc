"""A backup holds password hashes and the operators' TOTP secrets: it is written readable by its owner only
(0600) in a folder only its owner may enter (0700), whatever the umask, on either database."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from tests import shop

pytestmark = pytest.mark.django_db(transaction=True)  # committed rows: pg_dump reads them from outside


@pytest.fixture
def open_umask():
    previous = os.umask(0o022)  # the usual default: files 0644, folders 0755
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_backup_file_is_readable_by_its_owner_only(tmp_path, open_umask, capsys):
    shop.customer()  # a password hash to keep secret
    output = tmp_path / "new" / "backups" / "shop.backup"
    call_command("backup", output=str(output))
    assert str(output) in capsys.readouterr().out
    assert mode(output) == 0o600
    assert mode(output.parent) == 0o700 and mode(output.parent.parent) == 0o700  # the folders it made
    assert not list(output.parent.glob("*.partial"))
    nobody = shutil.which("setpriv")
    if os.geteuid() == 0 and nobody:  # a real read by another user, where this machine lets the test be one
        os.chmod(tmp_path, 0o755)
        tried = subprocess.run([nobody, "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(output)],
                               capture_output=True, timeout=30)
        assert tried.returncode != 0 and b"Permission denied" in tried.stderr


def test_the_default_folder_is_narrowed_to_its_owner(tmp_path, open_umask, settings, capsys):
    settings.DATA_DIR = tmp_path
    folder = tmp_path / "backups"
    folder.mkdir(mode=0o755)
    call_command("backup")
    written = Path(capsys.readouterr().out.split(" (")[0])
    assert written.parent == folder and mode(written) == 0o600 and mode(folder) == 0o700
