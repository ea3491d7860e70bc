"""The load test's bare view (anchorgpu.ops.bench_ceiling) exists only when bench/load.py asks for it, never in
production, and answers without the database. The URLconf is built once per process, so each setting is tried
in a fresh one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.test import RequestFactory

from anchorgpu.ops.bench_ceiling import ceiling
from tests.ops.test_security import GOOD_KEY, SELLER_ENV

RESOLVE = ("import django; django.setup(); from django.urls import resolve, Resolver404\n"
           "try:\n    print(resolve('/bench/ceiling').func.__module__)\nexcept Resolver404:\n    print('not mounted')")


def _resolved(**env) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORGPU_")}
    done = subprocess.run([sys.executable, "-c", RESOLVE], capture_output=True, text=True, timeout=60,
                          env={**base, "DJANGO_SETTINGS_MODULE": "anchorgpu.settings",
                               "ANCHORGPU_DATA_DIR": os.environ.get("ANCHORGPU_DATA_DIR", "/tmp"), **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_ceiling_is_mounted_only_when_asked_for_and_never_in_production():
    assert _resolved() == "not mounted"
    assert _resolved(ANCHORGPU_BENCH_CEILING="0") == "not mounted"
    assert _resolved(ANCHORGPU_BENCH_CEILING="1") == "anchorgpu.ops.bench_ceiling"
    assert _resolved(ANCHORGPU_BENCH_CEILING="1", ANCHORGPU_ENV="production", ANCHORGPU_SECRET_KEY=GOOD_KEY,
                     ANCHORGPU_ALLOWED_HOSTS="shop.example", ANCHORGPU_EMAIL_HOST="smtp.example",
                     ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY="1", **SELLER_ENV) == "not mounted"


@pytest.mark.django_db
def test_the_ceiling_answers_without_a_query(django_assert_num_queries):
    with django_assert_num_queries(0):
        response = ceiling(RequestFactory().get("/bench/ceiling"))
    assert (response.status_code, response.content, response["Content-Type"]) == (200, b"ok", "text/plain")
