"""The API is described once: the OpenAPI document's components are generated from the same Schemas the answers
are built as, so a real answer fits its component; the catalog's query Schema names the form's fields; and the
quote's payment URI asks for what is still due."""

from __future__ import annotations

import jsonschema
import pydantic
import pytest

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.api import schemas
from anchorgpu.api.openapi import openapi
from anchorgpu.orders.models import Order
from anchorgpu.payments.uri import payment_uri
from anchorgpu.web.forms import OfferQueryForm, ProductQueryForm
from tests import shop
from tests.web.test_api_orders import Api, order_body

pytestmark = pytest.mark.django_db

DOC = openapi()


def component(name: str) -> dict:
    """A component with its references resolved against the whole document."""
    return {**DOC["components"]["schemas"][name], "components": DOC["components"]}


@pytest.fixture
def api(client):
    shop.load_shop()
    return Api(client, api_token_create(user=shop.customer(), name="t")[1])


def test_a_real_order_answer_fits_the_generated_order_component(api):
    response = api.post("/api/v1/orders", order_body(options=["checkpoint-storage-1tb"]), key="k")
    assert response.status_code == 201, response.content
    answer = response.json()
    jsonschema.validate(answer, component("Order"))
    # One description: the component lists exactly the Schema's fields, all of them required and no others.
    order = DOC["components"]["schemas"]["Order"]
    assert set(order["properties"]) == set(schemas.Order.model_fields) == set(answer)
    assert set(order["required"]) == set(answer) and order["additionalProperties"] is False
    assert DOC["components"]["schemas"]["OrderRequest"]["additionalProperties"] is False
    listed = api.get("/api/v1/orders").json()
    jsonschema.validate(listed, component("OrderList"))


def test_an_answer_that_leaves_the_description_cannot_be_built():
    with pytest.raises(pydantic.ValidationError, match="shell"):
        schemas.Access(host="h", port=22, user="u", shell="bash")  # not described
    with pytest.raises(pydantic.ValidationError, match="user"):
        schemas.Access(host="h", port=22)  # a described field missing


def test_catalog_answers_fit_their_components(api, client):
    offers = client.get("/api/v1/offers?term=7&quantity=1").json()
    jsonschema.validate(offers, {"type": "array", "items": {"$ref": "#/components/schemas/Offer"},
                                 "components": DOC["components"]})
    detail = client.get("/api/v1/offers/h100-sxm-80gb?options=dedicated-ipv4").json()
    jsonschema.validate(detail, component("OfferDetail"))
    quote = client.post("/api/v1/quotes", {"product": "h100-sxm-80gb", "quantity": 1, "term": 3},
                        content_type="application/json").json()
    jsonschema.validate(quote, component("Quote"))


def test_the_catalog_query_schema_names_the_forms_fields():
    assert set(schemas.OfferQuery.model_fields) == set(OfferQueryForm.base_fields)
    assert set(schemas.ProductQuery.model_fields) == set(ProductQueryForm.base_fields)


def test_an_underpaid_order_asks_for_what_is_missing(api):
    reference = api.post("/api/v1/orders", order_body(), key="k").json()["reference"]
    order = Order.objects.get(reference=reference)
    quote = order.quote
    shop.pay(order, amount=quote.amount // 2)
    order.refresh_from_db()
    assert order.state == "underpaid"
    answer = api.get(f"/api/v1/orders/{reference}").json()
    missing = quote.amount - quote.amount // 2
    assert answer["payment"]["shortfall"] == str(missing)
    assert answer["quote"]["amount"] == str(quote.amount)  # the quote itself is unchanged
    due = payment_uri(scheme=quote.scheme, address=quote.address, amount=missing, decimals=quote.asset.decimals,
                      chain_id=quote.asset.chain_id, contract=quote.asset.contract)
    assert answer["quote"]["payment_uri"] == due
    assert due != quote.uri  # not the whole amount again
    jsonschema.validate(answer, component("Order"))
