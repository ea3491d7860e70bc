"""``anchorgpu serve`` runs the whole demo: the shop, and the worker beside it as a child process that
sends the emails (with links to the port served on) and stops when the server stops. Run as a user runs
it, in a subprocess on its own SQLite file; every wait is bounded."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from anchorgpu.serve import site_url_default, site_url_for

ANCHORGPU = [sys.executable, "-m", "anchorgpu.cli"]
ROOT = Path(__file__).resolve().parents[1]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl walk@laptop"
PLACE_ORDER = f"""
from django.contrib.auth import get_user_model
from anchorgpu.catalog.models import Environment, Product
from anchorgpu.orders.services import Checkout, order_place
from anchorgpu.orders.ssh_keys import parse_keys
from anchorgpu.payments.models import Asset
user = get_user_model().objects.create_user(username="walk@example.com", email="walk@example.com", password="x" * 16)
order = order_place(user=user, request=Checkout(
    product=Product.objects.get(slug="h100-sxm-80gb"), quantity=1, term_days=3, start=None,
    environment=Environment.objects.get(slug="pytorch-cuda124"), asset=Asset.objects.get(code="btc"),
    name="Walk Example", email=user.email, country="PT", ssh_keys=parse_keys({KEY!r})))
print("REFERENCE", order.reference)
"""


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "ANCHORGPU_DATABASE_URL", "ANCHORGPU_SITE_URL", "ANCHORGPU_EMAIL_HOST"}}
    env.update(ANCHORGPU_DATA_DIR=str(tmp_path), PYTHONUNBUFFERED="1", ANCHORGPU_LOG_FORMAT="plain")
    return env


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """``anchorgpu serve`` in a subprocess, its output (the worker's too: same terminal) read by a thread."""

    def __init__(self, tmp_path: Path, port: int):
        self.port, self.lines, self.env, self.worker = port, [], _env(tmp_path), None
        self.proc = subprocess.Popen([*ANCHORGPU, "serve", "--port", str(port), "--worker-interval", "1"],
                                     env=self.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, seconds: float) -> re.Match:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output)
            if found:
                return found
            if not self._reader.is_alive():  # everything it will ever print has been read
                break
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} within {seconds} s; output:\n{self.output[-3000:]}")

    def wait_for_http(self, path: str, seconds: float = 90) -> int:
        deadline = time.monotonic() + seconds
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as response:
                    return response.status
            except OSError:
                assert self.proc.poll() is None, self.output[-3000:]
                assert time.monotonic() < deadline, f"the shop did not answer within {seconds} s"
                time.sleep(0.3)

    def worker_pid(self) -> int:
        self.worker = int(self.wait_for(r"Worker running beside it \(pid (\d+)\)", 30).group(1))
        return self.worker

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        if self.worker is not None and not _gone(self.worker, 0.5):  # a failed test leaves no orphan behind
            os.kill(self.worker, signal.SIGKILL)


def _gone(pid: int, seconds: float) -> bool:
    """The process has exited and been reaped (a zombie still answers kill 0; its /proc status says Z)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            status = Path(f"/proc/{pid}/status")
            if status.exists() and re.search(r"^State:\s+Z", status.read_text(), re.M):
                return True  # exited; its parent is gone too, so init reaps it
        except ProcessLookupError:
            return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def served(tmp_path):
    server = Served(tmp_path, _free_port())
    yield server
    server.close()


def test_serve_runs_the_worker_whose_emails_link_to_the_port_and_stops_it(served):
    assert served.wait_for_http("/en/") == 200  # the catalog
    worker = served.worker_pid()
    assert f"Links in emails: http://127.0.0.1:{served.port}" in served.output
    placed = subprocess.run([*ANCHORGPU, "shell", "-c", PLACE_ORDER], cwd=ROOT, capture_output=True, text=True,
                            env={**served.env, "ANCHORGPU_ALLOW_TEST_KEYS": "1"}, timeout=120)
    assert placed.returncode == 0, placed.stderr[-3000:]
    reference = re.search(r"REFERENCE (\S+)", placed.stdout).group(1)
    # The worker sends the order's email (printed by the console backend, into the server's terminal) with
    # a link to the order on the port the shop is served on.
    link = served.wait_for(rf"http://127\.0\.0\.1:{served.port}/\S*/orders/{reference}/", 60).group(0)
    with urllib.request.urlopen(link, timeout=10) as response:  # the link leads to this shop (log-in first)
        assert response.status == 200
    os.kill(served.proc.pid, signal.SIGTERM)  # stop the server by its PID
    assert served.proc.wait(timeout=40) == 0, served.output[-3000:]
    assert _gone(worker, 10), f"the worker (pid {worker}) outlived the server"
    assert f"Worker (pid {worker}) stopped" in served.output


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "killed"])
def test_the_worker_never_outlives_the_server(served, how):
    if how == signal.SIGKILL and not sys.platform.startswith("linux"):
        pytest.skip("the kernel stops the child of a killed server on Linux only (PR_SET_PDEATHSIG)")
    assert served.wait_for_http("/en/") == 200
    worker = served.worker_pid()
    served.wait_for(r"worker started", 30)
    os.kill(served.proc.pid, how)
    served.proc.wait(timeout=40)
    assert _gone(worker, 15), f"the worker (pid {worker}) outlived the server"


def test_the_site_url_follows_the_port_unless_configured(monkeypatch):
    monkeypatch.delenv("ANCHORGPU_SITE_URL", raising=False)
    assert site_url_default("127.0.0.1", 8001) == "http://127.0.0.1:8001"
    monkeypatch.setenv("ANCHORGPU_SITE_URL", "https://shop.example.com")
    assert site_url_default("127.0.0.1", 8001) == "https://shop.example.com"
    assert site_url_for("0.0.0.0", 9000) == "http://127.0.0.1:9000"
    assert site_url_for("::1", 9000) == "http://[::1]:9000"
    assert site_url_for("localhost", 80) == "http://localhost:80"


def test_serve_refuses_a_bad_worker_interval():
    bad = subprocess.run([*ANCHORGPU, "serve", "--worker-interval", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "greater than zero" in bad.stderr and "Traceback" not in bad.stderr
