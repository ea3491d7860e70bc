"""The customer's order page and API after "I've paid" with a hash, and the
operators' chain-watcher status page, with the watcher on a real anvil node."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import translation

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.payments.models import Asset
from anchorgpu.payments.watch import watch_poll
from tests.chains.watch_support import CONFIRMATIONS, ChainShop, fresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain(anvil_w3, anvil_url):
    return ChainShop(anvil_w3, url=anvil_url)


@pytest.fixture
def alice(client, chain):
    client.force_login(chain.customer)
    return client


def page(client, order) -> str:
    with translation.override("en"):
        return client.get(reverse("order", kwargs={"reference": order.reference})).content.decode()


def claim_url(order) -> str:
    with translation.override("en"):
        return reverse("order_claim_payment", kwargs={"reference": order.reference})


def test_ive_paid_with_a_hash_shows_the_confirmations_at_once(alice, chain):
    order = chain.place("usdc-ethereum")
    txid = chain.send(order, order.quote.amount)
    response = alice.post(claim_url(order), {"txid": txid.upper().replace("0X", "0x")})
    assert response.status_code == 302
    html = page(alice, order)
    assert "Transfer found:" in html and f"1 of {CONFIRMATIONS} confirmations so far" in html
    assert "claim-found" in html and "Give another transaction id" not in html
    assert fresh(order).state == "payment_claimed"


def test_a_wrong_hash_is_explained_and_can_be_corrected(alice, chain):
    order = chain.place("eth")
    someone_else = chain.place("eth")
    wrong = chain.send(someone_else, 10**15)
    assert alice.post(claim_url(order), {"txid": wrong}).status_code == 302
    html = page(alice, order)
    assert "This transaction does not pay this order&#x27;s deposit address." in html
    assert "claim-other_address error" in html and "Give another transaction id" in html

    right = chain.send(order, order.quote.amount)
    chain.mine(CONFIRMATIONS - 1)
    assert alice.post(claim_url(order), {"txid": right}).status_code == 302
    order = fresh(order)
    assert order.claimed_txid == right and order.state == "paid"  # all confirmations already there
    assert "Paid, thank you." in page(alice, order)


def test_the_api_returns_the_check_in_the_callers_language(client, chain):
    order = chain.place("eth")
    txid = chain.send(order, order.quote.amount)
    _token, secret = api_token_create(user=chain.customer, name="cli")
    with translation.override("en"):
        url = reverse("api-order-paid", kwargs={"reference": order.reference})
    response = client.post(url, data=json.dumps({"txid": txid}), content_type="application/json",
                           headers={"Authorization": f"Bearer {secret}", "Accept-Language": "pt"})
    assert response.status_code == 200, response.content
    check = response.json()["claim_check"]
    assert (check["txid"], check["outcome"], check["confirmations"], check["required"]) == (txid, "found", 1,
                                                                                            CONFIRMATIONS)
    with translation.override("pt"):
        from django.utils.translation import gettext

        template = gettext("Transfer found: %(amount)s %(symbol)s, %(n)d of %(required)d confirmations so far. It "
                           "counts once it has all of them.")
    assert template != ("Transfer found: %(amount)s %(symbol)s, %(n)d of %(required)d confirmations so far. It "
                        "counts once it has all of them.")
    assert check["message"].startswith(template.split("%(amount)s")[0])


def test_the_status_page_shows_each_watcher(client, chain):
    chain.place("eth")
    watch_poll(chain.asset("eth"))
    Asset.objects.filter(code="usdc-ethereum").update(watch_url="http://127.0.0.1:9/v3/SECRETKEY123")
    watch_poll(chain.asset("usdc-ethereum"))
    with translation.override("en"):
        url = reverse("admin:payments_asset_watch")
    assert client.get(url).status_code == 302  # anonymous: to the log-in page
    customer = Client()
    customer.force_login(chain.customer)
    assert customer.get(url).status_code == 302  # not staff either

    operator = get_user_model().objects.create_superuser("ops", "ops@example.com", "x" * 12)
    client.force_login(operator)
    html = client.get(url).content.decode()
    tip = chain.w3.eth.block_number
    eth_row = html.split('data-asset="eth"')[1].split("</tr>")[0]
    assert "<strong>ok</strong>" in eth_row and f"<td>{tip}" in eth_row and '<td class="lag">0</td>' in eth_row
    usdc_row = html.split('data-asset="usdc-ethereum"')[1].split("</tr>")[0]
    assert "stalled" in usdc_row and "1 failed poll in a row" in usdc_row and "connection" in usdc_row
    assert "SECRETKEY123" not in html and "http://127.0.0.1:9" in usdc_row
    btc_row = html.split('data-asset="btc"')[1].split("</tr>")[0]
    assert "off: checked by hand" in btc_row


def test_the_asset_form_refuses_a_watch_url_it_cannot_use(chain):
    from anchorgpu.payments.admin import AssetForm

    asset = chain.asset("eth")
    base = {f: getattr(asset, f) for f in ("code", "symbol", "name", "network", "network_name", "scheme", "chain_id",
                                           "decimals", "contract", "confirmations_required", "finality", "tolerance_bps",
                                           "position", "is_active")}
    for url, message in [("ftp://node.example", "must start with http:// or https://"),
                         ("http://node.example/ key", "must not contain spaces")]:
        form = AssetForm(data={**base, "watch_url": url}, instance=asset)
        assert not form.is_valid() and message in form.errors["watch_url"][0]
    assert AssetForm(data={**base, "watch_url": " https://node.example/v3/k "}, instance=asset).is_valid()
