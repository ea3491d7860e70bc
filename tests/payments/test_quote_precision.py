"""A quote asks for an amount at the asset's quoted precision (BTC 8, ETH 6, USDC 2 decimals), rounded up
once, kept as exact base units, and paying exactly that amount pays the order."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.utils import translation

from anchorgpu.formats import display
from anchorgpu.orders.models import Order
from anchorgpu.payments.admin import AssetForm
from anchorgpu.payments.amounts import fiat_value
from anchorgpu.payments.models import Asset
from tests import shop

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(db):
    shop.load_shop()
    return shop.customer()


@pytest.mark.parametrize("code, places", [("btc", 8), ("eth", 6), ("usdc-ethereum", 2)])
def test_a_quote_is_a_whole_number_of_quoted_steps_that_covers_the_total(alice, code, places):
    order = shop.place(alice, asset=code, options=("dedicated-ipv4",))
    quote = order.quote
    asset = quote.asset
    assert asset.quoted_places == places
    step = 10 ** (asset.decimals - places)
    assert isinstance(quote.amount, int) and quote.amount % step == 0
    assert fiat_value(quote.amount, rate=quote.rate, decimals=asset.decimals) >= order.fiat_total
    assert fiat_value(quote.amount - step, rate=quote.rate, decimals=asset.decimals) < order.fiat_total
    # The amount shown is the amount owed, to the base unit, with exactly the quoted places.
    wallet = display.wallet_amount(quote.amount, asset.decimals, asset.quoted_places)
    assert len(wallet.split(".")[1]) == places if places else "." not in wallet
    assert Decimal(wallet).scaleb(asset.decimals) == quote.amount


def test_an_eth_quote_no_longer_asks_for_seventeen_decimals(alice):
    order = shop.place(alice, asset="eth")
    with translation.override("pt"):
        shown = display.crypto(order.quote.amount, 18, order.quote.asset.quoted_places, "ETH")
    _whole, decimals = shown.removesuffix(" ETH").split(",")
    assert len(decimals) == 6, shown


@pytest.mark.parametrize("code", ["btc", "eth", "usdc-ethereum"])
def test_paying_exactly_the_quoted_amount_pays_the_order(alice, code):
    order = shop.place(alice, asset=code)
    shop.pay(order, amount=order.quote.amount, confirmations=20)
    assert Order.objects.get(pk=order.pk).state == "paid"


def test_paying_one_step_less_does_not(alice):
    order = shop.place(alice, asset="usdc-ethereum")
    order.quote.tolerance = 0
    order.quote.save(update_fields=["tolerance"])
    shop.pay(order, amount=order.quote.amount - 10**4, confirmations=20)  # one cent short
    assert Order.objects.get(pk=order.pk).state == "underpaid"


def test_the_admin_refuses_more_quoted_places_than_the_asset_has(alice):
    asset = Asset.objects.get(code="usdc-ethereum")
    data = {f.name: getattr(asset, f.attname) for f in Asset._meta.fields if f.name != "id"}
    data.update(quote_decimals=7, contract=asset.contract, watch_url="")
    form = AssetForm(data=data, instance=asset)
    assert not form.is_valid()
    assert "quote_decimals" in form.errors
    with pytest.raises(ValidationError):
        Asset._meta.get_field("quote_decimals").run_validators(31)
