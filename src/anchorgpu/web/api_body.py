"""Reading JSON request bodies for the API: content type, parsing, unknown
fields and JSON types are checked here; what the values mean is left to the
same Django forms the pages use, so both give the same messages."""

from __future__ import annotations

import hashlib
import json
from datetime import timezone as dt_timezone

from django.core.exceptions import RequestDataTooBig
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from anchorgpu.json_depth import too_deep

from .responses import api_error

MAX_LIST_ITEMS = 100
MAX_NESTING = 32  # no body of this API nests more than 2 levels; deeper input is refused before parsing


class BodyError(Exception):
    """A request body the API refuses; carries the JSON error response."""

    def __init__(self, response):
        super().__init__(response.status_code)
        self.response = response


def _invalid(fields: dict[str, list[str]]):
    name, messages = next(iter(fields.items()))
    return BodyError(api_error(400, "invalid_request", f"{name}: {messages[0]}", fields))


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _text_problem(value) -> str | None:
    """NUL characters and lone surrogates cannot be stored: refuse them up front."""
    if isinstance(value, str):
        if "\x00" in value:
            return _("Null characters are not allowed.")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return _("The text is not valid Unicode.")
    elif isinstance(value, list):
        return next((p for p in map(_text_problem, value) if p), None)
    elif isinstance(value, dict):
        return next((p for p in map(_text_problem, [*value.keys(), *value.values()]) if p), None)
    return None


def read_json(request, *, fields: set[str], optional: bool = False) -> dict:
    """The body as a JSON object with only known ``fields``; an empty body is
    ``{}`` when the body is ``optional``. Raises BodyError otherwise."""
    try:
        raw = request.body
    except RequestDataTooBig:
        raise BodyError(api_error(413, "too_large", _("The request body is too large."))) from None
    if optional and not raw.strip():
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
    unknown = sorted(name for name in body if name not in fields)
    if unknown:
        raise _invalid({name[:40]: [_("Unknown field.")] for name in unknown[:20]})
    # No field takes more than a list of plain values: refuse anything deeper before walking it
    # (a few hundred nested brackets would otherwise exhaust Python's recursion).
    nested = {name: [_("Nested lists and objects are not accepted here.")] for name, value in body.items()
              if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (list, dict))
                                                                              for v in value))}
    if nested:
        raise _invalid(nested)
    problems = {name: [problem] for name, value in body.items() if (problem := _text_problem(value))}
    if problems:
        raise _invalid(problems)
    return body


def fingerprint(body: dict) -> str:
    """A SHA-256 of the parsed body in a canonical form (key order and spacing do not matter)."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


# What each kind of field takes, as JSON, and how it is handed to a form.
def _int(value):
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():  # 2.0 is an integer to JSON Schema
        return str(int(value))
    raise TypeError(_("Must be a whole number."))


def _str(value):
    if isinstance(value, str):
        return value
    raise TypeError(_("Must be a string."))


def _bool(value):
    if isinstance(value, bool):
        return "on" if value else ""
    raise TypeError(_("Must be true or false."))


def _str_list(value):
    if isinstance(value, list) and len(value) <= MAX_LIST_ITEMS and all(isinstance(v, str) for v in value):
        return list(value)
    raise TypeError(_("Must be a list of at most %(n)d strings.") % {"n": MAX_LIST_ITEMS})


def _lines(value):
    """One string, or a list of strings joined by line breaks (SSH keys)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and len(value) <= MAX_LIST_ITEMS and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    raise TypeError(_("Must be a string or a list of at most %(n)d strings.") % {"n": MAX_LIST_ITEMS})


def _moment(value):
    """An ISO-8601 date and time, or null. Parsed here so that a start at the
    edge of the calendar cannot overflow when it is turned into UTC."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(_("Must be a date and time as a string, or null."))
    try:
        moment = parse_datetime(value.strip()) if len(value) <= 40 else None
        if moment is not None and moment.tzinfo is not None:
            moment = moment.astimezone(dt_timezone.utc)
    except (ValueError, OverflowError):
        moment = None
    if moment is None:
        raise TypeError(_("Give the start as an ISO-8601 date and time, e.g. 2026-12-01T09:00:00Z."))
    return moment.isoformat()


KINDS = {"int": _int, "str": _str, "bool": _bool, "str_list": _str_list, "lines": _lines, "moment": _moment}


def form_data(body: dict, spec: dict[str, str]) -> dict:
    """Form data (strings and lists of strings) from a JSON body, by ``spec``
    (field name -> kind). A value of the wrong JSON type is a 400."""
    data, problems = {}, {}
    for name, kind in spec.items():
        if name not in body:
            continue
        try:
            data[name] = KINDS[kind](body[name])
        except TypeError as exc:
            problems[name] = [str(exc)]
    if problems:
        raise _invalid(problems)
    return data
