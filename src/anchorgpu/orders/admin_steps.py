"""What the operator reads about an order's access (issue 24, item 7): each step with its start, end, duration
and output; the failed attempts and health re-checks between them; who holds the step under way and when the
next try is due. Reads only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from anchorgpu.audit.models import AuditEntry

from .models import STEP_CHOICES, Order
from .provisioning import WIPE
from .retry import MAX_FAILURES, MAX_UNREACHABLE, MAX_WIPE_FAILURES

_LABELS = dict(STEP_CHOICES)
_RECORDED = ("provisioning_error", "wipe_error", "health_recheck")


@dataclass(frozen=True)
class StepRow:
    what: str
    outcome: str  # "done", "failed", "checked"
    started_at: datetime | None
    finished_at: datetime | None
    output: str  # pretty-printed JSON, or the error

    @property
    def duration(self) -> str:
        if self.started_at is None or self.finished_at is None:
            return "—"
        seconds = (self.finished_at - self.started_at) / timedelta(seconds=1)
        return f"{seconds:.1f} s"


def _when(text) -> datetime | None:
    return parse_datetime(text) if isinstance(text, str) else None


def _pretty(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def step_rows(order: Order) -> list[StepRow]:
    rows = [StepRow(_LABELS.get(s.step, s.step), "done", s.started_at, s.finished_at, _pretty(s.detail))
            for s in order.steps.all()]
    entries = AuditEntry.objects.filter(object_type=order._meta.label_lower, object_id=str(order.pk),
                                        action__in=_RECORDED).order_by("at", "id")
    for entry in entries:
        data = entry.data or {}
        if entry.action == "health_recheck":
            ok = data.get("ok")
            rows.append(StepRow(_("Health re-check (by %(actor)s)") % {"actor": entry.actor},
                                "checked" if ok else "failed", _when(data.get("started_at")),
                                _when(data.get("finished_at")) or entry.at,
                                _pretty(data.get("detail")) if ok else str(data.get("error", ""))))
            continue
        step = WIPE if entry.action == "wipe_error" else data.get("step", "?")
        rows.append(StepRow(_("%(step)s: failed attempt") % {"step": _LABELS.get(step, step)}, "failed",
                            _when(data.get("started_at")), _when(data.get("failed_at")) or entry.at,
                            entry.reason))
    return sorted(rows, key=lambda r: r.finished_at)  # every row has an end: the step's, or its audit row's time


def access_status(order: Order) -> list[str]:
    """One line each: the step under way and who holds it, the next try, the counts of failures, the wipe."""
    lines = []
    if order.lease_owner:
        lines.append(_("Under way: %(step)s, held by %(owner)s since %(since)s until %(until)s UTC.") % {
            "step": _LABELS.get(order.lease_step, order.lease_step), "owner": order.lease_owner,
            "since": _stamp(order.lease_started_at), "until": _stamp(order.lease_until)})
    if order.retry_at:
        lines.append(_("Next try not before %(at)s UTC.") % {"at": _stamp(order.retry_at)})
    if order.provisioning_attempts or order.unreachable_attempts:
        lines.append(_("Failed attempts: %(failed)d of %(max)d; host unreachable: %(unreachable)d of "
                       "%(max_unreachable)d.") % {"failed": order.provisioning_attempts, "max": MAX_FAILURES,
                                                  "unreachable": order.unreachable_attempts,
                                                  "max_unreachable": MAX_UNREACHABLE})
    if order.wipe_due_at:
        lines.append(_("Wipe due since %(at)s UTC; failed attempts: %(failed)d of %(max)d.") % {
            "at": _stamp(order.wipe_due_at), "failed": order.wipe_attempts, "max": MAX_WIPE_FAILURES})
    if order.last_error:
        lines.append(_("Last error: %(error)s") % {"error": order.last_error})
    return lines


def _stamp(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "?"
