"""The OpenAPI 3.1 description of API v1, written by hand as Python data.

``openapi()`` without a catalog is the fixed part; the view adds the slugs of
what is on sale now (products, environments, options, payment assets) as
enums, so that a client sees the valid values and a fuzzer reaches past them."""

from __future__ import annotations

from django.http import JsonResponse

from anchorgpu.catalog.models import Environment, Option, Product
from anchorgpu.catalog.rules import MAX_QUANTITY, TERM_DAYS
from anchorgpu.orders.models import PURPOSE_CHOICES
from anchorgpu.orders.states import OrderState
from anchorgpu.payments.evaluation import PaymentStatus
from anchorgpu.payments.models import ClaimCheck
from anchorgpu.payments.selectors import assets_accepted

from .api_body import MAX_LIST_ITEMS
from .api_orders import api_endpoint
from .checkout_form import MAX_KEYS_TEXT

JSON = "application/json"


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _str(max_length: int | None = None, min_length: int = 0, **extra) -> dict:
    schema = {"type": "string", **extra}
    if min_length:
        schema["minLength"] = min_length
    if max_length is not None:
        schema["maxLength"] = max_length
    return schema


def _null(schema: dict) -> dict:
    return {**schema, "type": [schema["type"], "null"]}


def _obj(properties: dict, required: list[str] | None = None, *, closed: bool = True, **extra) -> dict:
    schema = {"type": "object", "properties": properties, "required": list(required or properties), **extra}
    if closed:
        schema["additionalProperties"] = False
    return schema


def _body(name: str, *, required: bool = True) -> dict:
    return {"required": required, "content": {JSON: {"schema": _ref(name)}}}


def _ok(description: str, name: str, headers: dict | None = None) -> dict:
    response = {"description": description, "content": {JSON: {"schema": _ref(name)}}}
    if headers:
        response["headers"] = headers
    return response


def _errors(*codes: int) -> dict:
    """The error responses ``codes``, and 503 (any request may meet a database that is briefly away)."""
    return {str(code): {"$ref": f"#/components/responses/E{code}"} for code in (*codes, 503)}


_TIME = _str(40, format="date-time")
_MONEY = _str(40, pattern=r"^-?[0-9]+(\.[0-9]+)?$", description="A decimal amount, as a string.")
_UNITS = _str(80, pattern=r"^[0-9]+$", description="Whole base units (satoshi, wei, …), as a string.")
_SLUG = _str(50, 1, pattern=r"^[-a-zA-Z0-9_]+$")
_TERM = {"type": "integer", "enum": list(TERM_DAYS), "description": "Term in days."}
_QUANTITY = {"type": "integer", "minimum": 1, "maximum": MAX_QUANTITY,
             "description": "Units: cards, or lots of two cards for the B200."}
_OPTIONS = {"type": "array", "items": _SLUG, "maxItems": MAX_LIST_ITEMS, "uniqueItems": True}


def _pilot_report() -> dict:
    number = {"type": "number", "minimum": 0}
    restore = _obj({"status": {"type": "string", "enum": ["passed", "failed", "skipped"]},
                    "first_difference": {"oneOf": [{"type": "object", "additionalProperties": {"type": "string"}},
                                                   {"type": "null"}]}})
    return _obj({"id": _str(36, 36, format="uuid"), "uploaded_at": _TIME, "filename": _null(_str()),
                 "device": _null(_str()), "device_count": {"type": "integer", "minimum": 1},
                 "product": _null(_SLUG), "tokens_per_s": number, "peak_memory_bytes": {"type": "integer"},
                 "step_time_p50_s": number, "step_time_p95_s": number, "data_wait_share": number,
                 "checkpoint_bytes": {"type": "integer"}, "checkpoint_write_s": number, "restore": restore})


