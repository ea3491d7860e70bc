"""What the operators' chain-watcher page shows (a read)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from anchorgpu.chains.base import redact

from .models import Asset, WatchState
from .watch_config import env_name, watch_url


@dataclass(frozen=True)
class WatchRow:
    asset: Asset
    endpoint: str  # scheme, host and port only: a key in the URL is never shown
    from_env: bool
    state: WatchState | None
    status: str  # "off", "waiting", "ok", "failing", "stalled"

    @property
    def seconds_since_success(self) -> int | None:
        if self.state is None or self.state.last_success_at is None:
            return None
        return int((timezone.now() - self.state.last_success_at).total_seconds())


def _status(url: str, state: WatchState | None, now: datetime) -> str:
    if not url:
        return "off"
    if state is None or state.last_poll_at is None:
        return "waiting"
    stalled = state.last_success_at is None or \
        (now - state.last_success_at).total_seconds() > settings.ANCHORGPU_WATCH_STALL_SECONDS
    # A node that answers but is stuck on an old block is no better than one that is down.
    if state.tip_time is not None and (now - state.tip_time).total_seconds() > settings.ANCHORGPU_WATCH_TIP_AGE_SECONDS:
        stalled = True
    if stalled:
        return "stalled"
    return "failing" if state.errors_in_row else "ok"


def watch_rows(now: datetime | None = None) -> list[WatchRow]:
    now = now or timezone.now()
    states = {s.asset_id: s for s in WatchState.objects.all()}
    rows = []
    for asset in Asset.objects.filter(is_active=True):
        url = watch_url(asset)
        state = states.get(asset.pk)
        rows.append(WatchRow(asset=asset, endpoint=redact(url) if url else "", from_env=bool(
            url and url != asset.watch_url.strip()), state=state, status=_status(url, state, now)))
    return rows


__all__ = ["WatchRow", "watch_rows", "env_name"]
