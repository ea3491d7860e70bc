"""The API's bearer tokens (``accounts.api_tokens``), as ninja's authentication: no session, no cookie, so no
CSRF token. ``before`` runs the checks an operation makes before its body is read, in the order the API has
always made them (the order's owner, the rate limit, the Idempotency-Key, unknown query parameters)."""

from __future__ import annotations

from collections.abc import Callable

from django.utils.translation import gettext as _
from ninja.security.http import HttpAuthBase

from anchorgpu.accounts.api_tokens import token_user

from .body import BodyError
from .responses import api_error


class ApiToken(HttpAuthBase):
    openapi_scheme = "bearer"
    openapi_bearerFormat = "agt_…"
    openapi_description = "A token from your account's API tokens page."

    def __init__(self, before: Callable | None = None):
        super().__init__()
        self.before = before

    def __call__(self, request):
        user = token_user(request.headers.get("Authorization", ""))
        if user is None:
            return None  # ninja answers AuthenticationError: errors.unauthorized
        request.api_user = user
        if self.before is not None:
            self.before(request, **(request.resolver_match.kwargs if request.resolver_match else {}))
        return user


def no_query(request) -> None:
    if request.GET:
        name = next(iter(request.GET))[:40]
        raise BodyError(api_error(400, "invalid_request", _("Unknown parameter “%(name)s”.") % {"name": name},
                                  {name: [_("Unknown parameter.")]}))
