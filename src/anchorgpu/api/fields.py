"""The kinds of JSON value the API's bodies take, as pydantic types: each checks its JSON type (strictly: a
quantity of "2" or true is refused) and refuses what cannot be stored, with our own translated messages.

Limits that the pages' forms check (lengths, terms, the largest quantity) are stated for the OpenAPI document
from those forms and constants, and left to the forms to check, so that the API and the pages give one message
for one mistake (``documented``)."""

from __future__ import annotations

from datetime import UTC
from typing import Annotated, Any

from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from pydantic import BeforeValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

MAX_LIST_ITEMS = 100
# Kinds of refusal, by how early the old reader met them; the error handler reports only the earliest kind.
NESTED, TEXT, TYPE = "nested", "text", "type"


def _refuse(kind: str, message: str):
    # The message is already translated and formatted; pydantic would read braces in it as placeholders.
    return PydanticCustomError(kind, message.replace("{", "{{").replace("}", "}}"))


def _flat(value: Any) -> None:
    """No field takes more than a list of plain values."""
    if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value)):
        raise _refuse(NESTED, _("Nested lists and objects are not accepted here."))


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
    return None


def _checked(check):
    def validate(value):
        _flat(value)
        problem = _text_problem(value)
        if problem:
            raise _refuse(TEXT, problem)
        return check(value)
    return validate


def _whole(value):
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():  # 2.0 is an integer to JSON Schema
        return int(value)
    raise _refuse(TYPE, _("Must be a whole number."))


def _str(value):
    if isinstance(value, str):
        return value
    raise _refuse(TYPE, _("Must be a string."))


def _bool(value):
    if isinstance(value, bool):
        return value
    raise _refuse(TYPE, _("Must be true or false."))


def _str_list(value):
    if isinstance(value, list) and len(value) <= MAX_LIST_ITEMS and all(isinstance(v, str) for v in value):
        return list(value)
    raise _refuse(TYPE, _("Must be a list of at most %(n)d strings.") % {"n": MAX_LIST_ITEMS})


def _lines(value):
    """One string, or a list of strings joined by line breaks (SSH keys)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and len(value) <= MAX_LIST_ITEMS and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    raise _refuse(TYPE, _("Must be a string or a list of at most %(n)d strings.") % {"n": MAX_LIST_ITEMS})


def _moment(value):
    """An ISO-8601 date and time, or null, as UTC ISO-8601 text. Parsed here so that a start at the edge of
    the calendar cannot overflow when it is turned into UTC."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _refuse(TYPE, _("Must be a date and time as a string, or null."))
    try:
        moment = parse_datetime(value.strip()) if len(value) <= 40 else None
        if moment is not None and moment.tzinfo is not None:
            moment = moment.astimezone(UTC)
    except (ValueError, OverflowError):
        moment = None
    if moment is None:
        raise _refuse(TYPE, _("Give the start as an ISO-8601 date and time, e.g. 2026-12-01T09:00:00Z."))
    return moment.isoformat()


def _txid(value):
    if value is None or isinstance(value, str):
        return value
    raise _refuse(TYPE, _("Must be a string or null."))


_SLUG_PATTERN = r"^[-a-zA-Z0-9_]+$"
_TIME_SCHEMA = {"type": "string", "format": "date-time", "maxLength": 40}

# Request values. WithJsonSchema states the JSON shape each takes; the validator is what checks it.
Whole = Annotated[int, BeforeValidator(_checked(_whole)), WithJsonSchema({"type": "integer"})]
Text = Annotated[str, BeforeValidator(_checked(_str)), WithJsonSchema({"type": "string"})]
Flag = Annotated[bool, BeforeValidator(_checked(_bool)), WithJsonSchema({"type": "boolean"})]
Slugs = Annotated[list[str], BeforeValidator(_checked(_str_list)),
                  WithJsonSchema({"type": "array", "maxItems": MAX_LIST_ITEMS, "uniqueItems": True,
                                  "items": {"type": "string", "minLength": 1, "maxLength": 50,
                                            "pattern": _SLUG_PATTERN}})]
Moment = Annotated[str | None, BeforeValidator(_checked(_moment)),
                   WithJsonSchema({"type": ["string", "null"], "format": "date-time", "maxLength": 40})]
TxId = Annotated[str | None, BeforeValidator(_checked(_txid)),
                 WithJsonSchema({"type": ["string", "null"], "maxLength": 100})]


def lines_type(max_length: int):
    """SSH keys: one string with a key per line, or a list of keys."""
    one = {"type": "string", "minLength": 1, "maxLength": max_length}
    return Annotated[str, BeforeValidator(_checked(_lines)),
                     WithJsonSchema({"oneOf": [{**one, "description": "SSH public keys, one per line."},
                                               {"type": "array", "items": one, "minItems": 1,
                                                "maxItems": MAX_LIST_ITEMS}]})]


def documented(description: str = "", **json_schema) -> Any:
    """A field that may be absent (the form says whether it is required, and the model lists the required
    ones for the document), with what the forms check stated for the document."""
    extra = dict(json_schema)
    if description:
        extra["description"] = description
    return Field(default=None, json_schema_extra=extra or None)


def slug(description: str = "") -> dict:
    return {"minLength": 1, "maxLength": 50, "pattern": _SLUG_PATTERN, **({"description": description}
                                                                           if description else {})}


# Answer values: written by the builders in ``answers``; typed here for the document.
Time = Annotated[str, WithJsonSchema(_TIME_SCHEMA)]
MaybeTime = Annotated[str | None, WithJsonSchema({**_TIME_SCHEMA, "type": ["string", "null"]})]
Money = Annotated[str, WithJsonSchema({"type": "string", "maxLength": 40, "pattern": r"^-?[0-9]+(\.[0-9]+)?$",
                                       "description": "A decimal amount, as a string."})]
MaybeMoney = Annotated[str | None, WithJsonSchema({"type": ["string", "null"], "maxLength": 40,
                                                   "pattern": r"^-?[0-9]+(\.[0-9]+)?$",
                                                   "description": "A decimal amount, as a string."})]
Units = Annotated[str, WithJsonSchema({"type": "string", "maxLength": 80, "pattern": r"^[0-9]+$",
                                       "description": "Whole base units (satoshi, wei, …), as a string."})]
Slug = Annotated[str, WithJsonSchema({"type": "string", **slug()})]
