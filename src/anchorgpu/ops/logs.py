"""Structured logs: one JSON object per line, each carrying the id of the
request it belongs to (taken from a well-formed ``X-Request-ID`` header, or
made here) so the lines of one request can be found together. The id is sent
back in the response's ``X-Request-ID``."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import uuid
from datetime import UTC, datetime

_REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("anchorgpu_request_id", default="")
_WELL_FORMED = re.compile(r"[A-Za-z0-9._-]{8,64}")


def current_request_id() -> str:
    return _REQUEST_ID.get()


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        given = request.headers.get("X-Request-ID", "")
        request_id = given if _WELL_FORMED.fullmatch(given) else uuid.uuid4().hex
        request.request_id = request_id
        # Kept until the response is finished (``forget_request_id``): Django logs a 4xx/5xx answer after the
        # middleware has returned, and that line belongs to the request too.
        _REQUEST_ID.set(request_id)
        response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response


def forget_request_id(**kwargs) -> None:
    """``request_finished``: lines logged after this belong to no request."""
    _REQUEST_ID.set("")


def install_record_factory() -> None:
    """Every log record made from now on carries the id of the request it was made in (empty outside a
    request: the worker, commands). Set on the record when it is made, so every handler sees it."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "anchorgpu_request_id", False):
        return

    def make(*args, **kwargs):
        record = previous(*args, **kwargs)
        record.request_id = _REQUEST_ID.get()
        return record

    make.anchorgpu_request_id = True
    logging.setLogRecordFactory(make)


class JsonFormatter(logging.Formatter):
    """time (UTC, ISO 8601), level, logger, message, request_id, and the exception when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", ""),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)
