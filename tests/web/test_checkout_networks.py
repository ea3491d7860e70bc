"""Paying with a coin on one of its networks: the checkout asks for the coin, then the network (none for a
coin on one network), refuses a network of another coin or an unknown one with a form error, and the order
page, its QR code and the order e-mail all name the network the transfer must use."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from anchorgpu.orders import notify
from anchorgpu.orders.models import Order
from anchorgpu.payments.addresses import derive_address
from anchorgpu.payments.demo import DEMO_XPUB_TRON, USDC_BASE
from anchorgpu.payments.uri import payment_uri, qr_svg
from tests import shop
from tests.web.test_checkout import checkout_url, form_data

pytestmark = pytest.mark.django_db

TRON_WARNING = "Send USDT on TRON (TRC-20) only. A transfer on any other network does not pay this order."


@pytest.fixture
def customer_client(client):
    shop.load_shop()
    client.force_login(shop.customer())
    return client


def radios(page: str, name: str) -> list[str]:
    return re.findall(rf'<input type="radio" name="{name}" value="([^"]+)"', page)


def test_the_page_offers_each_coin_once_and_the_networks_of_each_coin_under_it(customer_client):
    page = customer_client.get(checkout_url()).content.decode()
    assert radios(page, "coin") == ["BTC", "ETH", "USDT", "USDC"]
    # A coin on one network has no network choice; the others list theirs, in their own group.
    networks = radios(page, "asset")
    assert "btc" not in networks and "eth" not in networks
    usdt = page.split('data-networks="USDT"')[1].split("</fieldset>")[0]
    assert radios(usdt, "asset") == ["usdt-ethereum", "usdt-tron", "usdt-arbitrum", "usdt-polygon", "usdt-bsc"]
    usdc = page.split('data-networks="USDC"')[1].split("</fieldset>")[0]
    assert radios(usdc, "asset") == ["usdc-ethereum", "usdc-base", "usdc-arbitrum", "usdc-polygon", "usdc-bsc"]
    # Each network says what it is and about how long a transfer takes to count there.
    assert "TRON (TRC-20) · confirmed in about 1 minute" in usdt
    assert "BNB Smart Chain (BEP-20) · confirmed in about 1 minute" in usdt
    assert "Base · confirmed in about 20 minutes" in usdc
    assert "Ethereum mainnet (ERC-20) · confirmed in about 3 minutes" in usdc
    assert 'name="coin" value="BTC"' in page and "checked" in page.split('value="BTC"')[1].split(">")[0]
    assert "checkout_network.js" in page


def test_usdt_on_tron_places_an_order_quoted_on_tron(customer_client):
    response = customer_client.post(checkout_url(), form_data(coin="USDT", asset="usdt-tron"))
    order = Order.objects.get()
    assert response.status_code == 302 and response.url == reverse("order", kwargs={"reference": order.reference})
    quote = order.quote
    assert (quote.asset.code, quote.scheme) == ("usdt-tron", "tron") and quote.address.startswith("T")
    assert quote.amount == int(order.fiat_total * 10**6)  # 1 USD = 1 USDT, six decimals on TRON


def test_a_coin_on_one_network_needs_no_network(customer_client):
    data = form_data(coin="ETH")
    del data["asset"]
    response = customer_client.post(checkout_url(), data)
    assert response.status_code == 302 and Order.objects.get().quote.asset.code == "eth"


def test_the_api_way_of_naming_the_asset_alone_still_works(customer_client):
    response = customer_client.post(checkout_url(), form_data(asset="usdc-base"))  # no coin sent
    assert response.status_code == 302 and Order.objects.get().quote.asset.code == "usdc-base"


@pytest.mark.parametrize("coin, asset, message", [
    ("USDT", None, "USDT is accepted on several networks: choose the one you will send it on."),
    ("USDT", "usdc-base", "Base is listed for USDC, not for USDT: choose one of the networks under USDT."),
    ("BTC", "usdt-tron", "TRON (TRC-20) is listed for USDT, not for BTC: choose one of the networks under BTC."),
    ("USDT", "usdt-solana", "Choose one of the assets listed."),
    ("DOGE", "usdt-tron", "Choose one of the coins listed."),
    ("", None, "Choose how you pay: a coin, and the network you send it on."),
])
def test_a_missing_mismatched_or_unknown_choice_is_a_form_error(customer_client, coin, asset, message):
    data = form_data(coin=coin, asset=asset or "")
    response = customer_client.post(checkout_url(), data)
    page = response.content.decode()
    assert response.status_code == 400 and not Order.objects.exists()  # a form error, never a 500
    assert message in page.replace("&#x27;", "'")
    # What the customer chose is still chosen on the page that says what is wrong.
    if coin in ("USDT", "BTC"):
        assert re.search(rf'name="coin" value="{coin}"[^>]*checked', page)


def test_the_order_page_warns_of_the_network_and_the_tron_code_holds_the_address(customer_client):
    customer_client.post(checkout_url(), form_data(coin="USDT", asset="usdt-tron"))
    order = Order.objects.get()
    page = customer_client.get(reverse("order", kwargs={"reference": order.reference})).content.decode()
    assert TRON_WARNING in page
    assert qr_svg(order.quote.address) in page  # the QR code is the bare T… address
    assert "type the amount in USDT in your wallet yourself" in page
    assert "Open in a wallet" not in page  # no URI to open on TRON


def test_an_l2_order_page_carries_eip681_with_the_chain_id(customer_client):
    customer_client.post(checkout_url(), form_data(coin="USDC", asset="usdc-base"))
    quote = Order.objects.get().quote
    page = customer_client.get(reverse("order", kwargs={"reference": quote.order.reference})).content.decode()
    uri = payment_uri(scheme="evm", address=quote.address, amount=quote.amount, decimals=6, chain_id=8453,
                      contract=USDC_BASE)
    assert uri.startswith(f"ethereum:{USDC_BASE}@8453/transfer?address=")
    assert qr_svg(uri) in page and f'href="{uri.replace("&", "&amp;")}"' in page
    assert "Send USDC on Base only. A transfer on any other network does not pay this order." in page
    assert "the code asks for the amount in USDC" in page


def test_the_order_email_names_the_network(mailoutbox):
    shop.load_shop()
    order = shop.place(shop.customer(), asset="usdt-tron")
    assert notify.emails_send_due() == 1
    body = mailoutbox[0].body
    assert "on TRON (TRC-20) to:" in body and order.quote.address in body
    assert TRON_WARNING in body


def test_a_tron_order_takes_a_tron_transaction_id_and_a_tron_refund_address(customer_client):
    customer_client.post(checkout_url(), form_data(coin="USDT", asset="usdt-tron"))
    order = Order.objects.get()
    claim = reverse("order_claim_payment", kwargs={"reference": order.reference})
    refused = customer_client.post(claim, {"txid": "0x" + "ab" * 31})  # too short
    assert refused.status_code == 400 and "A TRON transaction id is 64 hexadecimal characters" in \
        refused.content.decode()
    assert customer_client.post(claim, {"txid": "ab" * 32}).status_code == 302
    order.refresh_from_db()
    assert order.state == "payment_claimed" and order.claimed_txid == "0x" + "ab" * 32
    refund = reverse("order_refund_address", kwargs={"reference": order.reference})
    evm = customer_client.post(refund, {"address": "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"})
    assert evm.status_code == 400  # an Ethereum address cannot take a refund on TRON
    tron_refund = derive_address(DEMO_XPUB_TRON, "tron", 7)  # some other TRON account
    assert customer_client.post(refund, {"address": tron_refund}).status_code == 302
    order.refresh_from_db()
    assert order.refund_address == tron_refund
