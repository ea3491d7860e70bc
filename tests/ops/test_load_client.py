"""The load generator's cookie jar (bench/load_client.py): a client sends back what the server set, as a
browser does, so that the load test's visitors return with their CSRF cookie."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import load_client as lc  # noqa: E402


def test_a_request_carries_the_jar_after_its_request_line():
    raw = lc.get("/en/?term=3", "127.0.0.1:8000", {"Accept": "text/html"})
    sent = lc.with_cookies(raw, {b"csrftoken": b"abc", b"other": b"1"})
    assert sent.startswith(b"GET /en/?term=3 HTTP/1.1\r\nCookie: csrftoken=abc; other=1\r\nHost: 127.0.0.1:8000\r\n")
    assert sent.endswith(b"\r\n\r\n") and sent.count(b"\r\n\r\n") == 1
    body = b'{"a": 1}'
    post = lc.with_cookies(lc.post_json("/api/v1/orders", "h", body, {}), {b"k": b"v"})
    assert post.endswith(b"\r\n\r\n" + body) and b"\r\nCookie: k=v\r\n" in post


def test_the_jar_keeps_name_and_value_and_forgets_a_cookie_set_empty():
    jar: dict[bytes, bytes] = {}
    lc.keep_cookies(jar, [b"csrftoken=Xy12; expires=Tue, 30 Nov 2027 18:00:00 GMT; Max-Age=31449600; Path=/",
                          b"django_language=pt; Path=/; SameSite=Lax"])
    assert jar == {b"csrftoken": b"Xy12", b"django_language": b"pt"}
    lc.keep_cookies(jar, [b'django_language=""; expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0; Path=/'])
    assert jar == {b"csrftoken": b"Xy12"}
    lc.keep_cookies(jar, [b"csrftoken=; Path=/"])
    assert jar == {}
