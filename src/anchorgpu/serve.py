"""``anchorgpu serve``: the whole demo in one command -- the shop, and the worker beside it.

The worker (emails, quote expiry, access preparation: ``anchorgpu.worker``) runs as a child process with the
same environment and the same terminal, so its log lines and the console's emails show where the server's
do. It is stopped by its PID when the server stops (Ctrl-C, SIGTERM, or a port that cannot be bound), and on
Linux the kernel stops it too if the server dies without cleaning up (``PR_SET_PDEATHSIG``).

Links in emails are built from ``ANCHORGPU_SITE_URL``; unless the operator set it, ``site_url_default`` makes
it the address this server listens on, so a shop served on port 8001 sends links to port 8001.

One process answers, so its metrics are counted in memory. If ``PROMETHEUS_MULTIPROC_DIR`` is set anyway, the
folder is emptied before the shop is loaded, so a previous run's counts are not added to this one's.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import signal
import subprocess
import sys

WORKER_STOP_SECONDS = 20  # a sweep in progress finishes first; then the worker is killed
_WILDCARD_HOSTS = {"", "0.0.0.0", "::", "[::]"}


def site_url_for(host: str, port: int) -> str:
    """The address a browser on this machine reaches the shop at (a wildcard host is reached on loopback)."""
    host = host.strip()
    if host in _WILDCARD_HOSTS:
        host = "127.0.0.1"
    try:
        if ipaddress.ip_address(host.strip("[]")).version == 6:
            host = f"[{host.strip('[]')}]"
    except ValueError:
        pass  # a host name
    return f"http://{host}:{port}"


def site_url_default(host: str, port: int) -> str:
    """Set ``ANCHORGPU_SITE_URL`` from the host and port served on, unless the operator configured one;
    returns the value in force. Called before Django reads its settings (and before the worker starts)."""
    if not os.environ.get("ANCHORGPU_SITE_URL", "").strip():
        os.environ["ANCHORGPU_SITE_URL"] = site_url_for(host, port)
    return os.environ["ANCHORGPU_SITE_URL"]


def _prctl():
    """libc's prctl, looked up here in the parent: the child, forked while the server's threads run, makes
    one foreign call between fork and exec and loads nothing (a lookup there could wait on a lock that a
    thread of the parent held at the fork)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _die_with_parent(prctl):
    def in_child() -> None:  # between fork and exec
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    return in_child


def worker_start(*, interval: float) -> subprocess.Popen:
    """The worker as a child process of this one, sharing its terminal; the server runs the planner's
    simulations itself, so the worker does not."""
    command = [sys.executable, "-m", "anchorgpu.cli", "worker", "--interval", f"{interval:g}", "--no-simulations"]
    prctl = _prctl() if sys.platform.startswith("linux") else None
    return subprocess.Popen(command, env=dict(os.environ),
                            preexec_fn=_die_with_parent(prctl) if prctl is not None else None)


def worker_stop(worker: subprocess.Popen, *, timeout: float = WORKER_STOP_SECONDS) -> int:
    """Ask the worker to stop (SIGTERM: it ends the sweep in progress), wait for it, kill it if it hangs.
    Returns its exit status; the process is reaped, so no zombie is left either."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=timeout)
    return worker.returncode


def _stop_on_sigterm() -> None:
    """SIGTERM stops the server as Ctrl-C does (waitress shuts down on SystemExit), so the worker is stopped."""
    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def run(*, host: str, port: int, threads: int, worker: bool, worker_interval: float, simulations: bool) -> int:
    """Serve the shop (Django is set up and the database prepared) with the worker beside it."""
    from waitress.server import create_server

    from anchorgpu.ops import metrics_dir

    try:
        if metrics_dir.configured() is not None:  # before prometheus-client is imported with the shop
            metrics_dir.empty(metrics_dir.configured())
    except metrics_dir.MetricsDirError as exc:
        print(f"anchorgpu serve: {exc}", file=sys.stderr)
        return 2
    from anchorgpu.wsgi import application

    server = create_server(application, host=host, port=port, threads=threads, ident="anchorgpu")
    _stop_on_sigterm()
    child = worker_start(interval=worker_interval) if worker else None
    try:
        if simulations:
            from anchorgpu.simulations.runner import SimulationRunner

            SimulationRunner().start()  # a daemon thread; each simulation runs in a child process
        print(f"AnchorGPU shop on http://{host}:{port}/  (Ctrl-C stops it)", flush=True)
        print(f"Links in emails: {os.environ.get('ANCHORGPU_SITE_URL', '')}", flush=True)
        if child is not None:
            print(f"Worker running beside it (pid {child.pid}): emails, quote expiry, access preparation, "
                  f"every {worker_interval:g} s", flush=True)
        server.run()  # returns on Ctrl-C or SIGTERM
    finally:
        if child is not None:
            status = worker_stop(child)
            print(f"Worker (pid {child.pid}) stopped, exit status {status}.", flush=True)
    return 0