def _schemas() -> dict:
    line = _obj({"kind": _str(20), "description": _str(), "quantity": {"type": "integer"},
                 "unit_price": _MONEY, "amount": _MONEY})
    links = _obj({"self": _str(), "paid": _str(), "cancel": _str(), "page": _str()})
    summary = {"reference": _str(20), "state": {"type": "string", "enum": [s.value for s in OrderState]},
               "state_label": _str(description="The state in the request's language."),
               "product": _SLUG, "quantity": {"type": "integer"}, "term": {"type": "integer"},
               "starts_at": _TIME, "ends_at": _TIME,
               "term_sliding": {"type": "boolean", "description": "True until an as-soon-as-possible term is fixed: "
                                "it starts when access is ready, starts_at being the earliest it can."},
               "total": _MONEY, "currency": _str(3), "created_at": _TIME,
               "links": _ref("Links")}
    quote = _obj({
        "asset": _SLUG, "symbol": _str(), "network": _str(), "network_name": _str(),
        "decimals": {"type": "integer"}, "contract": _null(_str()), "amount": _UNITS,
        "amount_display": _str(description="The amount in whole coins, as a decimal string."),
        "tolerance": _UNITS, "address": _str(), "payment_uri": _str(), "rate": _MONEY,
        "rate_currency": _str(3), "rate_source": _str(), "rate_at": _TIME, "expires_at": _TIME,
        "monitor_until": _TIME, "confirmations_required": {"type": "integer"}})
    payment = _obj({"status": {"type": "string", "enum": [s.value for s in PaymentStatus]},
                    "received": _UNITS, "unconfirmed": _UNITS, "shortfall": _UNITS})
    claim_check = _obj({"txid": _str(), "outcome": {"type": "string", "enum": [o.value for o in ClaimCheck.Outcome]},
                        "confirmations": {"type": "integer"}, "required": {"type": "integer"},
                        "message": _str(description="For people, in the request's language."),
                        "checked_at": _TIME})
    access = _obj({"host": _str(), "port": {"type": "integer"}, "user": _str()})
    order = _obj({**summary, "cards": {"type": "integer"}, "start_asap": {"type": "boolean"},
                  "environment": _SLUG, "options": {"type": "array", "items": _str()},
                  "lines": {"type": "array", "items": _ref("PriceLine")},
                  "quote": {"oneOf": [_ref("PaymentQuote"), {"type": "null"}]},
                  "payment": {"oneOf": [_ref("Payment"), {"type": "null"}]},
                  "claimed_txid": _null(_str()), "claimed_at": _null(_TIME), "paid_at": _null(_TIME),
                  "claim_check": {"oneOf": [_ref("ClaimCheck"), {"type": "null"}],
                                  "description": "What checking the claimed transaction id on chain found."},
                  "access": {"oneOf": [_ref("Access"), {"type": "null"}],
                             "description": "How to log in, once the order is active."},
                  "invoice": {"oneOf": [_obj({"number": _str()}), {"type": "null"}]},
                  "purpose": {"type": ["string", "null"], "enum": [*PURPOSES, None],
                              "description": "What the rental is for, as the customer said."}})
    offer = {"product": _SLUG, "name": _str(), "vendor": _str(), "memory_gb_per_card": {"type": "integer"},
             "cards_per_unit": {"type": "integer"}, "stack": _str(), "stack_label": _str(), "term": _TERM,
             "quantity": {"type": "integer"}, "units_total": {"type": "integer"},
             "units_free_now": {"type": "integer"}, "earliest_start": _null(_TIME),
             "price": {"type": "object", "additionalProperties": _MONEY,
                       "description": "The price for `quantity` units, keyed by term in days."},
             "currency": _null(_str(3))}
    error = _obj({"error": _obj({
        "code": _str(64, 1, pattern=r"^[a-z_]+$", description="Stable, for programs."),
        "message": _str(min_length=1, description="For people, in the request's language (Accept-Language)."),
        "fields": {"type": "object", "additionalProperties": {"type": "array", "items": _str()},
                   "description": "Messages per field of the request."}}, ["code", "message"])})
    quote_request = _obj({"product": _SLUG, "quantity": _QUANTITY, "term": _TERM,
                          "start": _null({**_TIME, "description": "Earliest start; null: as soon as possible."}),
                          "environment": _str(50, description="Checked against the card's software stack."),
                          "options": _OPTIONS}, ["product", "quantity", "term"])
    keys = _str(MAX_KEYS_TEXT, 1, description="SSH public keys, one per line.")
    order_request = _obj({
        **quote_request["properties"], "environment": _SLUG,
        "name": _str(120, 1), "email": _str(254, 3, format="email"), "company": _str(120),
        "country": _str(2, 2, pattern="^[A-Z]{2}$", description="ISO 3166-1 alpha-2 code."),
        "billing_address": _str(500), "vat_id": _str(20, description="With its country prefix, e.g. PT123456789."),
        "ssh_keys": {"oneOf": [keys, {"type": "array", "items": _str(MAX_KEYS_TEXT, 1), "minItems": 1,
                                      "maxItems": MAX_LIST_ITEMS}]},
        "saved_keys": {"type": "array", "maxItems": MAX_LIST_ITEMS, "uniqueItems": True,
                       "items": _str(80, 1, description="The fingerprint of a key saved on your account "
                                                        "(“SHA256:…”, as the account's SSH keys page shows it)."),
                       "description": "Saved keys to install, besides or instead of ssh_keys: at least one key "
                                      "in all."},
        "purpose": {"type": "string", "enum": ["", *PURPOSES],
                    "description": "What the rental is for (optional; the planner's advice follows it)."},
        "asset": _SLUG, "accept": {"type": "boolean", "const": True,
                                   "description": "The customer has read that the term is fixed, that disks "
                                                  "are wiped at its end and are not a backup."}},
        ["product", "quantity", "term", "environment", "name", "email", "country", "asset", "accept"])
    return {
        "Error": error, "PriceLine": line, "Links": links, "PaymentQuote": quote, "Payment": payment,
        "ClaimCheck": claim_check,
        "Access": access, "Order": order, "OrderSummary": _obj(summary),
        "OrderList": _obj({"orders": {"type": "array", "items": _ref("OrderSummary")}}),
        "Offer": _obj(offer), "OfferDetail": _obj({**offer, "environment": _null(_str()),
                                                    "environments": {"type": "array", "items": _str()},
                                                    "options": {"type": "array", "items": _str()},
                                                    "lines": {"type": "array", "items": _ref("PriceLine")},
                                                    "total": _null(_MONEY)}),
        "QuoteRequest": quote_request,
        "Quote": _obj({"product": _SLUG, "quantity": {"type": "integer"}, "cards": {"type": "integer"},
                       "term": _TERM, "start": _null(_TIME), "environment": _null(_str()),
                       "options": {"type": "array", "items": _str()}, "available": {"type": "boolean"},
                       "units_free_now": {"type": "integer"}, "earliest_start": _null(_TIME),
                       "lines": {"type": "array", "items": _ref("PriceLine")}, "total": _null(_MONEY),
                       "currency": _null(_str(3))}),
        "OrderRequest": order_request,
        "PilotReport": _pilot_report(),
        "PilotReportList": _obj({"reports": {"type": "array", "items": _ref("PilotReport")}}),
        "PilotReportBody": {"type": "object", "description": "The JSON file ``anchorgpu pilot run`` wrote, as it is "
                                                            "(kind anchorgpu-pilot-report, at most 2 MiB)."},
        "PaidRequest": _obj({"txid": _null(_str(100, description="The transfer's transaction id, if known."))}, []),
        "EmptyRequest": _obj({}, []),
    }


