"""GET /api/v1/assets: what orders may be paid in, each coin on each network, so that a client chooses the
coin, then the network, as the checkout page does, and sends that row's asset slug."""

from __future__ import annotations

import pytest

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.payments.models import Asset
from tests import shop
from tests.web.test_api_orders import Api, order_body

pytestmark = pytest.mark.django_db


def test_every_accepted_asset_is_listed_with_its_coin_and_network(client):
    shop.load_shop()
    Asset.objects.filter(code="usdc-polygon").update(is_active=False)
    response = client.get("/api/v1/assets")
    assert response.status_code == 200
    rows = response.json()
    assert [r["asset"] for r in rows] == list(Asset.objects.filter(is_active=True).values_list("code", flat=True))
    assert "usdc-polygon" not in {r["asset"] for r in rows}
    tron = next(r for r in rows if r["asset"] == "usdt-tron")
    assert tron == {"asset": "usdt-tron", "symbol": "USDT", "name": "Tether USD", "network": "tron",
                    "network_name": "TRON (TRC-20)", "chain_id": 728126428,
                    "contract": "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", "decimals": 6, "confirmations_required": 1,
                    "finality": "finalized", "uri_carries_amount": False}
    btc = next(r for r in rows if r["asset"] == "btc")
    assert (btc["contract"], btc["chain_id"], btc["uri_carries_amount"]) == (None, None, True)


def test_one_coins_networks_and_an_unknown_coin_is_a_400(client):
    shop.load_shop()
    usdt = client.get("/api/v1/assets", {"symbol": "usdt"}).json()
    assert [r["network"] for r in usdt] == ["ethereum", "tron", "arbitrum", "polygon", "bsc"]
    assert {r["symbol"] for r in usdt} == {"USDT"}
    refused = client.get("/api/v1/assets", {"symbol": "DOGE"})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "unknown_coin" and "BTC, ETH, USDT, USDC" in error["message"]


def test_an_order_by_api_in_a_listed_asset_is_quoted_on_that_network(client):
    shop.load_shop()
    _token, secret = api_token_create(user=shop.customer(), name="test")
    api = Api(client, secret)
    chosen = next(r for r in client.get("/api/v1/assets", {"symbol": "USDC"}).json() if r["network"] == "bsc")
    response = api.post("/api/v1/orders", order_body(asset=chosen["asset"]), key="usdc-on-bsc")
    assert response.status_code == 201, response.content
    quote = response.json()["quote"]
    assert (quote["asset"], quote["network"], quote["decimals"]) == ("usdc-bsc", "bsc", 18)
    assert quote["payment_uri"].startswith(f"ethereum:{chosen['contract']}@56/transfer?address=")
    tron = api.post("/api/v1/orders", order_body(asset="usdt-tron"), key="usdt-on-tron")
    assert tron.status_code == 201 and tron.json()["quote"]["payment_uri"] == tron.json()["quote"]["address"]


def test_the_api_still_requires_the_asset_and_takes_no_coin_field(client):
    shop.load_shop()
    schema = client.get("/api/v1/openapi.json").json()["components"]["schemas"]["OrderRequest"]
    assert "asset" in schema["required"] and "coin" not in schema["properties"]
    _token, secret = api_token_create(user=shop.customer(), name="test")
    api = Api(client, secret)
    body = order_body()
    del body["asset"]
    missing = api.post("/api/v1/orders", body, key="no-asset")
    assert missing.status_code == 400 and "asset" in missing.json()["error"]["fields"]
    coin = api.post("/api/v1/orders", {**body, "coin": "USDT"}, key="a-coin")
    assert coin.status_code == 400  # an unknown field
