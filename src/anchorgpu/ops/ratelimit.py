"""Rate limits on the actions that attackers repeat: failed log-ins, wrong two-factor codes, sign-up,
password reset, "I've paid" and orders placed. Counted per address and per account (or per e-mail typed),
in the database so every server process shares the counts, as one row per attempt within a sliding
window. The keys are stored as keyed hashes: no address or e-mail is kept in clear. Refused with 429
and ``Retry-After``.

Deciding and counting are one step. Every key has a row (``RateKey``) that a request locks before it
counts the attempts in the window (PostgreSQL: ``SELECT ... FOR UPDATE``; SQLite: every transaction
takes the write lock when it begins), so fifty requests sent at once are decided one after the other
and at most the limit get through. Three ways to use it:

* ``rate_take`` decides and records the attempt in a transaction of its own, before the work is done,
  so concurrent requests see it; ``rate_give_back`` returns the slot when the attempt turned out not to
  be one that counts (a right two-factor code, a right password). The limit thus bounds the checks
  made, not only the failures recorded after them. With ``settle``, the slot is *undecided* until it is
  given back or kept (``rate_keep``), and a request that finds the windows full only of undecided slots
  waits (up to ``settle`` seconds) for them to be decided instead of being refused: twenty right
  passwords sent at once from one address take the twenty slots, and the twenty-first waits for them
  to be given back rather than counting them as failures. An undecided slot older than
  ``UNDECIDED_SECONDS`` counts as kept (its request died).
* ``rate_turn``, inside the caller's transaction, locks the keys and lets the caller decide
  (``check``) and count (``count``) with the lock held: an order is counted only once it is created,
  and a repeated request for an order that exists is answered without deciding anything.
* ``rate_note`` records the attempt under the same lock without refusing it, and says whether the
  windows were already full: failed log-ins per account never lock the account, but past a limit it is
  under attack (``accounts.login_guard``: the answer no longer depends on the password, and a right one needs a
  second factor); taking the slot before the password is checked means concurrent guesses cannot all pass
  while the window still looks open.

Behind a proxy every request comes from the proxy's address; the visitor's is then taken from
``X-Forwarded-For`` only when the deployment says a proxy is there (``ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY``,
off by default: a client could write the header itself).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import wraps

from django.conf import settings
from django.db import transaction
from django.shortcuts import render
from django.utils import timezone

from .models import RateEvent, RateKey


@dataclass(frozen=True)
class Limit:
    scope: str
    count: int
    seconds: int
    by: str  # "address", "account", or "field:<form field>"


LIMITS: dict[str, tuple[Limit, ...]] = {
    # Failed log-ins from one address, whatever the account: the slot is taken before the password is checked
    # (undecided) and given back when it was right, so only failures count; a success gives back its own slot,
    # never the failures of other accounts from the address (many accounts tried from one address stay limited).
    "login": (Limit("login:address", 20, 900, "address"),),
    # Failed log-ins on one account, from anywhere: counted, never refusing (that would lock the owner out);
    # past either window the account is under attack (``accounts.login_guard``): from a browser it does not know,
    # right and wrong passwords get the same answer, and a right one needs a second factor. The day's window
    # keeps a slow guesser to 30 answered guesses a day, not 10 every 15 minutes.
    "login_account": (Limit("login:account", 10, 900, "field:username"),
                      Limit("login:account-day", 30, 86400, "field:username")),
    # Sign-in codes e-mailed to an account under attack: taken by every log-in on that path, right password
    # or wrong (the answers must not differ), so nobody can flood the owner's mailbox.
    "login_code_email": (Limit("login:code-email", 3, 900, "field:username"),),
    # Two-factor codes checked at the code step and on the two-factor page (a right one gives its slot back):
    # 5 per account in 15 minutes leave a guesser who has the password 480 tries a day, each with a chance of
    # 3 in 10**6.
    "two_factor": (Limit("2fa:account", 5, 900, "account"), Limit("2fa:address", 20, 900, "address")),
    "signup": (Limit("signup:address", 5, 3600, "address"),),
    "password_reset": (Limit("reset:address", 5, 3600, "address"), Limit("reset:email", 3, 3600, "field:email")),
    "claim": (Limit("claim:account", 10, 600, "account"), Limit("claim:address", 30, 600, "address")),
    # Orders created (not form errors, not a repeated request for an order that exists).
    "order": (Limit("order:account", 10, 600, "account"), Limit("order:address", 30, 3600, "address")),
}
KEEP = timedelta(seconds=max(limit.seconds for limits in LIMITS.values() for limit in limits))
# An undecided slot (``rate_take(settle=...)``) older than this counts as a failure: no check takes so long.
UNDECIDED_SECONDS = 10
SETTLE_POLL = 0.05  # seconds between two looks at the windows while undecided slots fill them


class RateLimited(Exception):
    def __init__(self, retry_after: int):
        super().__init__(f"rate limited; retry after {retry_after} s")
        self.retry_after = retry_after


def client_address(request) -> str:
    """The visitor's address: with ``ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY``, the last hop the proxy appended to
    X-Forwarded-For (anything before it the client may have written itself); otherwise the connection's."""
    if getattr(settings, "ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY", False):
        hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
        if hops:
            return hops[-1]
    return request.META.get("REMOTE_ADDR", "")


