"""Rate limits on the actions that attackers repeat: log-in, the two-factor
code, sign-up, password reset, "I've paid" and placing orders. Counted per address and per account (or
per e-mail typed), in the database so every server process shares the counts,
as one row per attempt within a sliding window. The keys are stored as keyed
hashes: no address or e-mail is kept in clear. Refused with 429 and
``Retry-After``."""

from __future__ import annotations

import hashlib
import hmac
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import wraps

from django.conf import settings
from django.shortcuts import render
from django.utils import timezone

from .models import RateEvent


@dataclass(frozen=True)
class Limit:
    scope: str
    count: int
    seconds: int
    by: str  # "address", "account", or "field:<form field>"


LIMITS: dict[str, tuple[Limit, ...]] = {
    "login": (Limit("login:address", 20, 900, "address"), Limit("login:account", 10, 900, "field:username")),
    # Wrong codes at the second step of an operator's sign-in and on the two-factor page (right ones are not
    # counted): 5 per account in 15 minutes leave a guesser who has the password 480 tries a day, each with a
    # chance of 3 in 10**6.
    "two_factor": (Limit("2fa:account", 5, 900, "account"), Limit("2fa:address", 20, 900, "address")),
    "signup": (Limit("signup:address", 5, 3600, "address"),),
    "password_reset": (Limit("reset:address", 5, 3600, "address"), Limit("reset:email", 3, 3600, "field:email")),
    "claim": (Limit("claim:account", 10, 600, "account"), Limit("claim:address", 30, 600, "address")),
    "order": (Limit("order:account", 10, 600, "account"), Limit("order:address", 30, 3600, "address")),
}
KEEP = timedelta(seconds=max(limit.seconds for limits in LIMITS.values() for limit in limits))


class RateLimited(Exception):
    def __init__(self, retry_after: int):
        super().__init__(f"rate limited; retry after {retry_after} s")
        self.retry_after = retry_after


def client_address(request) -> str:
    """The visitor's address: behind the TLS proxy, the last hop it appended to X-Forwarded-For (anything
    before it the client may have written itself); otherwise the connection's."""
    if getattr(settings, "ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY", False):
        hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
        if hops:
            return hops[-1]
    return request.META.get("REMOTE_ADDR", "")


def _key(limit: Limit, request, user) -> str:
    if limit.by == "address":
        value = client_address(request)
    elif limit.by == "account":
        value = str(user.pk) if user is not None and user.is_authenticated else ""
    else:
        value = (request.POST.get(limit.by.split(":", 1)[1]) or "").strip().lower()
    if not value:
        return ""
    return hmac.new(settings.SECRET_KEY.encode(), f"{limit.scope}:{value}".encode(), hashlib.sha256).hexdigest()


def rate_check(request, action: str, *, user=None, now: datetime | None = None, count: bool = True) -> None:
    """Count this attempt, or raise ``RateLimited`` (the attempt is then not counted). With ``count=False``
    only check: the caller counts the attempt with ``rate_count`` if it fails (the two-factor code step
    counts wrong codes only)."""
    if not getattr(settings, "ANCHORGPU_RATE_LIMITS", True):
        return
    now = now or timezone.now()
    keyed = [(limit, key) for limit in LIMITS[action] if (key := _key(limit, request, user))]
    waits = []
    for limit, key in keyed:
        window = RateEvent.objects.filter(scope=limit.scope, key=key, at__gt=now - timedelta(seconds=limit.seconds))
        if window.count() >= limit.count:
            oldest = window.order_by("at").values_list("at", flat=True)[: window.count() - limit.count + 1]
            frees_at = list(oldest)[-1] + timedelta(seconds=limit.seconds)
            waits.append(max(1, math.ceil((frees_at - now).total_seconds())))
    if waits:
        raise RateLimited(max(waits))
    if count:
        RateEvent.objects.bulk_create([RateEvent(scope=limit.scope, key=key, at=now) for limit, key in keyed])


def rate_count(request, action: str, *, user=None, now: datetime | None = None) -> None:
    """Count an attempt that ``rate_check(..., count=False)`` let through and that then failed."""
    if not getattr(settings, "ANCHORGPU_RATE_LIMITS", True):
        return
    now = now or timezone.now()
    RateEvent.objects.bulk_create([RateEvent(scope=limit.scope, key=key, at=now) for limit in LIMITS[action]
                                   if (key := _key(limit, request, user))])


def refused_page(request, exc: RateLimited):
    minutes = max(1, math.ceil(exc.retry_after / 60))
    response = render(request, "429.html", {"minutes": minutes}, status=429)
    response["Retry-After"] = str(exc.retry_after)
    return response


def rate_limited(action: str):
    """For a page's view: POSTs are counted (per the signed-in account where the limit says so)."""
    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if request.method == "POST":
                try:
                    rate_check(request, action, user=getattr(request, "user", None))
                except RateLimited as exc:
                    return refused_page(request, exc)
            return view(request, *args, **kwargs)
        return wrapper
    return decorate


def rate_events_purge(*, now: datetime | None = None) -> int:
    """The worker's sweep: attempts older than the longest window count for nothing."""
    now = now or timezone.now()
    deleted, _ = RateEvent.objects.filter(at__lt=now - KEEP).delete()
    return deleted
