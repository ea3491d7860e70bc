"""When a booking may start. Pure domain code: the services and the web
forms both ask here, and each words the answer for its own reader."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import Enum

# A start a little in the past is clock skew between browser, API client and
# server, not a request to book the past.
START_GRACE = timedelta(minutes=5)
# The longest maintenance window; a host out for longer is retired instead.
MAX_MAINTENANCE = timedelta(days=730)
# How far ahead a maintenance window may start: further is a typing error (year 9999), not a plan.
MAINTENANCE_AHEAD = timedelta(days=730)


class StartProblem(str, Enum):
    PAST = "past"
    BEYOND_HORIZON = "beyond_horizon"


def start_problem(start: datetime, *, now: datetime, horizon_days: int) -> StartProblem | None:
    if start < now - START_GRACE:
        return StartProblem.PAST
    if start > now + timedelta(days=horizon_days):
        return StartProblem.BEYOND_HORIZON
    return None


def latest_start(now: datetime, horizon_days: int) -> datetime:
    return now + timedelta(days=horizon_days)