PURPOSES = [value for value, _label in PURPOSE_CHOICES]
_ERROR_TEXT = {400: "The request is malformed or invalid.", 401: "No valid API token.",
               404: "Not found (or not yours).", 409: "Not possible in the order's state, or no longer available.",
               413: "The body is too large.", 415: "The body is not JSON.",
               422: "The Idempotency-Key was used with a different body.",
               429: "Too many attempts from this account or address; wait the Retry-After seconds.",
               503: "The database could not be reached; a write may or may not have been saved (an order may have "
                    "been placed). Retry after the Retry-After seconds with the same Idempotency-Key: it returns "
                    "the order if it was placed and never makes a second one."}


def _responses() -> dict:
    out = {f"E{code}": {"description": text, "content": {JSON: {"schema": _ref("Error")}}}
           for code, text in _ERROR_TEXT.items()}
    out["E401"]["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}, "required": True}}
    for code in ("E429", "E503"):
        out[code]["headers"] = {"Retry-After": {"schema": {"type": "string", "pattern": "^[0-9]+$"}, "required": True}}
    return out


def _query(name: str, schema: dict, description: str = "") -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


_LANGUAGE = {"$ref": "#/components/parameters/AcceptLanguage"}
_REFERENCE = {"name": "reference", "in": "path", "required": True,
              "schema": _str(20, 1, pattern=r"^[A-Za-z0-9-]+$"), "description": "The order reference, e.g. AG-…"}
_AUTH = [{"bearerAuth": []}]


def _op(op_id: str, summary: str, responses: dict, *, params: tuple = (), body: dict | None = None,
        auth: bool = True) -> dict:
    op = {"operationId": op_id, "summary": summary, "parameters": [_LANGUAGE, *params], "responses": responses,
          "security": _AUTH if auth else []}
    if body is not None:
        op["requestBody"] = body
    return op


def _paths() -> dict:
    catalog_query = (_query("term", _TERM), _query("quantity", _QUANTITY),
                     _query("start", _TIME, "Earliest start; times are UTC in the answer."),
                     _query("environment", _SLUG, "Only cards that run this software environment."))
    replayed = {"Idempotent-Replayed": {"schema": {"type": "string", "enum": ["true"]}}}
    return {
        "/offers": {"get": _op("listOffers", "The live catalog: units free, earliest start, prices.",
                               {"200": {"description": "One offer per product on sale.",
                                        "content": {JSON: {"schema": {"type": "array", "items": _ref("Offer")}}}},
                                **_errors(400)}, params=catalog_query, auth=False)},
        "/offers/{product}": {"get": _op(
            "getOffer", "One product, with the price lines for a quantity, term and options.",
            {"200": _ok("The offer.", "OfferDetail"), **_errors(400, 404)}, auth=False,
            params=({"name": "product", "in": "path", "required": True, "schema": dict(_SLUG)}, *catalog_query,
                    {**_query("options", _OPTIONS, "Option slugs."), "style": "form", "explode": True}))},
        "/quotes": {"post": _op("createQuote", "Price and availability of a configuration (no token needed; "
                                "nothing is held).", {"200": _ok("The price and earliest start.", "Quote"),
                                                      **_errors(400, 413, 415)},
                                body=_body("QuoteRequest"), auth=False)},
        "/orders": {
            "get": _op("listOrders", "Your orders, newest first (at most 100).",
                       {"200": _ok("Your orders.", "OrderList"), **_errors(400, 401)}),
            "post": _op("createOrder", "Place an order: holds the cards and makes the payment quote.",
                        {"201": _ok("The order was made.", "Order", {"Location": {"schema": {"type": "string"}}}),
                         "200": _ok("A replay: this key was used before with the same body; the same order.",
                                    "Order", replayed),
                         **_errors(400, 401, 409, 413, 415, 422, 429)},
                        params=({"name": "Idempotency-Key", "in": "header", "required": True,
                                 "schema": _str(60, 1, pattern="^[!-~]+$"),
                                 "description": "Your id for this order, e.g. a UUID. The same key with the same "
                                                "body returns the same order; with another body it is refused."},),
                        body=_body("OrderRequest")),
        },
        "/pilot-reports": {
            "get": _op("listPilotReports", "Your pilot reports, newest first (at most 100).",
                       {"200": _ok("Your reports.", "PilotReportList"), **_errors(400, 401)}),
            "post": _op("uploadPilotReport", "Upload a pilot report: the planner then uses its measured throughput.",
                        {"201": _ok("The report was kept.", "PilotReport",
                                    {"Location": {"schema": {"type": "string"}}}),
                         **_errors(400, 401, 413, 415)}, body=_body("PilotReportBody")),
        },
        "/pilot-reports/{report_id}": {"get": _op(
            "getPilotReport", "The figures the shop takes from one of your pilot reports.",
            {"200": _ok("The report's figures.", "PilotReport"), **_errors(400, 401, 404)},
            params=({"name": "report_id", "in": "path", "required": True, "schema": _str(36, 36, format="uuid")},))},
        "/orders/{reference}": {"get": _op("getOrder", "An order's state, payment quote, payment and access.",
                                           {"200": _ok("The order.", "Order"), **_errors(400, 401, 404)},
                                           params=(_REFERENCE,))},
        "/orders/{reference}/paid": {"post": _op(
            "claimPayment", "“I've paid”: the transfer is on its way (the transaction id helps us find it).",
            {"200": _ok("The order, now being checked.", "Order"), **_errors(400, 401, 404, 409, 413, 415, 429)},
            params=(_REFERENCE,), body=_body("PaidRequest", required=False))},
        "/orders/{reference}/cancel": {"post": _op(
            "cancelOrder", "Cancel an order still awaiting payment; its cards are released at once.",
            {"200": _ok("The cancelled order.", "Order"), **_errors(400, 401, 404, 409, 413, 415)},
            params=(_REFERENCE,), body=_body("EmptyRequest", required=False))},
    }


def openapi(catalog: dict[str, list[str]] | None = None) -> dict:
    schemas, paths = _schemas(), _paths()
    product_param = paths["/offers/{product}"]["get"]["parameters"][1]["schema"]
    for schema, key in [*_enum_targets(schemas), (product_param, "products")]:
        values = (catalog or {}).get(key)
        if values:
            schema["enum"] = values
    return {
        "openapi": "3.1.0",
        "info": {"title": "AnchorGPU API", "version": "1.0.0",
                 "description": "Fixed-term GPU rental: the live catalog, price quotes and orders paid by crypto "
                                "transfer. Errors are always {\"error\": {\"code\", \"message\", \"fields\"}}."},
        "servers": [{"url": "/api/v1"}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": _responses(),
            "parameters": {"AcceptLanguage": {"name": "Accept-Language", "in": "header", "required": False,
                                              "schema": _str(100, pattern="^[A-Za-z0-9,;=. *-]*$"),
                                              "description": "en, pt, fr or ko: the language of messages."}},
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "agt_…",
                                               "description": "A token from your account's API tokens page."}},
        },
    }


def _enum_targets(schemas: dict) -> list[tuple[dict, str]]:
    """The request-body schemas that list what is on sale now, by catalog key."""
    quote, order = schemas["QuoteRequest"]["properties"], schemas["OrderRequest"]["properties"]
    for props in (quote, order):  # separate dicts, so each can take its own enum
        for name in ("product", "environment", "asset"):
            if name in props:
                props[name] = dict(props[name])
        props["options"] = {**props["options"], "items": dict(props["options"]["items"])}
    return [(quote["product"], "products"), (order["product"], "products"), (order["environment"], "environments"),
            (order["asset"], "assets"), (quote["options"]["items"], "options"), (order["options"]["items"], "options")]


def catalog_now() -> dict[str, list[str]]:
    return {"products": list(Product.objects.filter(is_active=True).values_list("slug", flat=True)),
            "environments": list(Environment.objects.filter(is_active=True).values_list("slug", flat=True)),
            "options": list(Option.objects.filter(is_active=True).values_list("slug", flat=True)),
            "assets": list(assets_accepted().values_list("code", flat=True))}


@api_endpoint("GET", auth=False)
def openapi_view(request):
    return JsonResponse(openapi(catalog_now()), json_dumps_params={"ensure_ascii": False})
