"""The load test's ceiling: a bare Django view, mounted only for ``bench/load.py``.

It answers a two-byte text response without reading the database or rendering a template, so a request
to it costs what the server, Django's request handling and the shop's middleware cost, and nothing else.
bench/load.py serves it from the same server processes as the shop pages and compares their throughput
with it.

It is mounted at ``/bench/ceiling`` only when ``ANCHORGPU_BENCH_CEILING=1`` is set, and never when
``ANCHORGPU_ENV=production`` (see settings.py). It has no URL name, so nothing links to it.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.urls import path


def ceiling(request):
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [path("bench/ceiling", ceiling)]