def rate_limits_on() -> bool:
    return bool(getattr(settings, "ANCHORGPU_RATE_LIMITS", True))


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


def _keyed(request, action: str, user) -> list[tuple[Limit, str]]:
    if not rate_limits_on():
        return []
    found = [(limit, key) for limit in LIMITS[action] if (key := _key(limit, request, user))]
    return sorted(found, key=lambda pair: (pair[0].scope, pair[1]))  # one order of locks for everyone


def _lock(keyed: list[tuple[Limit, str]], now: datetime) -> None:
    """Lock every key's row, in one order (made when missing; a purge may remove one between the two steps)."""
    for limit, key in keyed:
        while not RateKey.objects.select_for_update().filter(scope=limit.scope, key=key).exists():
            RateKey.objects.bulk_create([RateKey(scope=limit.scope, key=key, used_at=now)], ignore_conflicts=True)


def rate_key_lock(*, scope: str, key: str, now: datetime | None = None) -> None:
    """Lock one key's row until the caller's transaction ends (a quota counted and decided elsewhere, e.g. the
    planner's simulations per visitor)."""
    _lock([(Limit(scope, 0, 0, "address"), key)], now or timezone.now())


def _retry_after(keyed: list[tuple[Limit, str]], now: datetime, *, decided_only: bool = False) -> int:
    """Seconds until every full window has room again (0: none is full). ``decided_only``: as if the undecided
    slots still young enough to be given back were given back."""
    waits = [0]
    for limit, key in keyed:
        events = RateEvent.objects.filter(scope=limit.scope, key=key, at__gt=now - timedelta(seconds=limit.seconds))
        if decided_only:
            events = events.exclude(undecided=True, at__gt=now - timedelta(seconds=UNDECIDED_SECONDS))
        times = list(events.order_by("-at").values_list("at", flat=True)[: limit.count])
        if len(times) >= limit.count:  # the oldest of the newest ``count`` must leave the window
            frees_at = times[-1] + timedelta(seconds=limit.seconds)
            waits.append(max(1, math.ceil((frees_at - now).total_seconds())))
    return max(waits)


@dataclass
class Turn:
    """The keys of one action, locked until the caller's transaction ends."""

    keyed: list[tuple[Limit, str]]
    now: datetime
    counted: list[int] = field(default_factory=list)

    def check(self) -> None:
        wait = _retry_after(self.keyed, self.now)
        if wait:
            raise RateLimited(wait)

    def count(self, *, undecided: bool = False) -> list[int]:
        if self.keyed:
            self.counted += [RateEvent.objects.create(scope=limit.scope, key=key, at=self.now, undecided=undecided).pk
                             for limit, key in self.keyed]  # one to three keys: their ids, for a give-back
            RateKey.objects.filter(scope__in={limit.scope for limit, _k in self.keyed},
                                   key__in={key for _l, key in self.keyed}).update(used_at=self.now)
        return self.counted


