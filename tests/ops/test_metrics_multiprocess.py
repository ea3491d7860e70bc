"""/metrics under gunicorn with several worker processes: every process's requests are counted, not the share
of whichever process answers the scrape (prometheus-client's multiprocess mode, ``anchorgpu.gunicorn_conf``).

The server is real: gunicorn with two gthread workers on a loopback port, in its own session, stopped by its
PID. Its database is an empty SQLite file of its own (``/healthz`` and the request timings need none; the
database's gauges then say ``anchorgpu_database_up 0``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from anchorgpu.ops import metrics, metrics_dir

REPO = Path(__file__).resolve().parents[2]
TOKEN = "multiprocess-test-token"
WORKERS = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _get(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    """A request on a new connection. Any failure but a refused connection raises: a request that timed out
    may still have been answered and counted, so the test could no longer know the total."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            return 0, ""  # nothing listens yet: nothing was counted
        raise


def _healthz_count(text: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "anchorgpu_request_seconds_count" and sample.labels.get("view") == "healthz":
                total += sample.value
    return total


def _sample(text: str, name: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    return None


def _per_process_counts(folder: Path) -> dict[int, float]:
    """Requests to /healthz counted in each process's own histogram file."""
    counts = {}
    for path in folder.glob("histogram_*.db"):
        pid = int(path.stem.rsplit("_", 1)[1])
        families = MultiProcessCollector.merge([str(path)], accumulate=True)
        counts[pid] = _healthz_count_families(families)
    return counts


def _healthz_count_families(families) -> float:
    return sum(s.value for f in families for s in f.samples
               if s.name == "anchorgpu_request_seconds_count" and s.labels.get("view") == "healthz")


def _seed_stale_file(folder: Path, env: dict) -> None:
    """A previous run's figures, written the way a worker writes them: the new server must not add them."""
    script = ("from prometheus_client import Histogram\n"
              "h = Histogram('anchorgpu_request_seconds', 'x', ['view', 'method', 'status'])\n"
              "for _ in range(1000): h.labels(view='healthz', method='GET', status='2xx').observe(0.001)\n")
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)
    assert list(folder.glob("histogram_*.db"))


@pytest.fixture
def gunicorn(tmp_path):
    folder = tmp_path / "prometheus"
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "ANCHORGPU_DATABASE_URL"}}
    env.update(PROMETHEUS_MULTIPROC_DIR=str(folder), ANCHORGPU_DATA_DIR=str(tmp_path / "data"),
               ANCHORGPU_METRICS_TOKEN=TOKEN, DJANGO_SETTINGS_MODULE="anchorgpu.settings")
    _seed_stale_file(folder, env)
    port = _free_port()
    log_path = tmp_path / "gunicorn.log"
    command = [sys.executable, "-m", "gunicorn", "-c", "python:anchorgpu.gunicorn_conf", "anchorgpu.wsgi:application",
               "--bind", f"127.0.0.1:{port}", "--worker-class", "gthread", "--workers", str(WORKERS),
               "--threads", "2", "--timeout", "60", "--graceful-timeout", "5", "--log-level", "info"]
    with open(log_path, "wb") as log:
        server = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    answered = 0
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "gunicorn did not start within 90 s:\n" + log_path.read_text()
            if len(_children(server.pid)) >= WORKERS:
                status, _ = _get(port, "/healthz")
                if status == 200:
                    answered += 1  # it is counted like any other
                    break
            time.sleep(0.3)
        yield {"server": server, "port": port, "folder": folder, "log": log_path, "answered": answered}
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=20)


def test_a_scrape_counts_the_requests_of_every_worker_process_and_keeps_a_dead_ones(gunicorn):
    server, port, folder = gunicorn["server"], gunicorn["port"], gunicorn["folder"]
    workers = _children(server.pid)
    assert len(workers) == WORKERS
    assert "1 stale files removed" in gunicorn["log"].read_text()  # the seeded file of a previous run

    answered = gunicorn["answered"]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(40):  # batches of concurrent requests until both workers have answered some
            statuses = [status for status, _ in pool.map(lambda _: _get(port, "/healthz"), range(25))]
            assert statuses == [200] * 25, statuses
            answered += 25
            if len([c for pid, c in _per_process_counts(folder).items() if pid in workers and c > 0]) >= WORKERS:
                break
    shares = _per_process_counts(folder)
    assert set(shares) == workers, (shares, workers)  # the seeded file is gone; only this run's workers
    assert all(0 < shares[pid] < answered for pid in workers), shares  # each answered some, none all
    assert sum(shares.values()) == answered

    status, text = _get(port, "/metrics", TOKEN)
    assert status == 200
    assert _healthz_count(text) == answered  # the total, whichever worker answered the scrape
    assert _sample(text, "anchorgpu_requests_in_flight") == 1  # the scrape itself, over both workers
    assert _sample(text, "anchorgpu_database_up") == 0  # the database's figures are there once

    # A worker killed outright: gunicorn's child_exit drops its in-flight gauge file, its counts stay.
    victim = min(workers)
    assert (folder / f"gauge_livesum_{victim}.db").exists()
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while (folder / f"gauge_livesum_{victim}.db").exists() or len(_children(server.pid)) < WORKERS:
        assert time.monotonic() < deadline, gunicorn["log"].read_text()
        time.sleep(0.2)
    assert (folder / f"histogram_{victim}.db").exists()
    status, text = _get(port, "/metrics", TOKEN)  # answered by the surviving worker or its new sibling
    assert status == 200
    assert _healthz_count(text) == answered
    assert _sample(text, "anchorgpu_requests_in_flight") == 1


def test_one_process_counts_in_memory_without_the_variable():
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    assert metrics.MULTIPROCESS is False
    assert metrics.scrape_registry() is metrics.REGISTRY


def test_emptying_the_folder_removes_only_prometheus_files(tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    (folder / "counter_12.db").write_bytes(b"x")
    (folder / "gauge_livesum_12.db").write_bytes(b"x")
    (folder / "notes.txt").write_text("kept")
    (folder / "sub").mkdir()
    (folder / "sub" / "counter_13.db").write_bytes(b"x")
    assert metrics_dir.empty(str(folder)) == 2
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "sub"]
    assert (folder / "sub" / "counter_13.db").exists()
    assert metrics_dir.empty(str(tmp_path / "new" / "folder")) == 0  # created when missing
    assert (tmp_path / "new" / "folder").is_dir()


def test_a_file_where_the_folder_should_be_or_a_blank_variable_is_refused_by_name(tmp_path, monkeypatch):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    with pytest.raises(metrics_dir.MetricsDirError, match="PROMETHEUS_MULTIPROC_DIR="):
        metrics_dir.empty(str(blocker))
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "  ")
    with pytest.raises(metrics_dir.MetricsDirError, match="set but empty"):
        metrics_dir.configured()


def test_ensure_uses_the_configured_folder_or_makes_a_private_one(tmp_path, monkeypatch):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    assert metrics_dir.ensure() == (str(tmp_path), False)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    path, created = metrics_dir.ensure()
    try:
        assert created and os.environ["PROMETHEUS_MULTIPROC_DIR"] == path
        assert Path(path).is_dir() and oct(Path(path).stat().st_mode & 0o777) == "0o700"
    finally:
        os.rmdir(path)
        monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
