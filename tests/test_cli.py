"""The anchorgpu command, run as a user runs it: in a subprocess."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ANCHORGPU = [sys.executable, "-m", "anchorgpu.cli"]


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "ANCHORGPU_DATABASE_URL"}}
    env["ANCHORGPU_DATA_DIR"] = str(tmp_path)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_migrates_loads_demo_and_serves(tmp_path):
    port = _free_port()
    proc = subprocess.Popen([*ANCHORGPU, "serve", "--port", str(port)], env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/offers?term=3&quantity=1", timeout=5) as r:
                    offers = json.load(r)
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "the shop did not answer within 60 s"
                time.sleep(0.3)
        assert len(offers) == 5 and all(o["units_free_now"] >= 0 for o in offers)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/en/", timeout=5) as r:
            page = r.read().decode()
        assert "H200 141 GB" in page
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/anchorgpu/shop.css", timeout=5) as r:
            assert r.status == 200
        assert (tmp_path / "anchorgpu.sqlite3").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_worker_once_and_bad_arguments(tmp_path):
    env = _env(tmp_path)
    subprocess.run([*ANCHORGPU, "migrate", "--noinput", "-v", "0"], env=env, check=True)
    done = subprocess.run([*ANCHORGPU, "worker", "--once"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "hold_expire_due" in done.stdout
    for argv, words in [(["serve", "--port", "eighty"], "not a port number"),
                        (["serve", "--port", "70000"], "between 1 and 65535"),
                        (["worker", "--interval", "-1"], "greater than zero")]:
        bad = subprocess.run([*ANCHORGPU, *argv], env=env, capture_output=True, text=True)
        assert bad.returncode == 2
        assert words in bad.stderr and "Traceback" not in bad.stderr
