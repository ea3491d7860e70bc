"""A request whose database connection fails answers 503, not 500.

PostgreSQL restarting, a fail-over, or the network to it dropping make the
next query raise ``OperationalError`` or ``InterfaceError``. Every service
that writes does so in one transaction, so such a failure leaves nothing
half-done. But it does not tell whether the change was saved: the connection
may have gone after the commit (while the answer, or the session, was being
written), or during the commit itself, when the server may have committed
without saying so. The answer says what is known: a request that only reads
changed nothing; one that writes may or may not have been carried out, and
repeating it is safe where it carries its key: the same Idempotency-Key (API)
or the checkout form's own submission key returns the order already placed
instead of placing a second one. A 503 with ``Retry-After``, the page (or
the API's JSON error) saying so. Django closes the broken connection when the
request ends (``close_if_unusable_or_obsolete``), and the next request
connects afresh.

The page is rendered without the request's context processors, which may
themselves need the database (the signed-in user, the session). A form's view
may offer a page of its own for a POST it could not finish
(``view.on_database_down(request)``: the form again with what was typed, e.g.
the checkout); it is tried first, and the plain page answers when it fails too
(the database is still gone) or declines (returns None).
"""

from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _

from anchorgpu.api.responses import api_error

log = logging.getLogger("anchorgpu.db")
RETRY_AFTER_SECONDS = 5
DATABASE_DOWN = (OperationalError, InterfaceError)


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


_READS = {"GET", "HEAD", "OPTIONS"}


def _text(request) -> str:
    if request.method in _READS:
        return _("Our database could not be reached just now. Nothing was changed: this page only reads. Please "
                 "try again in a few seconds.")
    if _is_api(request) and request.method == "POST" and request.path.rstrip("/").endswith("/orders"):
        return _("Our database could not be reached just now, so we cannot tell whether your order was placed: "
                 "it may have been. Send the same request again with the same Idempotency-Key in a few seconds: "
                 "you get the order if it was placed, and a second one is never made.")
    if _is_api(request):
        return _("Our database could not be reached just now, so we cannot tell whether your request was carried "
                 "out: it may have been. In a few seconds, look at the order before you send it again.")
    return _("Our database could not be reached just now, so we cannot tell whether what you sent was saved: it "
             "may have been. In a few seconds, go back and press the same button again: an order form you send "
             "twice places one order, and you then see the order it placed. Or look at your orders first.")


def _orders_url() -> str:
    try:
        return reverse("orders")
    except NoReverseMatch:
        return ""


def _own_page(request):
    """The view's own 503 page for this request (see the module's note), or None."""
    match = getattr(request, "resolver_match", None)
    again = getattr(getattr(match, "func", None), "on_database_down", None)
    if again is None:
        return None
    try:
        response = again(request)
    except Exception as exc:  # noqa: BLE001 - the database still gone, or anything else: the plain page
        log.error("the page of %s %s for a database gone could not be made either: %s", request.method,
                  request.path, type(exc).__name__)
        return None
    if response is not None:
        response.status_code = 503
    return response


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, DATABASE_DOWN):
            return None
        first_line = (str(exception).strip().splitlines() or [""])[0]
        log.error("database unavailable during %s %s: %s: %s", request.method, request.path,
                  type(exception).__name__, first_line)
        text = _text(request)
        response = None if _is_api(request) or request.method in _READS else _own_page(request)
        if response is None and _is_api(request):
            response = api_error(503, "database_unavailable", text)
        elif response is None:
            context = {"text": text, "orders_url": "" if request.method in _READS else _orders_url()}
            response = HttpResponse(render_to_string("ops/503.html", context), status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        response["Cache-Control"] = "no-store"
        return response
