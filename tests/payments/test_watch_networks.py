"""The operators' view of each network's watcher (issue 26, item 4): the chain-watcher page grouped by network
(name, chain id, finality rule, node endpoint without its key), each row's lag, last block and its age, errors and
addresses watched; a node on another chain said plainly; the same per network in /readyz and /metrics; and the
asset form's checks for each address scheme."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from anchorgpu.chains.tron_address import to_base58
from anchorgpu.payments.admin import AssetForm
from anchorgpu.payments.models import Asset, WatchState
from anchorgpu.payments.watch_status import watch_networks
from tests import shop

pytestmark = pytest.mark.django_db

# USDT's TRC-20 contract as TRONSCAN lists it; nothing is read from a chain here.
USDT_TRON = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
USDC_POLYGON = "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"  # PolygonScan: native USDC
OTHER_CHAIN = "the node is on chain id 1, this asset is configured for 137"


@pytest.fixture
def watched():
    shop.load_shop()
    now = timezone.now().replace(microsecond=0)
    eth = Asset.objects.get(code="eth")
    usdc = Asset.objects.get(code="usdc-ethereum")
    Asset.objects.filter(pk__in=[eth.pk, usdc.pk]).update(watch_url="http://127.0.0.1:8545/v3/SECRETKEY123")
    # The demo offers every network; this page is read with four of them, set up here field by field.
    Asset.objects.exclude(code__in=["btc", "eth", "usdc-ethereum"]).update(is_active=False)
    polygon, _ = Asset.objects.update_or_create(code="usdc-polygon", defaults=dict(
        symbol="USDC", name="USD Coin", network="polygon", network_name="Polygon PoS", scheme="evm", chain_id=137,
        decimals=6, contract=USDC_POLYGON, confirmations_required=1, finality="finalized",
        watch_url="http://127.0.0.1:8546/", position=5, is_active=True))
    tron, _ = Asset.objects.update_or_create(code="usdt-tron", defaults=dict(
        symbol="USDT", name="Tether", network="tron", network_name="TRON (TRC-20)", scheme="tron",
        chain_id=0x2B6653DC, decimals=6, contract=USDT_TRON, confirmations_required=19, finality="depth",
        watch_url="", position=6, is_active=True))
    WatchState.objects.create(asset=eth, tip=1000, next_block=998, tip_time=now - timedelta(seconds=30),
                              last_poll_at=now, last_success_at=now, watched=5)
    WatchState.objects.create(asset=usdc, tip=1000, next_block=1001, tip_time=now - timedelta(seconds=30),
                              last_poll_at=now, last_success_at=now, watched=2)
    WatchState.objects.create(asset=polygon, last_poll_at=now, last_success_at=now - timedelta(seconds=20),
                              errors_in_row=2, last_error=OTHER_CHAIN, last_error_at=now)
    return {"eth": eth, "usdc": usdc, "polygon": polygon, "tron": tron}


def test_the_rows_are_grouped_by_network(watched):
    groups = {g.network: g for g in watch_networks()}
    assert list(groups) == ["bitcoin", "ethereum", "polygon", "tron"]
    ethereum = groups["ethereum"]
    assert [r.asset.code for r in ethereum.rows] == ["eth", "usdc-ethereum"]
    assert ethereum.chain_ids == (1,) and ethereum.status == "ok" and ethereum.max_lag == 3
    assert ethereum.watched == 7 and ethereum.endpoints == ("http://127.0.0.1:8545",)
    assert ethereum.rows[0].tip_age_seconds >= 30 and ethereum.other_chain_ids == ()
    polygon = groups["polygon"]
    assert polygon.status == "failing" and polygon.other_chain_ids == (1,) and polygon.errors_in_row == 2
    assert polygon.finality == ("the “finalized” block, 1 deep",)
    assert groups["tron"].status == "off" and groups["tron"].chain_ids == (728126428,)
    assert groups["bitcoin"].finality == ("2 confirmations",)


def test_the_page_shows_each_network(client, watched):
    client.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "x" * 12))
    html = client.get(reverse("admin:payments_asset_watch")).content.decode()
    ethereum = html.split('data-network="ethereum"')[1].split("</tbody>")[0]
    assert "Chain id 1" in ethereum and "<code>http://127.0.0.1:8545</code>" in ethereum
    assert "12 confirmations" in ethereum
    assert 'data-asset="eth"' in ethereum and 'data-asset="usdc-ethereum"' in ethereum
    eth_row = ethereum.split('data-asset="eth"')[1].split("</tr>")[0]
    assert '<td class="lag">3</td>' in eth_row and "<td>1000" in eth_row and "s old" in eth_row
    assert "<td>5</td>" in eth_row  # addresses watched
    polygon = html.split('data-network="polygon"')[1].split("</tbody>")[0]
    assert "The node answers for chain id 1, not 137" in polygon
    assert "Wrong network: the node is on chain id 1, this asset on 137." in polygon
    assert "2 failed polls in a row" in polygon and "the “finalized” block, 1 deep" in polygon
    tron = html.split('data-network="tron"')[1].split("</tbody>")[0]
    assert "Chain id 728126428" in tron and "none: checked by hand" in tron
    assert "SECRETKEY123" not in html


def test_readyz_and_metrics_list_each_network(client, settings, watched):
    body = client.get("/readyz").json()
    networks = {n["network"]: n for n in body["chain_networks"]}
    assert set(networks) == {"ethereum", "polygon"}  # the watched ones
    assert networks["polygon"]["node_on_other_chain"] == [1] and networks["polygon"]["status"] == "failing"
    assert networks["ethereum"]["lag_blocks"] == 3 and networks["ethereum"]["assets"] == ["eth", "usdc-ethereum"]
    assert "SECRETKEY123" not in str(body) and OTHER_CHAIN not in str(body)
    settings.ANCHORGPU_METRICS_TOKEN = "s3cret-token-for-tests"
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token-for-tests").content.decode()
    assert 'anchorgpu_chain_network_node_on_other_chain{chain_id="137",network="polygon"} 1.0' in text
    assert 'anchorgpu_chain_network_ok{chain_id="1",network="ethereum"} 1.0' in text
    assert 'anchorgpu_chain_network_lag_blocks{chain_id="1",network="ethereum"} 3.0' in text


def _form(asset: Asset, **changes) -> AssetForm:
    data = {f: getattr(asset, f) for f in ("code", "symbol", "name", "network", "network_name", "scheme",
                                           "decimals", "confirmations_required", "finality", "tolerance_bps",
                                           "position", "is_active")}
    data.update(chain_id=asset.chain_id or "", contract=asset.contract, watch_url="", quote_decimals="")
    data.update(changes)
    return AssetForm(data=data, instance=asset)


def test_the_asset_form_checks_each_scheme(watched):
    # A bound form writes its data into its instance: each form gets its own copy of the row.
    def polygon_():
        return Asset.objects.get(code="usdc-polygon")

    polygon, tron, btc = watched["polygon"], watched["tron"], Asset.objects.get(code="btc")
    assert _form(polygon).is_valid(), _form(polygon).errors
    assert _form(polygon_(), contract="").is_valid()  # the network's own coin (POL)
    assert _form(tron).is_valid(), _form(tron).errors
    cases = [
        (polygon, {"chain_id": ""}, "chain_id", "An EVM network needs its chain id"),
        (polygon, {"contract": USDT_TRON}, "contract", "An ERC-20 contract is an EVM address"),
        (polygon, {"contract": "0x3C499c542cEF5E3811e1192ce70d8cC03d5c3359"}, "contract", "checksum"),
        (tron, {"contract": ""}, "contract", "TRC-20 tokens only"),
        (tron, {"contract": USDC_POLYGON}, "contract", "A TRC-20 contract is a TRON address"),
        (tron, {"contract": USDT_TRON[:-1] + ("u" if USDT_TRON[-1] != "u" else "v")}, "contract",
         "valid checksum"),
        (tron, {"chain_id": ""}, "chain_id", "728126428"),
        (tron, {"finality": "safe"}, "finality", "TRON has no “safe” block"),
        (tron, {"finality": "depth", "confirmations_required": "3"}, "finality", "at least 19 confirmations"),
        (btc, {"finality": "safe"}, "finality", "for EVM networks and TRON"),
        (btc, {"chain_id": "1"}, "chain_id", "leave it empty for Bitcoin"),
        (btc, {"contract": USDC_POLYGON}, "contract", "Bitcoin has no token contracts"),
    ]
    for asset, changes, field, words in cases:
        form = _form(Asset.objects.get(pk=asset.pk), **changes)
        assert not form.is_valid(), (asset.code, changes)
        assert any(words in e for e in form.errors.get(field, [])), (asset.code, changes, form.errors)
    assert to_base58(USDT_TRON) == USDT_TRON  # the fixture's contract is itself well formed


def test_the_payment_queue_shows_each_watched_network(client, watched):
    order = shop.place(shop.customer(), asset="usdc-ethereum")
    order.refund_due = True  # listed in the queue
    order.save(update_fields=["refund_due"])
    client.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "x" * 12))
    html = client.get(reverse("admin:orders_paymentqueueentry_changelist")).content.decode()
    strip = html.split('id="queue-watchers"')[1].split("</section>")[0]
    polygon = strip.split('data-network="polygon"')[1].split("</li>")[0]
    assert "Polygon PoS" in polygon and "failing" in polygon and "answers for chain id 1" in polygon
    ethereum = strip.split('data-network="ethereum"')[1].split("</li>")[0]
    assert "ok" in ethereum and "3 blocks behind" in ethereum
    assert 'data-network="tron"' not in strip and 'data-network="bitcoin"' not in strip  # not watched
    row = html.split(order.reference)[1].split("</tr>")[0]
    assert '<small class="queue-network">Ethereum mainnet (ERC-20)</small>' in row


def test_the_asset_list_shows_each_assets_watcher(client, watched):
    client.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "x" * 12))
    html = client.get(reverse("admin:payments_asset_changelist")).content.decode()
    polygon = html.split("usdc-polygon</a>")[1].split("</tr>")[0]
    assert 'class="watch-failing">failing</a>' in polygon and "node on chain id 1" in polygon
    assert "<td class=\"field-chain_id\">137</td>" in polygon
    eth = html.split(">eth</a>")[1].split("</tr>")[0]
    assert 'class="watch-ok">ok</a> <small>(3 blocks behind)</small>' in eth
    assert 'class="watch-off">off: checked by hand</a>' in html.split("usdt-tron</a>")[1].split("</tr>")[0]
