"""A request whose database connection fails answers 503, not 500.

PostgreSQL restarting, a fail-over, or the network to it dropping make the
next query raise ``OperationalError`` or ``InterfaceError``. Every service
that writes does so in one transaction, so such a failure has left nothing
half-done: the database rolled the transaction back when the connection
went. What the customer needs to know is exactly that, and that trying
again is safe: a 503 with ``Retry-After``, the page (or the API's JSON
error) saying so. Django closes the broken connection when the request
ends (``close_if_unusable_or_obsolete``), and the next request connects
afresh.

The page is rendered without the request's context processors, which may
themselves need the database (the signed-in user, the session).
"""

from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.utils.translation import gettext as _

from anchorgpu.web.responses import api_error

log = logging.getLogger("anchorgpu.db")
RETRY_AFTER_SECONDS = 5
DATABASE_DOWN = (OperationalError, InterfaceError)


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


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
        text = _("Our database could not be reached just now, so nothing was saved: no order was placed and "
                 "nothing was changed. Please try again in a few seconds.")
        if _is_api(request):
            response = api_error(503, "database_unavailable", text)
        else:
            response = HttpResponse(render_to_string("ops/503.html", {"text": text}), status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        response["Cache-Control"] = "no-store"
        return response
