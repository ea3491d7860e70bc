"""How the live catalog's views key whole answers in the answer cache (anchorgpu.catalog.answer_cache).

A repeated request is answered without validating its query again: the key is the request as it was sent,
and the view validates inside the computation, keeping only its good answers (a 400 is computed each time).
What is cached, and on what key:

* the offers API's JSON and the catalog's offers table (an htmx request): on the query's parameters, sorted
  by name (``query_params``); neither echoes the query as sent;
* the whole catalog page, for a visitor who has no session and no pending message (``page_key``): on the
  path with its query string as sent, the host and the scheme, since the page echoes them (the log-in links
  and the language switcher's ``next``). Such a visitor's page holds nothing else of theirs but the CSRF
  token of the language form. The page is rendered with ``CSRF_HOLE`` in its place, a random marker of this
  process that no visitor can know and so cannot put into the page, and each answer puts the visitor's own
  masked token there (``page_response``), as ``{% csrf_token %}`` would. Visitors with a session (signed
  in, or carrying messages) get their page rendered for them; only its offers table comes from the cache.

A page or a table computed anew still takes its offers table from the cache when another request with the
same normalised query computed it (the same snapshot and second): a query that differs only in parameters
the form ignores costs the page's rendering, not the offers. The table and the API's JSON share the offers
themselves the same way (``live_offers``).

A query that names a start is not keyed as sent: whether that start has passed depends on the moment, not
only on the second the answer is for. The views validate it first, then look up its normalised value.

The page of a visitor without a session is made of two parts that change at different times: its offers
table follows the database (every order changes it) and the second, while the page around it depends only on
the request and the language. The page around the table (``shell``) is rendered with ``TABLE_HOLE`` where the
table goes and kept under the page key across snapshots and seconds (``SHELLS`` of them, least recently used
out first), so an order that changes the offers costs each page the table's rendering, not the whole page's.
That holds while web/catalog.html and the layout it extends show, for such a visitor, nothing read from the
database or the clock but the table (tests/catalog/test_whole_answers.py compares the two ways).
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable

from django.conf import settings
from django.contrib.messages.storage.cookie import CookieStorage
from django.core.signals import setting_changed
from django.http import HttpResponse
from django.middleware.csrf import get_token

from anchorgpu.catalog import answer_cache
from anchorgpu.catalog import offers as offers_selector

CSRF_HOLE = "csrf-hole-" + secrets.token_hex(16)
_HOLE_BYTES = CSRF_HOLE.encode("ascii")
TABLE_HOLE = "offers-hole-" + secrets.token_hex(16)
SHELLS = 256


def live_offers(form) -> list:
    """The offers for a valid ``OfferQueryForm``, under its normalised query: the catalog's table and the
    offers API ask for the same offers, and compute them once for a snapshot and a second. Every query's
    offers take the products on sale and the price list from one read for that snapshot and second
    (``offers.fleet_read``), and search the availability for the query (on PostgreSQL one statement). The
    offers and the fleet are read-only values; the threads that share them do not change them."""
    data = form.cleaned_data

    def compute(now):
        # Inside this computation the fleet's answer is for the same second; where the cache is off it is
        # computed on the spot, and read for this ``now`` all the same.
        fleet = answer_cache.answer("fleet", None, lambda _now: offers_selector.fleet_read(now))
        return offers_selector.offers(term_days=data["term"], quantity=data["quantity"], not_before=data["start"],
                                      environment=data["environment"], now=now, fleet=fleet)

    return answer_cache.answer("offers", form.query_key(), compute)


def query_params(query) -> tuple | None:
    """The query's parameters, sorted by name, with every value as sent; None when it names a start."""
    if any(query.getlist("start")):
        return None
    return tuple(sorted((name, tuple(query.getlist(name))) for name in query))


def page_key(request) -> tuple | None:
    """The key of the whole page for a visitor without a session or messages; None for any other visitor
    (or a query with a start)."""
    cookies = request.COOKIES
    if settings.SESSION_COOKIE_NAME in cookies or CookieStorage.cookie_name in cookies:
        return None
    params = query_params(request.GET)
    if params is None:
        return None
    # The parameters as the form reads them, beside the path as the page echoes it: two requests whose paths
    # are written alike may still be decoded differently.
    return request.get_full_path(), params, request.get_host(), request.is_secure()


def kept(answer) -> bool:
    """A good answer (the page or the bytes) is kept; a response (an error) is not."""
    return not isinstance(answer, HttpResponse)


def page_response(answer, request) -> HttpResponse:
    """The visitor's response to a cached or computed page (bytes): their CSRF token in its place."""
    if isinstance(answer, HttpResponse):
        return answer
    response = HttpResponse(answer.replace(_HOLE_BYTES, get_token(request).encode("ascii")))
    # What a rendered page says too: the answer depends on the cookies (a signed-in visitor gets another).
    response["Vary"] = "Cookie"
    return response


class _Shells:
    """The pages around their tables, by page key and rendering context; thread-safe and bounded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple, str] = OrderedDict()

    def get(self, key: tuple, render: Callable[[], str]) -> str:
        with self._lock:
            shell = self._items.get(key)
            if shell is not None:
                self._items.move_to_end(key)
                return shell
        shell = render()  # outside the lock: two threads may render the same shell once each, never a wrong one
        with self._lock:
            self._items[key] = shell
            while len(self._items) > SHELLS:
                self._items.popitem(last=False)
        return shell

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_SHELLS = _Shells()
setting_changed.connect(lambda **_kwargs: _SHELLS.clear(), dispatch_uid="anchorgpu.web.catalog_cache.shells",
                        weak=False)


def page_with_table(key: tuple, render_shell: Callable[[], str], table_html: str) -> str:
    """The page for ``key`` (``page_key`` and the rendering context): its shell, kept or rendered by
    ``render_shell`` with ``TABLE_HOLE`` for the table, with ``table_html`` in the hole."""
    shell = _SHELLS.get(key, render_shell)
    if shell.count(TABLE_HOLE) != 1:  # the hole must be the table's place and nothing else
        raise ValueError("the catalog page must hold the offers table exactly once")
    return shell.replace(TABLE_HOLE, table_html)
