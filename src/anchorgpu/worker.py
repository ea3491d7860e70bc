"""``anchorgpu worker``: the periodic sweeps that move time-driven state.

Each sweep is a service that reads stored timestamps, so a sweep that runs
late (or twice, or in two workers at once) changes nothing that matters:
availability already ignores an expired hold by time; the sweep only marks it.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections

log = logging.getLogger("anchorgpu.worker")


def _sweeps() -> list[tuple[str, Callable[[], int]]]:
    from anchorgpu.allocation.services import hold_expire_due
    from anchorgpu.ops.ratelimit import rate_events_purge
    from anchorgpu.orders.faults import fault_credits_due, late_access_credits_due
    from anchorgpu.orders.fulfilment import provision_due
    from anchorgpu.orders.lifecycle import orders_expire_due, terms_end_due, terms_warn_due
    from anchorgpu.orders.move_wipes import move_wipes_due
    from anchorgpu.orders.notify import emails_send_due
    from anchorgpu.orders.webhooks import webhooks_send_due
    from anchorgpu.orders.wipes import wipes_due
    from anchorgpu.payments.claim_check import claims_recheck_due
    from anchorgpu.payments.refunds import refunds_verify_due
    from anchorgpu.payments.watch import watch_poll_all
    from anchorgpu.simulations.services import jobs_purge_old, jobs_requeue_stale

    # Transfers are found first, so a payment that arrived in time is counted before its quote is expired.
    # Expired quotes free their cards before anything else reads availability;
    # ended terms are released, then their machines wiped, before the next term on the same
    # cards is provisioned (which waits for that wipe in any case). Service credits (faults, late access) are
    # issued before the emails and webhooks they queue: those go after the sweeps that queue them.
    return [
        ("chains_poll", lambda: watch_poll_all()),
        ("claims_recheck_due", lambda: claims_recheck_due()),
        ("refunds_verify_due", lambda: refunds_verify_due()),
        ("orders_expire_due", lambda: orders_expire_due()),
        ("hold_expire_due", lambda: hold_expire_due()),
        ("terms_end_due", lambda: terms_end_due()),
        ("wipes_due", lambda: wipes_due()),
        ("move_wipes_due", lambda: move_wipes_due()),
        ("provision_due", lambda: provision_due()),
        ("terms_warn_due", lambda: terms_warn_due()),
        ("fault_credits_due", lambda: fault_credits_due()),
        ("late_access_credits_due", lambda: late_access_credits_due()),
        ("emails_send_due", lambda: emails_send_due()),
        ("webhooks_send_due", lambda: webhooks_send_due()),
        ("simulations_requeue_stale", lambda: jobs_requeue_stale()),
        ("simulations_purge_old", lambda: jobs_purge_old()),
        ("rate_events_purge", lambda: rate_events_purge()),
    ]


def run_once() -> dict[str, int]:
    from django.utils import timezone

    from anchorgpu.ops.sweeps import sweep_recorded

    results = {}
    for name, sweep in _sweeps():
        close_old_connections()
        started_at, started = timezone.now(), time.monotonic()
        try:
            results[name] = sweep()
        except Exception as exc:  # one failing sweep must not stop the others
            log.exception("sweep %s failed", name)
            results[name] = -1
            # A lost database connection is closed here, so the record below and the next sweep reconnect.
            close_old_connections()
            sweep_recorded(name=name, started_at=started_at, seconds=time.monotonic() - started,
                           error=f"{type(exc).__name__}: {exc}")
        else:
            sweep_recorded(name=name, started_at=started_at, seconds=time.monotonic() - started,
                           result=results[name])
    return results


def run_forever(interval: float, *, simulations: bool = True) -> None:
    """Sweeps every ``interval`` seconds until SIGTERM or SIGINT; with ``simulations``, a thread runs the
    planner's queued simulations beside the sweeps (a long simulation never delays a sweep)."""
    stop = threading.Event()
    runner = None
    if simulations:
        from anchorgpu.simulations.runner import SimulationRunner

        runner = SimulationRunner()
        runner.start()

    def request_stop(signum, _frame):
        log.info("signal %s: stopping after this sweep", signum)
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    log.info("worker started, sweeping every %g s", interval)
    while not stop.is_set():
        started = time.monotonic()
        try:
            results = run_once()
        except Exception:  # noqa: BLE001 - the worker outlives a database that is down for a while
            log.exception("the sweeps could not run; trying again in %g s", interval)
            close_old_connections()
            results = {}
        changed = {k: v for k, v in results.items() if v}
        if changed:
            log.info("sweep results: %s", changed)
        stop.wait(max(0.0, interval - (time.monotonic() - started)))
    if runner is not None:
        runner.stop()
