"""Assets that wait for the node's "safe" or "finalized" block: confirmations count from the tagged block, so a
transfer above it has none however deep it is; once the tag passes it, it counts; a reorganisation above the
tag withdraws it; a node without such a block stops the poll and decides nothing.

What the test chains answer for the tags (seen on anvil 1.7.1 and eth-tester 0.14.0b1):
* anvil has no consensus layer; it names "safe" the block ``--slots-in-an-epoch`` (default 32) below the tip and
  "finalized" the one twice as far down (both at least the genesis block);
* eth-tester answers its latest block for both tags, so there an asset with a tag counts from the tip.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from anchorgpu.chains.evm import EvmWatcher
from anchorgpu.payments.claim_check import claim_check
from anchorgpu.payments.models import Asset, ClaimCheck, Transfer, WatchState
from anchorgpu.payments.services import payment_claim
from anchorgpu.payments.watch import watch_poll
from tests.chains import evm_support as evm
from tests.chains.watch_support import ChainShop, fresh

pytestmark = pytest.mark.django_db
LAG = {"safe": 32, "finalized": 64}  # anvil's default: 32 slots in an epoch


def _tagged(code: str, finality: str, confirmations: int = 1) -> None:
    Asset.objects.filter(code=code).update(finality=finality, confirmations_required=confirmations)


@pytest.fixture
def chain(anvil_w3, anvil_url):
    return ChainShop(anvil_w3, url=anvil_url)


@pytest.mark.parametrize("finality", ["safe", "finalized"])
def test_anvil_tags_the_block_an_epoch_or_two_below_the_tip(anvil_w3, finality):
    evm.mine(anvil_w3, 100)
    watcher = EvmWatcher.for_web3(anvil_w3, chain_id=anvil_w3.eth.chain_id, finality=finality)
    head = watcher.head()
    assert head.number == anvil_w3.eth.block_number
    assert watcher.counted_tip(head) == head.number - LAG[finality]
    assert watcher.counted_tip(head) == anvil_w3.eth.get_block(finality)["number"]


def test_eth_tester_tags_its_latest_block(tester_w3):
    evm.mine(tester_w3, 10)
    for finality in ("safe", "finalized"):
        watcher = EvmWatcher.for_web3(tester_w3, chain_id=tester_w3.eth.chain_id, finality=finality)
        head = watcher.head()
        assert watcher.counted_tip(head) == head.number == tester_w3.eth.block_number


@pytest.mark.parametrize("finality", ["safe", "finalized"])
@pytest.mark.parametrize("code", ["eth", "usdc-ethereum"])
def test_a_transfer_counts_once_the_tagged_block_reaches_it(chain, code, finality):
    _tagged(code, finality)
    order = chain.place(code)
    assert order.quote.confirmations_required == 1
    txid = chain.send(order, order.quote.amount)
    chain.mine(LAG[finality] - 1)  # LAG blocks deep counting its own: one short of the tag
    report = chain.poll(code)
    assert report.ok and report.found == 1
    row = Transfer.objects.get(order=order)
    assert row.txid == txid and row.confirmations == 0  # above the tagged block: none at all
    assert fresh(order).state == "awaiting_payment"

    claimed = payment_claim(order=fresh(order), actor=order.user.username, txid=txid)
    check = claim_check(order=claimed, watcher=chain.watcher(chain.asset(code)))
    assert (check.outcome, check.confirmations) == (ClaimCheck.Outcome.FOUND, 0)  # a pasted id counts the same way

    chain.mine(1)  # the tag reaches its block
    chain.poll(code)
    row.refresh_from_db()
    assert row.confirmations == 1 and fresh(order).state == "paid"
    assert Transfer.objects.count() == 1


def test_confirmations_beyond_the_tag_count_from_the_tagged_block(chain):
    _tagged("usdc-ethereum", "safe", confirmations=3)
    order = chain.place("usdc-ethereum")
    chain.send(order, order.quote.amount)
    chain.mine(LAG["safe"] + 1)  # the tag passed it by one block: 2 of 3
    chain.poll("usdc-ethereum")
    assert Transfer.objects.get(order=order).confirmations == 2 and fresh(order).state == "awaiting_payment"
    chain.mine(1)
    chain.poll("usdc-ethereum")
    assert Transfer.objects.get(order=order).confirmations == 3 and fresh(order).state == "paid"


def test_a_reorganisation_above_the_tag_withdraws_the_transfer(chain, anvil_w3):
    _tagged("usdc-ethereum", "finalized")
    order = chain.place("usdc-ethereum")
    snap = evm.snapshot(anvil_w3)
    chain.send(order, order.quote.amount)
    chain.mine(40)  # 41 deep: final for a 12-confirmation rule, not for "finalized" (64 below the tip)
    chain.poll("usdc-ethereum")
    row = Transfer.objects.get(order=order)
    assert row.confirmations == 0

    evm.revert(anvil_w3, snap)  # 41 blocks replaced
    chain.mine(45)
    report = chain.poll("usdc-ethereum")
    assert report.ok and report.withdrawn == 1
    row.refresh_from_db()
    assert row.withdrawn_at is not None and fresh(order).state == "awaiting_payment"
    chain.mine(LAG["finalized"])
    chain.poll("usdc-ethereum")
    assert fresh(order).state == "awaiting_payment" and Transfer.objects.count() == 1


def test_a_payment_mined_into_a_replacement_block_deep_above_the_tag_is_found(chain, anvil_w3):
    """The blocks remembered by hash reach down to the tagged block, not only ``RECENT_BLOCKS`` deep."""
    _tagged("usdc-ethereum", "safe")
    order = chain.place("usdc-ethereum")
    snap = evm.snapshot(anvil_w3)
    chain.mine(20)
    chain.poll("usdc-ethereum")  # reads 20 empty blocks
    evm.revert(anvil_w3, snap)
    chain.send(order, order.quote.amount)  # a replacement block 20 below the tip now holds the payment
    chain.mine(19)
    report = chain.poll("usdc-ethereum")
    assert report.ok and report.found == 1
    chain.mine(LAG["safe"])
    chain.poll("usdc-ethereum")
    assert fresh(order).state == "paid"


def test_on_eth_tester_a_tagged_asset_counts_from_the_tip(tester_w3):
    chain = ChainShop(tester_w3)
    _tagged("usdc-ethereum", "safe", confirmations=2)
    order = chain.place("usdc-ethereum")
    chain.send(order, order.quote.amount)
    chain.mine(1)
    chain.poll("usdc-ethereum")
    assert Transfer.objects.get(order=order).confirmations == 2 and fresh(order).state == "paid"


class _NoTagNode:
    """Forwards JSON-RPC to a real node, but knows no "safe"/"finalized" block: answers ``null`` (mode "null")
    or the error an execution client without the tag gives (mode "error")."""

    def __init__(self, upstream: str, mode: str):
        self.upstream, self.mode = upstream, mode
        self._server = None

    def _answer(self, call: dict) -> dict:
        params = call.get("params") or []
        if call.get("method") == "eth_getBlockByNumber" and params and params[0] in ("safe", "finalized"):
            if self.mode == "null":
                return {"jsonrpc": "2.0", "id": call.get("id"), "result": None}
            return {"jsonrpc": "2.0", "id": call.get("id"),
                    "error": {"code": -32602, "message": f"invalid block tag {params[0]}"}}
        request = urllib.request.Request(self.upstream, data=json.dumps(call).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())

    def start(self) -> str:
        node = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                answer = [node._answer(c) for c in body] if isinstance(body, list) else node._answer(body)
                payload = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format, *args):  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.mark.parametrize("mode", ["null", "error"])
def test_a_node_without_the_tagged_block_fails_the_poll_and_decides_nothing(chain, anvil_url, mode):
    node = _NoTagNode(anvil_url, mode)
    url = node.start()
    try:
        _tagged("usdc-ethereum", "safe")
        Asset.objects.filter(code="usdc-ethereum").update(watch_url=url)
        order = chain.place("usdc-ethereum")
        chain.send(order, order.quote.amount)
        chain.mine(LAG["safe"] + 5)
        report = watch_poll(chain.asset("usdc-ethereum"))
        assert not report.ok
        assert ("reports no 'safe' block" if mode == "null" else "invalid block tag safe") in report.error
        state = WatchState.objects.get(asset__code="usdc-ethereum")
        assert state.errors_in_row == 1 and state.next_block is None and state.tip is None
        assert not Transfer.objects.exists() and fresh(order).state == "awaiting_payment"

        claimed = payment_claim(order=fresh(order), actor=order.user.username, txid=chain.send(order, 1))
        check = claim_check(order=claimed)  # through the same node
        assert check.outcome == ClaimCheck.Outcome.UNAVAILABLE and not Transfer.objects.exists()
    finally:
        node.stop()
