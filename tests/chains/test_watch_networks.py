"""USDT on several EVM networks at once, each on its own chain: payments on each, an underpayment, the wrong
token, the wrong network (recorded for the operators, never credited; a pasted hash names the network),
reorganisations on two networks with nothing credited twice, and a node on the wrong chain id that stops its
own network's poll only. On anvil nodes with the real chain ids and on eth-tester chains."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import translation

from anchorgpu.orders.models import OperatorEvent
from anchorgpu.payments.claim_check import claim_check, describe
from anchorgpu.payments.models import Asset, ClaimCheck, StrayTransfer, Transfer, WatchState
from anchorgpu.payments.services import payment_claim
from anchorgpu.payments.watch import watch_poll_all
from tests.chains import evm_support as evm
from tests.chains.networks_support import CONFIRMATIONS, NETWORKS, NetworkShop
from tests.chains.watch_support import fresh

pytestmark = pytest.mark.django_db
O = ClaimCheck.Outcome


@pytest.fixture
def nets(evm_networks, monkeypatch):
    shop = NetworkShop(evm_networks)
    if not any(url for _w3, url in evm_networks.values()):
        # eth-tester chains have no URL: the other networks a pasted hash is looked up on are reached in process
        monkeypatch.setattr("anchorgpu.payments.claim_check.watcher_for", lambda asset, timeout=None: (
            shop.watcher(asset) if asset.network in shop.chains else None))
    return shop


@pytest.fixture
def anvil_nets(anvil_networks):
    return NetworkShop(anvil_networks)


def test_each_network_pays_its_own_orders_in_its_own_decimals(nets):
    orders = {n.slug: nets.place(n.slug) for n in NETWORKS}
    assert len({o.quote.address for o in orders.values()}) == len(NETWORKS)  # one address sequence for all
    assert orders["bsc"].quote.amount % 10**12 == 0 and orders["bsc"].quote.amount > 10**18  # 18 decimals there
    txids = {slug: nets.send(order, order.quote.amount) for slug, order in orders.items()}
    nets.mine(CONFIRMATIONS)
    reports = nets.poll_all()
    for slug, order in orders.items():
        report = reports[slug]
        assert report.ok and report.found == 1 and report.strays == 0, (slug, report)
        assert report.watched == 1  # its own order; the others are read only as strays
        row = Transfer.objects.get(order=order)
        assert (row.chain, row.txid, row.amount) == (slug, txids[slug], order.quote.amount)
        assert fresh(order).state == "paid"
    assert Transfer.objects.count() == len(NETWORKS) and not StrayTransfer.objects.exists()
    nets.mine(1)
    again = nets.poll_all()
    assert all(r.ok and r.recorded == 0 for r in again.values())  # nothing recorded twice
    assert Transfer.objects.count() == len(NETWORKS)


@pytest.mark.parametrize("slug", ["base", "bsc"])
def test_an_underpayment_on_a_network_leaves_its_order_underpaid(nets, slug):
    order = nets.place(slug)
    short = order.quote.amount - order.quote.tolerance - 1
    nets.send(order, short)
    nets.mine(CONFIRMATIONS)
    nets.poll_all()
    assert fresh(order).state == "underpaid"
    assert Transfer.objects.get(order=order).amount == short


def test_another_token_called_usdt_pays_nothing(nets):
    order = nets.place("base")
    w3 = nets.w3("base")
    fake = evm.deploy_token(w3, symbol="USDT", name="Tether USD")
    evm.mint(w3, fake, nets.payer["base"], 10**15)
    nets.send(order, order.quote.amount, token=fake)
    nets.mine(CONFIRMATIONS)
    reports = nets.poll_all()
    assert all(r.ok and r.found == 0 for r in reports.values())
    assert fresh(order).state == "awaiting_payment"
    assert not Transfer.objects.exists() and not StrayTransfer.objects.exists()


def test_usdt_sent_on_polygon_for_a_base_quote_is_recorded_for_the_operators_not_credited(nets, client):
    order = nets.place("base")
    other = nets.place("polygon")  # an order really quoted on Polygon: paid by the same poll
    stray_txid = nets.send(order, order.quote.amount, on="polygon")
    nets.send(other, other.quote.amount)
    nets.mine(CONFIRMATIONS)
    reports = nets.poll_all()
    assert reports["polygon"].ok and reports["polygon"].strays == 1 and reports["polygon"].found == 2
    assert reports["base"].ok and reports["base"].found == 0
    assert fresh(order).state == "awaiting_payment" and not Transfer.objects.filter(order=order).exists()
    assert fresh(other).state == "paid"

    stray = StrayTransfer.objects.get()
    assert (stray.order_id, stray.network, stray.txid, stray.index, stray.amount) == (
        order.pk, "polygon", stray_txid, 0, order.quote.amount)
    assert stray.asset.code == "usdt-polygon" and stray.address == order.quote.address
    assert stray.block_hash == nets.w3("polygon").eth.get_block(stray.block_number)["hash"].to_0x_hex()
    event = OperatorEvent.objects.get(order=order, kind=OperatorEvent.Kind.WRONG_ASSET)
    assert "arrived on Polygon" in event.text and "quoted USDT on Base" in event.text
    assert event.payload["data"]["network"] == "polygon" and event.payload["data"]["txid"] == stray_txid

    with translation.override("en"):
        page = render_to_string("payments/includes/stray_transfers.html", {"order": fresh(order)})
    assert "on Polygon" in page and "accepts USDT on Base only" in page and "contact us" in page
    assert stray_txid in page and f"{order.quote.amount / 10**6:.2f}" in page
    assert render_to_string("payments/includes/stray_transfers.html", {"order": fresh(other)}).strip() == ""
    client.force_login(nets.customer)
    with translation.override("en"):
        order_page = client.get(reverse("order", kwargs={"reference": order.reference})).content.decode()
    assert "data-stray-transfer" in order_page and "on Polygon" in order_page and stray_txid in order_page

    nets.mine(1)
    nets.poll_all()

    assert StrayTransfer.objects.count() == 1  # seen once, recorded once
    assert OperatorEvent.objects.filter(order=order, kind=OperatorEvent.Kind.WRONG_ASSET).count() == 1


def test_a_polygon_hash_pasted_for_a_base_quote_is_named_as_the_wrong_network(nets):
    order = nets.place("base")
    txid = nets.send(order, order.quote.amount, on="polygon")
    order = payment_claim(order=order, actor=order.user.username, txid=txid)
    check = claim_check(order=order, watcher=nets.watcher(order.quote.asset))
    assert (check.outcome, check.detail) == (O.WRONG_NETWORK, {"network": "Polygon"})
    with translation.override("en"):
        said = describe(check, order.quote.asset)
    assert said == ("This transaction is on Polygon, not on Base, which this order accepts. It does not pay this "
                    "order; contact us about a refund.")
    assert not Transfer.objects.exists() and fresh(order).state == "payment_claimed"
    assert OperatorEvent.objects.filter(order=order, kind=OperatorEvent.Kind.WRONG_ASSET).count() == 1


def test_reorgs_on_two_networks_credit_nothing_twice(anvil_nets):
    nets = anvil_nets
    order = nets.place("base")
    strayed = nets.place("ethereum")
    snaps = {slug: evm.snapshot(nets.w3(slug)) for slug in ("base", "polygon")}
    paid = nets.send(order, order.quote.amount)
    stray = nets.send(strayed, strayed.quote.amount, on="polygon")
    # The signed transactions, as a node that saw them keeps them: after the reorganisation they are mined again.
    raw = {slug: nets.w3(slug).manager.request_blocking("eth_getRawTransactionByHash", [txid])
           for slug, txid in (("base", paid), ("polygon", stray))}
    nets.poll_all()
    first = Transfer.objects.get(order=order)
    first_stray = StrayTransfer.objects.get()
    assert first.confirmations == 1 and first_stray.txid == stray

    for slug, snap in snaps.items():  # both blocks replaced by empty ones
        evm.revert(nets.w3(slug), snap)
    nets.mine(2, on="base")
    nets.mine(2, on="polygon")
    reports = nets.poll_all()
    assert reports["base"].withdrawn == 1 and reports["polygon"].strays == 1
    first.refresh_from_db()
    assert first.withdrawn_at is not None and fresh(order).state == "awaiting_payment"
    assert StrayTransfer.objects.get().withdrawn_at is not None  # nothing arrived after all: not said to the customer
    with translation.override("en"):
        assert render_to_string("payments/includes/stray_transfers.html", {"order": fresh(strayed)}).strip() == ""

    # The same transactions mined again, higher up.
    again = {slug: nets.w3(slug).eth.send_raw_transaction(tx).to_0x_hex() for slug, tx in raw.items()}
    assert again == {"base": paid, "polygon": stray}
    nets.mine(CONFIRMATIONS)
    reports = nets.poll_all()
    assert all(r.ok for r in reports.values()), reports
    row = Transfer.objects.get(order=order)
    assert row.withdrawn_at is None and row.block_number > first.block_number
    assert fresh(order).state == "paid" and fresh(order).invoice.crypto_amount == order.quote.amount
    moved = StrayTransfer.objects.get()
    assert moved.pk == first_stray.pk and moved.block_number > first_stray.block_number
    assert moved.withdrawn_at is None  # back on chain, in its new block
    assert OperatorEvent.objects.filter(order=strayed, kind=OperatorEvent.Kind.WRONG_ASSET).count() == 1
    assert not Transfer.objects.filter(order=strayed).exists()


def test_a_node_on_the_wrong_chain_id_stops_its_own_network_only(anvil_nets, network_nodes):
    nets = anvil_nets
    Asset.objects.filter(code="usdt-base").update(watch_url=network_nodes["polygon"])  # Base pointed at Polygon
    base, polygon = nets.place("base"), nets.place("polygon")
    nets.send(base, base.quote.amount)
    nets.send(polygon, polygon.quote.amount)
    nets.mine(CONFIRMATIONS)
    watch_poll_all()  # the worker's sweep, through the configured URLs
    state = WatchState.objects.get(asset__code="usdt-base")
    assert state.errors_in_row == 1 and "chain id 137" in state.last_error and "8453" in state.last_error
    assert fresh(base).state == "awaiting_payment" and not Transfer.objects.filter(order=base).exists()
    assert fresh(polygon).state == "paid"
    assert WatchState.objects.get(asset__code="usdt-polygon").errors_in_row == 0
    assert WatchState.objects.get(asset__code="usdt-bsc").last_success_at is not None

    Asset.objects.filter(code="usdt-base").update(watch_url=network_nodes["base"])  # fixed by the operator
    watch_poll_all()
    assert fresh(base).state == "paid" and Transfer.objects.filter(order=base).count() == 1


class _TronNode:
    """Stands in for the TRON watcher (another part of the shop): TRON knows none of these ids."""

    network = "tron"
    calls = round_trips = 0

    def __init__(self):
        self.asked = []

    def lookup(self, txid, address):
        from anchorgpu.chains.base import LookupOutcome, TxLookup

        self.asked.append((txid, address))
        return TxLookup(LookupOutcome.NOT_FOUND, tip=100)


def _tron_asset() -> Asset:
    """USDT on TRON, with a deposit key derived from the public BIP39 test mnemonic ("abandon … about")."""
    from datetime import timedelta
    from decimal import Decimal

    from bip_utils import Bip39SeedGenerator, Bip44, Bip44Coins
    from django.utils import timezone

    from anchorgpu.payments.models import DepositKey, Rate

    seed = Bip39SeedGenerator("abandon " * 11 + "about").Generate()
    xpub = Bip44.FromSeed(seed, Bip44Coins.TRON).Purpose().Coin().Account(0).PublicKey().ToExtended()
    DepositKey.objects.update_or_create(scheme="tron", defaults=dict(extended_public_key=xpub, label="test"))
    # The demo has this asset too: every field the test relies on is pinned.
    asset, _ = Asset.objects.update_or_create(code="usdt-tron", defaults=dict(
        symbol="USDT", name="Tether USD", network="tron", network_name="TRON (TRC-20)", scheme="tron", decimals=6,
        quote_decimals=2, contract="TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t",  # USDT's TRC-20 contract
        confirmations_required=19, finality="finalized", position=1, watch_url="", is_active=True))
    Rate.objects.create(asset=asset, currency="USD", price=Decimal("1.00"),
                        observed_at=timezone.now() - timedelta(seconds=5), source="test figure",
                        entered_by="test")
    return asset


def test_a_polygon_hash_pasted_for_a_tron_quote_says_on_polygon(nets):
    from tests import shop

    _tron_asset()
    order = shop.place(nets.customer, asset="usdt-tron")
    assert order.quote.address.startswith("T")
    polygon_order = nets.place("polygon")
    txid = nets.send(polygon_order, polygon_order.quote.amount)  # a real Polygon USDT transfer, pasted on TRON
    order = payment_claim(order=order, actor=order.user.username, txid=txid)
    tron = _TronNode()
    check = claim_check(order=order, watcher=tron)
    assert tron.asked and tron.asked[0][0] == txid  # asked on TRON first
    assert (check.outcome, check.detail) == (O.WRONG_NETWORK, {"network": "Polygon"})
    with translation.override("en"):
        assert describe(check, order.quote.asset).startswith("This transaction is on Polygon, not on TRON (TRC-20)")
    assert not Transfer.objects.filter(order=order).exists()


def test_an_evm_hash_no_network_knows_stays_not_found_on_tron(nets):
    from tests import shop

    _tron_asset()
    order = shop.place(nets.customer, asset="usdt-tron")
    order = payment_claim(order=order, actor=order.user.username, txid="0x" + "5c" * 32)
    check = claim_check(order=order, watcher=_TronNode())
    assert check.outcome == O.NOT_FOUND and check.detail == {}


def test_a_stray_whose_block_is_replaced_before_it_is_final_is_withdrawn(anvil_nets):
    nets = anvil_nets
    order = nets.place("base")
    w3 = nets.w3("polygon")
    snap = evm.snapshot(w3)
    nets.send(order, order.quote.amount, on="polygon")
    nets.poll("polygon")
    stray = StrayTransfer.objects.get()
    evm.revert(w3, snap)  # replaced, and the transaction is never mined again
    nets.mine(1, on="polygon")
    assert nets.poll("polygon").strays == 1
    stray.refresh_from_db()
    assert stray.withdrawn_at is not None
    nets.mine(CONFIRMATIONS + 2, on="polygon")
    assert nets.poll("polygon").strays == 0  # final: no longer followed
    assert StrayTransfer.objects.count() == 1 and not Transfer.objects.exists()
    assert OperatorEvent.objects.filter(order=order, kind=OperatorEvent.Kind.WRONG_ASSET).count() == 1


def test_a_stray_is_followed_until_it_has_the_networks_confirmations(nets):
    from anchorgpu.payments.strays import strays_unsettled

    order = nets.place("base")
    nets.send(order, order.quote.amount, on="polygon")
    nets.poll("polygon")
    polygon, tip = nets.asset("polygon"), nets.w3("polygon").eth.block_number
    assert [s.txid for s in strays_unsettled(polygon, tip)] == [StrayTransfer.objects.get().txid]
    nets.mine(CONFIRMATIONS - 1, on="polygon")
    assert strays_unsettled(polygon, tip + CONFIRMATIONS - 2)  # one short
    assert not strays_unsettled(polygon, tip + CONFIRMATIONS - 1)  # final
    report = nets.poll("polygon")
    assert report.ok and report.strays == 0 and StrayTransfer.objects.get().withdrawn_at is None
