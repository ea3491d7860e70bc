"""One HTTP GET against a block explorer, with every failure turned into a
short ``ChainUnavailable`` reason instead of a traceback from ``requests``."""

from __future__ import annotations

import json

import requests

from .base import ChainUnavailable, redact, secrets_of

MAX_BODY_BYTES = 8 * 1024 * 1024  # a raw block is at most 4 MB; anything far larger is not an answer


class ExplorerHttp:
    """GETs ``base_url + path`` and hands back the body."""

    def __init__(self, base_url: str, *, timeout: float, session: requests.Session | None = None,
                 on_request=None):
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError("The explorer's base URL must start with http:// or https://")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()
        self.on_request = on_request  # called once per request sent, whatever its outcome

    def fail(self, reason: str) -> ChainUnavailable:
        for secret in secrets_of(self.base_url):
            reason = reason.replace(secret, "…")
        return ChainUnavailable(reason, endpoint=redact(self.base_url))

    def get(self, path: str, *, missing_ok: bool = False) -> bytes | None:
        """The body of a 200 answer; ``None`` for a 404 when ``missing_ok``; otherwise ``ChainUnavailable``."""
        if self.on_request is not None:
            self.on_request()
        try:
            with self.session.get(self.base_url + path, timeout=self.timeout, stream=True,
                                  headers={"Accept-Encoding": "identity"}) as response:
                status, status_text = response.status_code, response.reason or ""
                if status == 404 and missing_ok:
                    return None
                if status != 200:
                    raise self.fail(f"GET {path}: HTTP {status} {status_text}".rstrip())
                body = bytearray()
                for chunk in response.iter_content(64 * 1024):
                    body += chunk
                    if len(body) > MAX_BODY_BYTES:
                        raise self.fail(f"GET {path}: answer larger than {MAX_BODY_BYTES // 2**20} MiB")
                return bytes(body)
        except requests.exceptions.ConnectTimeout:
            raise self.fail(f"GET {path}: no connection within {self.timeout:g} s") from None
        except requests.exceptions.Timeout:
            raise self.fail(f"GET {path}: no answer within {self.timeout:g} s") from None
        except requests.exceptions.ConnectionError as exc:
            text = str(exc).lower()
            if "timed out" in text:  # a timeout while the body streams in arrives as a ConnectionError
                raise self.fail(f"GET {path}: no answer within {self.timeout:g} s") from None
            cause = "connection refused" if "refused" in text else "connection failed"
            raise self.fail(f"GET {path}: {cause}") from None
        except requests.exceptions.RequestException as exc:
            raise self.fail(f"GET {path}: request failed ({type(exc).__name__})") from None

    def get_text(self, path: str, *, missing_ok: bool = False) -> str | None:
        body = self.get(path, missing_ok=missing_ok)
        if body is None:
            return None
        try:
            return body.decode("ascii").strip()
        except UnicodeDecodeError:
            raise self.fail(f"GET {path}: the answer is not plain text") from None

    def get_json(self, path: str, *, missing_ok: bool = False):
        body = self.get(path, missing_ok=missing_ok)
        if body is None:
            return None
        try:
            return json.loads(body)
        except ValueError:
            raise self.fail(f"GET {path}: the answer is not JSON") from None
