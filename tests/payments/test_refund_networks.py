"""Refunds on a network the customer chooses (issue 26, item 4): the same coin as the payment, on any network the
shop has for it; the amount in that network's base units (decimals differ: 18 for USDC on BNB Chain, 6 elsewhere),
counted against the order in the quote's; the address checked for that network's scheme; the refund checked on
that network's chain and recorded with it."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from anchorgpu.audit.models import AuditEntry
from anchorgpu.chains.base import BlockRef, LookupOutcome, SeenTransfer, TxLookup
from anchorgpu.chains.tron_address import to_base58
from anchorgpu.orders.errors import InvalidOrder, NotAllowedNow
from anchorgpu.orders.models import Order
from anchorgpu.payments import refunds as refunds_module
from anchorgpu.payments.models import Asset, Refund
from anchorgpu.payments.refund_networks import refund_networks
from anchorgpu.payments.refund_units import from_quote_units, to_quote_units
from anchorgpu.payments.refunds import RefundInput, refund_record
from anchorgpu.payments.services import owed_back, refund_address_set
from anchorgpu.web.timeline import for_order
from tests import shop

pytestmark = pytest.mark.django_db

ADDRESS = "0x" + "5a" * 20  # the customer's EVM address (lower case: no checksum to get wrong)
OTHER_ADDRESS = "0x" + "6b" * 20
TRON_ADDRESS = to_base58("41" + "7c" * 20)  # a well-formed T… address
EXCESS = 2_500_000  # 2.5 USDC in the quote's (Ethereum's, 6 decimal places) base units
WEI_PER_MICRO = 10**12  # USDC on BNB Chain has 18 decimal places: 10**12 of its base units per Ethereum one


def _asset(code, symbol, network, network_name, chain_id, decimals, contract):
    asset, _ = Asset.objects.update_or_create(code=code, defaults=dict(
        symbol=symbol, name=symbol, network=network, network_name=network_name, scheme="evm", chain_id=chain_id,
        decimals=decimals, quote_decimals=2, contract=contract, confirmations_required=3, finality="depth",
        position=10, is_active=True, watch_url=""))
    return asset


@pytest.fixture
def networks():
    shop.load_shop()
    # The demo offers USDC and USDT on more networks: these tests offer the three below beside the quote's.
    Asset.objects.exclude(code__in=["btc", "eth", "usdc-ethereum"]).update(is_active=False)
    # Contracts as the networks' explorers list them (BscScan: Binance-Peg USD Coin, 18 decimals; PolygonScan:
    # native USDC and USDT0, 6 decimals). Nothing here is read from a chain; they only have to be well formed.
    return {
        "bsc": _asset("usdc-bsc", "USDC", "bsc", "BNB Chain (BEP-20)", 56, 18,
                      "0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d"),
        "polygon": _asset("usdc-polygon", "USDC", "polygon", "Polygon PoS", 137, 6,
                          "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"),
        "usdt": _asset("usdt-polygon", "USDT", "polygon", "Polygon PoS", 137, 6,
                       "0xc2132D05D31c914a87C6611C10748AEb04B58e8F"),
    }


@pytest.fixture
def order(networks):
    """A paid USDC-on-Ethereum order that received 2.5 USDC more than quoted: that excess is owed back."""
    store = shop.customer()
    placed = shop.place(store, asset="usdc-ethereum")
    shop.pay(placed, amount=placed.quote.amount + EXCESS, confirmations=12)
    placed = fresh(placed)
    assert placed.state == "paid" and owed_back(placed) == EXCESS
    return placed


def fresh(order) -> Order:
    return Order.objects.select_related("quote__asset", "refund_asset").get(pk=order.pk)


def refund(order, **changes) -> Refund:
    fields = dict(address=ADDRESS, amount=EXCESS, rate_choice="quote", txid="0x" + "cd" * 32,
                  reason="excess paid back", whole_order=False)
    fields.update(changes)
    return refund_record(order=order, actor="operator", refund=RefundInput(**fields))


def test_the_units_of_one_coin_on_two_networks():
    assert to_quote_units(2_500_000 * WEI_PER_MICRO, sent_decimals=18, quote_decimals=6) == 2_500_000
    # A fraction of the quote's smallest unit counts as a whole one: never less given back than was sent.
    assert to_quote_units(2_500_000 * WEI_PER_MICRO + 1, sent_decimals=18, quote_decimals=6) == 2_500_001
    assert to_quote_units(7, sent_decimals=6, quote_decimals=18) == 7 * WEI_PER_MICRO
    assert from_quote_units(2_500_001, quote_decimals=6, sent_decimals=18) == 2_500_001 * WEI_PER_MICRO
    assert from_quote_units(7 * WEI_PER_MICRO + 5, quote_decimals=18, sent_decimals=6) == 7


def test_the_networks_offered_are_the_same_coins_with_the_quotes_first(order, networks):
    offered = [a.code for a in refund_networks(order.quote)]
    assert offered == ["usdc-ethereum", "usdc-bsc", "usdc-polygon"]  # not USDT, not ether
    networks["polygon"].is_active = False
    networks["polygon"].save()
    assert [a.code for a in refund_networks(order.quote)] == ["usdc-ethereum", "usdc-bsc"]


def test_a_refund_on_the_quotes_network(order):
    refund_address_set(order=order, actor="alice", address=ADDRESS)
    assert fresh(order).refund_asset is None  # null: the quote's network
    row = refund(order)
    assert row.asset == order.quote.asset and row.amount == EXCESS and row.fiat_amount == Decimal("2.50")
    assert owed_back(fresh(order)) == 0


def test_a_refund_on_a_network_with_more_decimal_places_is_counted_to_the_base_unit(order, networks):
    bsc = networks["bsc"]
    refund_address_set(order=order, actor="alice", address=ADDRESS, asset=bsc)
    assert fresh(order).refund_asset == bsc
    # One base unit of BNB Chain beyond what is owed: refused, and the limit is told in BNB Chain's units.
    with pytest.raises(InvalidOrder, match=f"Only {EXCESS * WEI_PER_MICRO} base units are owed back"):
        refund(fresh(order), amount=EXCESS * WEI_PER_MICRO + 1, asset=bsc)
    row = refund(fresh(order), amount=1_000_000 * WEI_PER_MICRO + 1, asset=bsc)  # 1 USDC and one base unit
    assert row.asset == bsc and row.fiat_amount == Decimal("1.00")
    assert owed_back(fresh(order)) == EXCESS - 1_000_001  # the fraction counted as a whole quote unit
    rest = (EXCESS - 1_000_001) * WEI_PER_MICRO
    second = refund(fresh(order), amount=rest, asset=bsc, txid="0x" + "ce" * 32)
    assert second.fiat_amount == Decimal("1.50") and owed_back(fresh(order)) == 0
    entry = AuditEntry.objects.filter(object_id=str(order.pk), action="refund_record").latest("pk")
    assert entry.data["asset"] == "usdc-bsc" and entry.data["network"] == "BNB Chain (BEP-20)"
    texts = [e.text for e in for_order(fresh(order))]
    assert any("Refund sent: 1.499999 USDC on BNB Chain (BEP-20)" in t for t in texts), texts


def test_a_refund_on_a_network_with_the_same_decimals(order, networks):
    polygon = networks["polygon"]
    refund_address_set(order=order, actor="alice", address=ADDRESS, asset=polygon)
    row = refund(fresh(order), asset="usdc-polygon")  # by code, as the API would give it
    assert row.asset == polygon and owed_back(fresh(order)) == 0


def test_another_coin_is_refused(order, networks):
    with pytest.raises(InvalidOrder, match="coin that was paid, USDC; USDT is another coin") as caught:
        refund_address_set(order=order, actor="alice", address=ADDRESS, asset=networks["usdt"])
    assert caught.value.code == "other_coin"
    refund_address_set(order=order, actor="alice", address=ADDRESS)
    with pytest.raises(InvalidOrder) as caught:
        refund(fresh(order), asset=networks["usdt"], customer_request="e-mail of 2 Dec")
    assert caught.value.code == "other_coin" and not Refund.objects.exists()


def test_a_tron_address_for_an_evm_network_is_refused(order, networks):
    with pytest.raises(InvalidOrder) as caught:
        refund_address_set(order=order, actor="alice", address=TRON_ADDRESS, asset=networks["polygon"])
    assert caught.value.code == "bad_address" and fresh(order).refund_address == ""
    with pytest.raises(InvalidOrder) as caught:
        refund(order, address=TRON_ADDRESS, asset=networks["polygon"], customer_request="e-mail of 2 Dec")
    assert caught.value.code == "bad_address" and not Refund.objects.exists()


def test_the_customers_address_is_theirs_only_on_the_network_they_chose(order, networks):
    refund_address_set(order=order, actor="alice", address=ADDRESS, asset=networks["polygon"])
    with pytest.raises(InvalidOrder, match="gave that address for Polygon PoS") as caught:
        refund(fresh(order))  # the quote's network, Ethereum: not what the customer asked for
    assert caught.value.code == "bad_network"
    row = refund(fresh(order), customer_request="e-mail of 2 Dec: Ethereum is fine too")
    assert row.asset == order.quote.asset and row.customer_request.startswith("e-mail")


def test_a_transaction_id_is_recorded_once_per_network(order, networks):
    polygon = networks["polygon"]
    refund_address_set(order=order, actor="alice", address=ADDRESS, asset=polygon)
    refund(fresh(order), amount=1_000_000, asset=polygon)
    with pytest.raises(NotAllowedNow, match="already recorded"):
        refund(fresh(order), amount=1_000_000, asset=polygon)
    assert Refund.objects.filter(asset=polygon).count() == 1 and owed_back(fresh(order)) == EXCESS - 1_000_000


def test_the_refund_is_checked_with_the_watcher_of_its_own_network(order, networks, monkeypatch):
    bsc = networks["bsc"]
    bsc.watch_url = "http://127.0.0.1:9/"  # watched (nothing listens there: the watcher below answers instead)
    bsc.save()
    asked = []

    class Stub:
        def lookup(self, txid, address):
            asked.append((txid, address))
            block = BlockRef(number=100, hash="0x" + "ab" * 32)
            return TxLookup(outcome=LookupOutcome.FOUND, tip=110, transfers=(
                SeenTransfer(txid=txid, index=0, to=ADDRESS, amount=EXCESS * WEI_PER_MICRO, block=block),))

    def watcher_for(asset, **kwargs):
        asked.append(asset.code)
        return Stub()

    monkeypatch.setattr(refunds_module, "watcher_for", watcher_for)
    refund_address_set(order=order, actor="alice", address=ADDRESS, asset=bsc)
    row = refund(fresh(order), amount=EXCESS * WEI_PER_MICRO, asset=bsc)
    assert asked[0] == "usdc-bsc" and row.verified_at is not None
    assert row.verification["status"] == "verified" and row.verification["paid"] == str(EXCESS * WEI_PER_MICRO)


def test_the_order_page_asks_for_the_network_and_names_it(client, order, networks):
    client.force_login(order.user)
    url = reverse("order_refund_address", args=[order.reference])
    response = client.post(url, {"network": "usdt-polygon", "address": ADDRESS})
    assert response.status_code == 400 and not fresh(order).refund_address
    response = client.post(url, {"network": "usdc-polygon", "address": TRON_ADDRESS})
    assert response.status_code == 400 and not fresh(order).refund_address
    response = client.post(url, {"network": "usdc-polygon", "address": ADDRESS})
    assert response.status_code == 302 and fresh(order).refund_asset == networks["polygon"]
    page = client.get(reverse("order", args=[order.reference])).content.decode()
    assert "as USDC on Polygon PoS" in page and ADDRESS in page.lower()
    section = page[page.index('class="refund"'):page.index("</section>", page.index('class="refund"'))]
    assert 'value="usdc-bsc"' in section and 'value="usdt-polygon"' not in section


def test_the_operators_refund_form_asks_for_the_network(admin_client, order, networks):
    refund_address_set(order=order, actor="alice", address=ADDRESS, asset=networks["bsc"])
    url = reverse("admin:orders_order_record_refund", args=[order.pk])
    page = admin_client.get(url).content.decode()
    # Preset: the customer's network, and what is owed back in its base units.
    assert 'value="usdc-bsc" selected' in page and f'value="{EXCESS * WEI_PER_MICRO}"' in page
    data = {"scope": "excess", "network": "usdc-bsc", "address": ADDRESS, "amount": str(EXCESS * WEI_PER_MICRO),
            "network_fee": "0", "rate_choice": "quote", "txid": "0x" + "cd" * 32, "reason": "excess paid back"}
    response = admin_client.post(url, {**data, "network": "usdt-polygon"})
    assert response.status_code == 200 and not Refund.objects.exists()
    response = admin_client.post(url, data)
    assert response.status_code == 302
    row = Refund.objects.get()
    assert row.asset == networks["bsc"] and row.amount == EXCESS * WEI_PER_MICRO and row.fiat_amount == Decimal("2.50")
    assert owed_back(fresh(order)) == 0


def test_the_email_and_the_credit_note_name_the_network(order, networks, monkeypatch):
    from io import BytesIO

    from pypdf import PdfReader

    from anchorgpu.billing.pdf import credit_note_pdf
    from anchorgpu.orders import notify
    from anchorgpu.orders.models import OrderEmail

    bsc = networks["bsc"]
    bsc.watch_url = "http://127.0.0.1:9/"
    bsc.save()
    whole = order.quote.amount + EXCESS  # all that was received, in the quote's units
    sent = whole * WEI_PER_MICRO

    class Stub:
        def lookup(self, txid, address):
            block = BlockRef(number=100, hash="0x" + "ab" * 32)
            return TxLookup(outcome=LookupOutcome.FOUND, tip=110, transfers=(
                SeenTransfer(txid=txid, index=0, to=ADDRESS, amount=sent, block=block),))

    monkeypatch.setattr(refunds_module, "watcher_for", lambda asset, **kwargs: Stub())
    refund_address_set(order=order, actor="alice", address=ADDRESS, asset=bsc)
    row = refund(fresh(order), amount=sent, asset=bsc, whole_order=True, customer_reason="refund")
    assert row.verified_at is not None and fresh(order).state == "refunded" and owed_back(fresh(order)) == 0
    [email] = OrderEmail.objects.filter(order=order, kind="refund_sent")
    body = notify._message(email)[1]
    coins = f"{whole // 1_000_000}.{whole % 1_000_000:06d}".rstrip("0").rstrip(".")
    assert f"{coins} USDC on BNB Chain (BEP-20)" in body, body
    note = fresh(order).invoice.credit_notes.get(refund=row)
    text = " ".join(page.extract_text() for page in PdfReader(BytesIO(credit_note_pdf(note))).pages)
    assert "BNB Chain (BEP-20)" in text and f"{coins} USDC" in text, text