def rate_turn(request, action: str, *, user=None, now: datetime | None = None) -> Turn:
    """Lock the action's keys for this request; call inside ``transaction.atomic()``, then ``check()`` and,
    once the attempt is one that counts, ``count()``, both before the transaction ends."""
    turn = Turn(keyed=_keyed(request, action, user), now=now or timezone.now())
    if turn.keyed:
        if not transaction.get_connection().in_atomic_block:
            raise RuntimeError("rate_turn needs a transaction: the lock would end with the statement")
        _lock(turn.keyed, turn.now)
    return turn


def rate_take(request, action: str, *, user=None, now: datetime | None = None, settle: float = 0) -> list[int]:
    """Decide and record this attempt, or raise ``RateLimited`` (nothing is recorded then). Returns the
    attempt's records, for ``rate_give_back``. ``settle`` (seconds): the records are undecided until given
    back or kept (``rate_keep``, which the caller must call when the attempt failed), and windows full only
    of young undecided records are waited on, up to ``settle``, rather than refused."""
    deadline = time.monotonic() + settle
    while True:
        with transaction.atomic():
            turn = rate_turn(request, action, user=user, now=now)
            wait = _retry_after(turn.keyed, turn.now) if turn.keyed else 0
            if not wait:
                return turn.count(undecided=settle > 0)
            settling = (settle > 0 and time.monotonic() < deadline
                        and not _retry_after(turn.keyed, turn.now, decided_only=True))
        if not settling:  # the lock is let go before waiting: the undecided ones must be able to finish
            raise RateLimited(wait)
        time.sleep(SETTLE_POLL)


def rate_give_back(taken: list[int]) -> None:
    """The attempt ``rate_take`` recorded did not count after all (a right code, a right password)."""
    if taken:
        RateEvent.objects.filter(pk__in=taken).delete()


def rate_keep(taken: list[int]) -> None:
    """The attempt ``rate_take(settle=...)`` recorded counts (a wrong password): decided, no longer waited on.
    What was given back is gone already."""
    if taken:
        RateEvent.objects.filter(pk__in=taken, undecided=True).update(undecided=False)


def rate_note(request, action: str, *, user=None, now: datetime | None = None,
              undecided: bool = False) -> tuple[list[int], int]:
    """Record this attempt without refusing it; returns its records (for ``rate_give_back``; ``undecided``: and
    ``rate_keep``) and how many seconds the action's windows were already full for (0: they had room)."""
    with transaction.atomic():
        turn = rate_turn(request, action, user=user, now=now)
        wait = _retry_after(turn.keyed, turn.now) if turn.keyed else 0
        return turn.count(undecided=undecided), wait


def refused_page(request, exc: RateLimited, *, template: str = "429.html", context: dict | None = None):
    minutes = max(1, math.ceil(exc.retry_after / 60))
    response = render(request, template, {**(context or {}), "minutes": minutes, "rate_limited": True}, status=429)
    response["Retry-After"] = str(exc.retry_after)
    return response


def rate_limited(action: str, *, again=None):
    """For a page's view: every POST is an attempt (per the signed-in account where the limit says so).
    ``again(request, exc)``: the refusal's page, e.g. the form with what was typed (default: 429.html)."""
    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if request.method == "POST":
                try:
                    rate_take(request, action, user=getattr(request, "user", None))
                except RateLimited as exc:
                    return again(request, exc) if again is not None else refused_page(request, exc)
            return view(request, *args, **kwargs)
        return wrapper
    return decorate


def rate_events_purge(*, now: datetime | None = None) -> int:
    """The worker's sweep: attempts older than the longest window count for nothing; nor do their keys' rows."""
    now = now or timezone.now()
    deleted, _ = RateEvent.objects.filter(at__lt=now - KEEP).delete()
    RateKey.objects.filter(used_at__lt=now - KEEP).delete()
    return deleted
