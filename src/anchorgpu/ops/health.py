"""``/healthz`` (the process answers) and ``/readyz`` (it can serve: database
reachable, every migration applied, no chain watcher stalled)."""

from __future__ import annotations

from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


@never_cache
@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


def _database() -> tuple[bool, str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return False, f"unreachable: {type(exc).__name__}"
    return True, "reachable"


def _migrations() -> tuple[bool, str]:
    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        return False, f"cannot be read: {type(exc).__name__}"
    if pending:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _backwards in pending[:5])
        return False, f"{len(pending)} not applied ({names})"
    return True, "all applied"


def _watchers(networks: list | None = None) -> tuple[bool, str]:
    """Whether no chain watcher is stalled; ``networks``, when given, receives each watched network's state."""
    from anchorgpu.payments.watch_status import watch_networks, watch_rows

    try:
        rows = watch_rows(timezone.now())
    except DatabaseError as exc:
        return False, f"cannot be read: {type(exc).__name__}"
    if networks is not None:
        networks.extend(g.as_json() for g in watch_networks(rows=rows) if g.status != "off")
    stalled = [r.asset.code for r in rows if r.status == "stalled"]
    if stalled:
        return False, "stalled: " + ", ".join(stalled)
    watched = [r for r in rows if r.status != "off"]
    return True, f"{len(watched)} watched, none stalled"


@never_cache
@require_GET
def readyz(request):
    """503 with the failing checks named, so a load balancer stops sending traffic and an operator sees why."""
    checks = {"database": _database()}
    networks: list[dict] = []
    if checks["database"][0]:
        checks["migrations"] = _migrations()
        if checks["migrations"][0]:
            checks["chain_watchers"] = _watchers(networks)
    ready = all(ok for ok, _ in checks.values())
    body = {"status": "ready" if ready else "not ready",
            "checks": {name: {"ok": ok, "detail": detail} for name, (ok, detail) in checks.items()}}
    if networks:  # each watched network: status, tip, lag, errors, a node on another chain (no URLs, no errors' text)
        body["chain_networks"] = networks
    return JsonResponse(body, status=200 if ready else 503)
