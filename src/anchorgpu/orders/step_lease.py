"""The worker's lease on an order's next step or wipe (DESIGN §6).

A step's remote work (SSH, containers) takes seconds to minutes and runs with no transaction open and no row
locked. What keeps a second worker off it meanwhile is a lease written on the order in a short transaction of
its own before the work starts: who holds it (``<host name>:<pid>:<token>``), which step, since when, and until
when (``ANCHORGPU_STEP_LEASE_SECONDS`` from the claim). One step runs at a time per order, so the lease lives on
the order itself. The step's result is recorded in a second short transaction, and only if the lease is still
the recorder's: a worker that finds it gone (taken over after it expired, or cleared by an operator) throws its
result away; the step is idempotent by name, so whoever holds the lease now repeats it and carries on.

A lease is free when nobody holds it, when it has expired, or when its holder is known to be gone:
- a process on this machine (same host name) that no longer runs: taken over at once, not after the expiry;
- this very process, when no thread of it is running the step any more (the step was interrupted, or the
  database went away while it ran): taken over at once too.
A holder on another machine is never presumed dead: its lease is waited out.

These functions change the order in memory; the caller saves ``FIELDS`` in its own transaction.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

log = logging.getLogger(__name__)

FIELDS = ("lease_owner", "lease_step", "lease_started_at", "lease_until")

_held: set[str] = set()  # the leases this process is running a step under now
_held_lock = threading.Lock()


def _machine() -> str:
    return socket.gethostname()[:60]


def new_owner() -> str:
    return f"{_machine()}:{os.getpid()}:{secrets.token_hex(6)}"


def lease_seconds() -> int:
    return max(int(getattr(settings, "ANCHORGPU_STEP_LEASE_SECONDS", 900) or 900), 30)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it runs
        return True
    except OSError:
        return True  # cannot tell: presume it runs and wait the lease out
    return True


def holder_gone(owner: str) -> bool:
    """True when the lease's holder is known not to run it any more (see the module's docstring)."""
    machine, _, rest = owner.partition(":")
    pid_text, _, _token = rest.partition(":")
    if machine != _machine() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        with _held_lock:
            return owner not in _held
    return not _pid_alive(pid)


def is_free(order, now: datetime) -> bool:
    if not order.lease_owner:
        return True
    if order.lease_until is None or order.lease_until <= now:
        return True
    return holder_gone(order.lease_owner)


def take(order, step: str, now: datetime) -> str:
    """Write a new lease on ``order`` (locked by the caller) and return its owner string."""
    owner = new_owner()
    order.lease_owner, order.lease_step = owner, step
    order.lease_started_at, order.lease_until = now, now + timedelta(seconds=lease_seconds())
    with _held_lock:
        _held.add(owner)
    return owner


def forget(owner: str) -> None:
    """This process no longer runs a step under ``owner`` (done, failed or interrupted)."""
    with _held_lock:
        _held.discard(owner)


def hand_back(order_pk: int, owner: str) -> None:
    """Give a lease back after an interruption (best effort: the database may be gone; the lease then expires,
    or this process takes it back, as it is no longer held)."""
    from django.db import transaction

    from .models import Order

    forget(owner)
    try:
        with transaction.atomic():
            order = Order.objects.select_for_update(of=("self",)).filter(pk=order_pk).first()
            if order is not None and order.lease_owner == owner:
                clear(order)
                order.save(update_fields=[*FIELDS, "updated_at"])
    except Exception:  # noqa: BLE001
        log.warning("order #%s: could not hand the lease back", order_pk, exc_info=True)


def clear(order) -> None:
    order.lease_owner, order.lease_step, order.lease_started_at, order.lease_until = "", "", None, None


def described(order) -> str:
    """For the operator: who holds the order's lease on which step, until when ("" when none)."""
    if not order.lease_owner:
        return ""
    until = order.lease_until.isoformat() if order.lease_until else "?"
    return f"{order.lease_step} by {order.lease_owner} until {until}"


@dataclass(frozen=True)
class Claim:
    """A step (a ``provisioning.Step``, or ``provisioning.WIPE``) this worker holds the lease on."""

    order: object  # the Order, as read in the claim transaction
    step: object
    owner: str
    started_at: datetime

    @property
    def name(self) -> str:
        return str(getattr(self.step, "value", self.step))


def run_leased(order_pk: int, owner: str, work: Callable[[], dict], *, failed: Callable[[Exception], None],
               done: Callable[[dict], bool]) -> str:
    """Run ``work`` (the provisioner's call, with no transaction open) under the lease ``owner`` holds, then
    ``done(detail)`` to record it, or ``failed(error)`` to count a failed attempt: "done", "failed" or "" (the
    record found the lease gone). A lost database connection leaves the lease to the next sweep; an interrupt
    (Ctrl-C, SystemExit) hands it back before it goes on."""
    from django.db import InterfaceError, OperationalError

    try:
        detail = work()
    except (OperationalError, InterfaceError):
        forget(owner)
        raise
    except Exception as exc:  # noqa: BLE001 - a failed attempt, counted
        try:
            failed(exc)
        finally:
            forget(owner)
        return "failed"
    except BaseException:
        hand_back(order_pk, owner)
        raise
    try:
        return "done" if done(detail) else ""
    finally:
        forget(owner)
