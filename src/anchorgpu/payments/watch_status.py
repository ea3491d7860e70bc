"""What the operators' chain-watcher page shows (a read): one row per accepted asset, grouped by network (the
assets of one network share its node and its blocks)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.chains.base import redact

from .models import Asset, WatchState
from .watch_config import env_name, watch_url

# How the EVM adapter (anchorgpu.chains.evm) words a node on another chain; the page says it plainly.
_OTHER_CHAIN = re.compile(r"the node is on chain id (\d+)")
# Worst first: a network's status is that of its worst watcher.
_SEVERITY = {"stalled": 0, "failing": 1, "waiting": 2, "ok": 3, "off": 4}


@dataclass(frozen=True)
class WatchRow:
    asset: Asset
    endpoint: str  # scheme, host and port only: a key in the URL is never shown
    from_env: bool
    state: WatchState | None
    status: str  # "off", "waiting", "ok", "failing", "stalled"
    now: datetime | None = None

    @property
    def seconds_since_success(self) -> int | None:
        if self.state is None or self.state.last_success_at is None:
            return None
        return int(((self.now or timezone.now()) - self.state.last_success_at).total_seconds())

    @property
    def tip_age_seconds(self) -> int | None:
        """How old the last block seen is, by its own timestamp."""
        if self.state is None or self.state.tip_time is None:
            return None
        return max(0, int(((self.now or timezone.now()) - self.state.tip_time).total_seconds()))

    @property
    def lag_blocks(self) -> int | None:
        return self.state.lag_blocks if self.state is not None else None

    @property
    def other_chain_id(self) -> int | None:
        """The chain id the node answered with, when the last poll failed because it is not the asset's."""
        if self.state is None or not self.state.errors_in_row or not self.state.last_error:
            return None
        found = _OTHER_CHAIN.search(self.state.last_error)
        return int(found.group(1)) if found else None


@dataclass(frozen=True)
class NetworkGroup:
    """The watchers of one network: its name, chain id, finality rules and node endpoints, and their rows."""

    network: str
    network_name: str
    scheme: str
    chain_ids: tuple[int, ...]
    rows: tuple[WatchRow, ...]

    @property
    def status(self) -> str:
        return min((r.status for r in self.rows), key=_SEVERITY.__getitem__, default="off")

    @property
    def endpoints(self) -> tuple[str, ...]:
        return tuple(sorted({r.endpoint for r in self.rows if r.endpoint}))

    @property
    def finality(self) -> tuple[str, ...]:
        """Each asset's rule in words: "12 confirmations", "the finalized block + 1"."""
        return tuple(sorted({finality_text(r.asset) for r in self.rows}))

    @property
    def other_chain_ids(self) -> tuple[int, ...]:
        return tuple(sorted({r.other_chain_id for r in self.rows if r.other_chain_id is not None}))

    @property
    def max_lag(self) -> int | None:
        lags = [r.lag_blocks for r in self.rows if r.lag_blocks is not None]
        return max(lags) if lags else None

    @property
    def tip(self) -> int | None:
        tips = [r.state.tip for r in self.rows if r.state is not None and r.state.tip is not None]
        return max(tips) if tips else None

    @property
    def errors_in_row(self) -> int:
        return max((r.state.errors_in_row for r in self.rows if r.state is not None), default=0)

    @property
    def watched(self) -> int:
        return sum(r.state.watched for r in self.rows if r.state is not None)

    def as_json(self) -> dict:
        """For the ops status: plain values only."""
        return {"network": self.network, "name": self.network_name, "chain_ids": list(self.chain_ids),
                "status": self.status, "tip": self.tip, "lag_blocks": self.max_lag,
                "errors_in_row": self.errors_in_row, "watched": self.watched,
                "node_on_other_chain": list(self.other_chain_ids),
                "assets": [r.asset.code for r in self.rows]}


def finality_text(asset: Asset) -> str:
    if asset.finality == "depth" or asset.scheme not in ("evm", "tron"):
        return _("%(n)d confirmations") % {"n": asset.confirmations_required}
    return _("the “%(tag)s” block, %(n)d deep") % {"tag": asset.finality, "n": asset.confirmations_required}


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


def watch_row(asset: Asset, state: WatchState | None, now: datetime | None = None) -> WatchRow:
    """One asset's watcher as the pages show it (``state``: its WatchState, None when never polled)."""
    now = now or timezone.now()
    url = watch_url(asset)
    return WatchRow(asset=asset, endpoint=redact(url) if url else "", from_env=bool(
        url and url != asset.watch_url.strip()), state=state, status=_status(url, state, now), now=now)


def watch_rows(now: datetime | None = None) -> list[WatchRow]:
    now = now or timezone.now()
    states = {s.asset_id: s for s in WatchState.objects.all()}
    return [watch_row(asset, states.get(asset.pk), now) for asset in Asset.objects.filter(is_active=True)]


def watch_networks(now: datetime | None = None, rows: list[WatchRow] | None = None) -> list[NetworkGroup]:
    """The rows grouped by network, in the order their first asset is listed."""
    rows = watch_rows(now) if rows is None else rows
    grouped: dict[str, list[WatchRow]] = {}
    for row in rows:
        grouped.setdefault(row.asset.network, []).append(row)
    groups = []
    for network, members in grouped.items():
        first = members[0].asset
        groups.append(NetworkGroup(
            network=network, network_name=first.network_name, scheme=first.scheme,
            chain_ids=tuple(sorted({r.asset.chain_id for r in members if r.asset.chain_id is not None})),
            rows=tuple(members)))
    return groups


__all__ = ["NetworkGroup", "WatchRow", "watch_networks", "watch_row", "watch_rows", "finality_text", "env_name"]
