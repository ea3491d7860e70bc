"""Every refusal of the API in its one shape, ``{"error": {"code", "message", "fields"}}``, whatever raised it:
ninja's validation of a body against its Schema, the body reader, the token check, the rate limits, the
services' OrderError. Messages are in the request's language."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.utils.translation import gettext as _
from ninja.errors import AuthenticationError, HttpError, ValidationError

from anchorgpu.ops.ratelimit import RateLimited
from anchorgpu.orders.errors import InvalidOrder, OrderError

from .body import BodyError, read_json, too_large
from .fields import NESTED, TEXT
from .responses import api_error

# The old reader refused unknown fields first, then nesting, then text that cannot be stored, then wrong JSON
# types: only the earliest kind found is reported, as it did.
_STAGES = ("extra_forbidden", NESTED, TEXT)


def _field(loc: tuple) -> str:
    """The body field an error is about (its location is ("body", parameter, field, ...))."""
    parts = [str(p) for p in loc[2:3]] if loc[:1] == ("body",) else [str(p) for p in loc[1:2]]
    return (parts[0] if parts else "request")[:40]


def _message(error: dict) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return _("Unknown field.")
    if kind == "missing":
        return _("This field is required.")
    if kind in (NESTED, TEXT, "type"):
        return error["msg"]
    return _("Enter a valid value.")


def validation_error(request, exc: ValidationError):
    errors = list(exc.errors)
    if any(e["type"] == "missing" and len(e["loc"]) == 2 and e["loc"][0] == "body" for e in errors):
        try:  # no body at all: refused as the reader refuses an empty body
            read_json(request)
        except BodyError as refused:
            return refused.response
    for stage in _STAGES:
        if any(e["type"] == stage for e in errors):
            errors = [e for e in errors if e["type"] == stage]
            break
    fields: dict[str, list[str]] = {}
    for error in errors:
        fields.setdefault(_field(error["loc"]), []).append(_message(error))
    if errors and errors[0]["type"] == "extra_forbidden":
        fields = dict(sorted(fields.items())[:20])
    fields = {name: messages[:1] for name, messages in fields.items()}
    name, messages = next(iter(fields.items()), ("request", [_("Invalid request.")]))
    return api_error(400, "invalid_request", f"{name}: {messages[0]}", fields)


def unauthorized(request, exc=None):
    if request.headers.get("Authorization"):
        response = api_error(401, "token_invalid", _("The API token is not valid, or it has been revoked."))
        response["WWW-Authenticate"] = 'Bearer realm="api", error="invalid_token"'
    else:
        response = api_error(401, "token_required", _("Send an API token in the header “Authorization: Bearer "
                                                      "<token>”. Make one on your account’s API tokens page."))
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


def http_error(request, exc: HttpError):
    if isinstance(exc.__cause__, BodyError):  # ninja wraps what its body parser raises
        return exc.__cause__.response
    return api_error(exc.status_code, "invalid_request", _("Invalid request."))


def rate_limited(request, exc: RateLimited):
    response = api_error(429, "rate_limited", _("Too many attempts: try again in %(seconds)d s.")
                         % {"seconds": exc.retry_after})
    response["Retry-After"] = str(exc.retry_after)
    return response


def order_error(request, exc: OrderError):
    return api_error(400 if isinstance(exc, InvalidOrder) else 409, exc.code, exc.message)


def reraise(request, exc: Exception):
    """Anything else is not the API's to answer: the middleware turns a lost database into its 503."""
    raise exc


def install(api) -> None:
    for exc_class, handler in [(ValidationError, validation_error), (AuthenticationError, unauthorized),
                               (HttpError, http_error), (BodyError, lambda request, exc: exc.response),
                               (RateLimited, rate_limited), (OrderError, order_error),
                               (RequestDataTooBig, lambda request, exc: too_large()), (Exception, reraise)]:
        api.add_exception_handler(exc_class, handler)
