"""A small JSON-over-HTTP client of the shop's API, on the standard library."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

USER_AGENT = "anchorgpu-cli/1"


class ApiError(Exception):
    """The shop answered with an error (``status`` > 0) or could not be reached (0)."""

    def __init__(self, status: int, code: str, message: str, fields: dict | None = None, *, usage: bool = False):
        super().__init__(message)
        self.status, self.code, self.message, self.fields = status, code, message, fields or {}
        self.usage = usage  # the request was never sent (or should be sent elsewhere): the user must change it

    def as_json(self) -> dict:
        return {"error": {"code": self.code, "message": self.message, "fields": self.fields, "status": self.status}}

    def describe(self) -> str:
        lines = [f"{self.message} ({self.code}{f', HTTP {self.status}' if self.status else ''})"]
        for field, problems in sorted(self.fields.items()):
            for problem in problems:
                lines.append(f"  {field}: {problem}")
        return "\n".join(lines)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: urllib would send the token on to the new host
    and turn a POST into a GET."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


@dataclass(frozen=True)
class Client:
    base_url: str
    token: str = ""
    language: str = "en"
    timeout: float = 30.0

    def request(self, method: str, path: str, *, query: dict | None = None, body: Any = None,
                headers: dict | None = None) -> Any:
        if urllib.parse.urlsplit(self.base_url).scheme not in ("http", "https"):
            raise ApiError(0, "bad_url", f"The shop's address must start with http:// or https://, not "
                                         f"{self.base_url[:60]!r}.", usage=True)
        if not self.token.isascii() or any(c in self.token for c in "\r\n "):
            raise ApiError(0, "bad_token", "That token cannot be right: a token is plain ASCII without spaces.",
                           usage=True)
        url = self.base_url.rstrip("/") + "/api/v1/" + path.lstrip("/")
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v not in (None, "")})
        data = None if body is None else json.dumps(body).encode()
        sent = {"Accept": "application/json", "Accept-Language": self.language, "User-Agent": USER_AGENT,
                **(headers or {})}
        if data is not None:
            sent["Content-Type"] = "application/json"
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(url, data=data, method=method, headers=sent)
        try:
            with _OPENER.open(req, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                raise ApiError(exc.code, "redirected", f"The shop answered with a redirect to "
                                                       f"{exc.headers.get('Location', '?')}; use that address as "
                                                       f"--url (the token is not sent on).", usage=True) from None
            raise _api_error(exc) from None
        except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(0, "unreachable", f"Cannot reach {self.base_url}: {reason}") from None
        except (ValueError, UnicodeError) as exc:
            raise ApiError(0, "bad_request", f"That request cannot be sent: {exc}", usage=True) from None
        try:
            return json.loads(raw or b"null")
        except ValueError:
            raise ApiError(0, "not_json", f"{self.base_url} did not answer with JSON; is it an AnchorGPU shop?",
                           usage=True) from None


def _api_error(exc: urllib.error.HTTPError) -> ApiError:
    try:
        error = json.loads(exc.read() or b"{}").get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    return ApiError(exc.code, error.get("code", "http_error"), error.get("message", f"HTTP {exc.code}"),
                    error.get("fields"))

