"""Reading a JSON request body before its Schema sees it: size, content type, nesting depth, JSON syntax and
a top-level object. Ninja calls ``JsonParser.parse_body``; what it refuses travels as ``BodyError``."""

from __future__ import annotations

import hashlib
import json

from django.core.exceptions import RequestDataTooBig
from django.utils.translation import gettext as _
from ninja.parser import Parser

from anchorgpu.json_depth import too_deep

from .responses import api_error

MAX_NESTING = 32  # no body of this API nests more than 2 levels; deeper input is refused before parsing
OPTIONAL_BODY = "_anchorgpu_optional_body"  # set on a request whose operation takes an empty body as {}


class BodyError(Exception):
    """A request the API refuses; carries the JSON error response."""

    def __init__(self, response):
        super().__init__(response.status_code)
        self.response = response


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def read_json(request) -> dict:
    """The body as a JSON object (an empty body is ``{}`` where the operation allows it); raises BodyError."""
    try:
        raw = request.body
    except RequestDataTooBig:
        raise BodyError(too_large()) from None
    if getattr(request, OPTIONAL_BODY, False) and not raw.strip():
        return {}
    if request.content_type.lower() != "application/json":
        raise BodyError(api_error(415, "unsupported_media_type",
                                  _("Send the body as JSON, with the header Content-Type: application/json.")))
    if too_deep(raw, MAX_NESTING):  # measured before parsing: the parser recurses, and deep input can crash it
        raise BodyError(api_error(400, "bad_json", _("The body nests lists or objects too deeply.")))
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BodyError(api_error(400, "bad_json", _("The body is not valid JSON."))) from None
    if not isinstance(body, dict):
        raise BodyError(api_error(400, "bad_json", _("The body must be a JSON object.")))
    return body


def too_large():
    return api_error(413, "too_large", _("The request body is too large."))


class JsonParser(Parser):
    """Ninja's body parser: ``read_json``, keeping the parsed object on the request for ``fingerprint``."""

    def parse_body(self, request):
        request.api_json = read_json(request)
        return request.api_json


def fingerprint(body: dict) -> str:
    """A SHA-256 of the parsed body in a canonical form (key order and spacing do not matter)."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def form_data(payload) -> dict:
    """Form data (strings and lists of strings) from a validated body Schema: the fields that were sent."""
    data = {}
    for name, value in payload.model_dump(exclude_unset=True).items():
        if isinstance(value, bool):
            data[name] = "on" if value else ""
        elif value is None:
            data[name] = ""
        elif isinstance(value, int):
            data[name] = str(value)
        else:
            data[name] = value
    return data
