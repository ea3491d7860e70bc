"""A small JSON-over-HTTP client of the shop's API, on the standard library."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

USER_AGENT = "anchorgpu-cli/1"


class ApiError(Exception):
    """The shop answered with an error (``status`` > 0) or could not be reached (0)."""

    def __init__(self, status: int, code: str, message: str, fields: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.fields = status, code, message, fields or {}

    def describe(self) -> str:
        lines = [f"{self.message} ({self.code}{f', HTTP {self.status}' if self.status else ''})"]
        for field, problems in sorted(self.fields.items()):
            for problem in problems:
                lines.append(f"  {field}: {problem}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Client:
    base_url: str
    token: str = ""
    language: str = "en"
    timeout: float = 30.0

    def request(self, method: str, path: str, *, query: dict | None = None, body: Any = None,
                headers: dict | None = None) -> Any:
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
            with urllib.request.urlopen(req, timeout=self.timeout) as response:  # noqa: S310 - the user's shop URL
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise _api_error(exc) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(0, "unreachable", f"Cannot reach {self.base_url}: {reason}") from None


def _api_error(exc: urllib.error.HTTPError) -> ApiError:
    try:
        error = json.loads(exc.read() or b"{}").get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    return ApiError(exc.code, error.get("code", "http_error"), error.get("message", f"HTTP {exc.code}"),
                    error.get("fields"))

