"""The OpenAPI schema: valid, complete, and honest. The API is fuzzed from its
own schema (schemathesis, in-process over WSGI): whatever is sent, no 5xx,
every response as documented, every error structured."""

from __future__ import annotations

import json
import os

import jsonschema
import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from openapi_spec_validator import validate
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.api import urls as api
from anchorgpu.api.openapi import openapi
from anchorgpu.payments.models import Asset
from tests import shop

FIXED = openapi()  # no database: the shape only
OPERATIONS = [(path, method.upper()) for path, item in FIXED["paths"].items() for method in item]
# Small for CI; ANCHORGPU_FUZZ_EXAMPLES=500 for a longer hunt.
MAX_EXAMPLES = int(os.environ.get("ANCHORGPU_FUZZ_EXAMPLES", "25"))


def test_the_fixed_schema_is_valid_openapi_3_1():
    validate(FIXED)


@pytest.mark.django_db
def test_the_served_schema_is_valid_and_lists_what_is_on_sale(client):
    shop.load_shop()
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    schema = response.json()
    validate(schema)
    order = schema["components"]["schemas"]["OrderRequest"]["properties"]
    accepted = set(Asset.objects.filter(is_active=True).values_list("code", flat=True))
    assert set(order["asset"]["enum"]) == accepted and {"btc", "eth", "usdc-ethereum", "usdt-tron"} <= accepted
    Asset.objects.filter(code="usdt-tron").update(is_active=False)  # what is no longer accepted is not listed
    order = client.get("/api/v1/openapi.json").json()["components"]["schemas"]["OrderRequest"]["properties"]
    assert set(order["asset"]["enum"]) == accepted - {"usdt-tron"}
    assert "h100-sxm-80gb" in order["product"]["enum"] and order["term"]["enum"] == [3, 7, 30]
    assert "enum" not in FIXED["components"]["schemas"]["OrderRequest"]["properties"]["asset"]


def test_every_api_route_is_documented():
    routes = {"/" + str(p.pattern).replace("<slug:slug>", "{slug}").replace("<str:reference>", "{reference}")
              .replace("<uuidstr:report_id>", "{report_id}")
              for p in api.urlpatterns}
    assert routes == set(FIXED["paths"]) | {"/openapi.json"}
    for path, item in FIXED["paths"].items():
        for method, op in item.items():
            assert op["responses"], (path, method)
            errors = [code for code in op["responses"] if code.startswith("4")]
            assert errors and all(op["responses"][c] == {"$ref": f"#/components/responses/E{c}"} for c in errors)
            public = path.startswith(("/offers", "/quotes", "/assets"))
        assert op["security"] == ([] if public else [{"bearerAuth": []}])


# Fuzzing ------------------------------------------------------------------------------------------

ERROR_SCHEMA = FIXED["components"]["schemas"]["Error"]


def structured_errors(ctx, response, case):
    """Every 4xx is JSON in the one error shape, with a code and a message."""
    if response.status_code < 400:
        return None
    content_type = next((v for k, v in response.headers.items() if k.lower() == "content-type"), [""])[0]
    assert content_type.startswith("application/json"), f"{response.status_code} as {content_type!r}"
    jsonschema.validate(json.loads(response.content), ERROR_SCHEMA)
    return True


CHECKS = [not_a_server_error, structured_errors, status_code_conformance, content_type_conformance,
          response_schema_conformance, response_headers_conformance]


@pytest.fixture
def wsgi_app():
    """The real WSGI application, called in-process inside the test's transaction.
    Like Django's test client, keep the request signals from closing the connection."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.fixture
def fuzz_shop(db):
    shop.load_shop()
    user = shop.customer()
    _token, secret = api_token_create(user=user, name="fuzz")
    return {"token": secret, "order": shop.place(user)}


# Random text is never an SSH key or a country, and random quantities exceed
# the fleet: the "deep" variant fixes those few fields of otherwise generated
# orders, so that many of them are placed (and replayed, and refused as reused).
DEEP = {"ssh_keys": shop.ED25519, "email": "alice@example.com", "name": "Alice", "country": "PT", "vat_id": "",
        "start": None, "quantity": 1}


def _cases():
    for path, method in OPERATIONS:
        for mode in ("positive", "negative"):
            yield pytest.param(path, method, mode, "", id=f"{method} {path} {mode}")
            if "{reference}" in path:
                yield pytest.param(path, method, mode, "own-order", id=f"{method} {path} {mode} own-order")
        if (path, method) == ("/orders", "POST"):
            yield pytest.param(path, method, "positive", "deep", id=f"{method} {path} positive deep")


@pytest.mark.parametrize(("path", "method", "mode", "variant"), list(_cases()))
def test_fuzz_from_the_schema(path, method, mode, variant, wsgi_app, fuzz_shop):
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", wsgi_app)
    operation = schema[path][method]
    pinned = {"reference": fuzz_shop["order"].reference} if variant == "own-order" else None
    needs_token = bool(operation.definition.raw.get("security"))

    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(case=operation.as_strategy(generation_mode=schemathesis.GenerationMode(mode), path_parameters=pinned))
    def run(case):
        if needs_token:
            case.headers = {**(case.headers or {}), "Authorization": f"Bearer {fuzz_shop['token']}"}
        if variant == "deep":
            case.body = {**case.body, **DEEP}
        response = case.call()
        case.validate_response(response, checks=CHECKS)

    run()
