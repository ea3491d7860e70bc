"""A stand-in Esplora explorer for the Bitcoin watcher tests.

It speaks the handful of REST endpoints the watcher reads, from data held in
memory, on 127.0.0.1 at a port the system picks. Blocks are built here around
real recorded transactions (see ``fixtures/btc/scenario.json``): their headers
are synthetic, with the regtest target so that a nonce is found in a few tries.

Tests can make it misbehave: replace the answer to any path (an HTTP error,
garbage, tampered bytes, a slow reply), tamper with a stored block, or move the
best chain to another block at some height.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from anchorgpu.chains.bitcoin import (
    REGTEST_POW_LIMIT_BITS,
    bits_to_target,
    display_hex,
    internal_bytes,
    merkle_root,
    parse_transaction,
    sha256d,
)

FIXTURES = Path(__file__).parent / "fixtures" / "btc"


def load_fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def recorded_transactions() -> dict[str, dict]:
    """Every recorded transaction fixture, by txid."""
    found = {}
    for path in sorted(FIXTURES.glob("tx_*.json")):
        doc = json.loads(path.read_text())
        found[doc["txid"]] = doc
    return found


def mine_header(prev_hash: str, root: str, when: int, *, bits: int = REGTEST_POW_LIMIT_BITS,
                version: int = 0x20000000) -> bytes:
    """An 80-byte header whose hash meets ``bits`` (only sensible for easy targets)."""
    target = bits_to_target(bits)
    fixed = (version.to_bytes(4, "little") + internal_bytes(prev_hash) + internal_bytes(root)
             + when.to_bytes(4, "little") + bits.to_bytes(4, "little"))
    for nonce in range(1 << 32):
        header = fixed + nonce.to_bytes(4, "little")
        if int(display_hex(sha256d(header)), 16) <= target:
            return header
    raise RuntimeError("no nonce found")


def merkle_branch(txids: list[str], pos: int) -> list[str]:
    """The sibling hashes from ``txids[pos]`` up to the root, display order, as Esplora lists them."""
    level = [internal_bytes(t) for t in txids]
    branch = []
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        branch.append(display_hex(level[pos ^ 1]))
        level = [sha256d(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
        pos >>= 1
    return branch


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain"
    delay: float = 0.0


@dataclass
class Block:
    height: int
    hash: str
    time: int
    header: bytes
    txids: list[str]
    raw: bytes


class FakeEsplora:
    def __init__(self, *, genesis_hash: str):
        self.genesis_hash = genesis_hash
        self.best: dict[int, str] = {0: genesis_hash}  # height -> block hash on the best chain
        self.blocks: dict[str, Block] = {}
        self.transactions: dict[str, str] = {}  # txid -> hex
        self.confirmed_in: dict[str, str] = {}  # txid -> block hash, as recorded when the block was added
        self.overrides: dict[str, Reply] = {}  # path -> canned answer
        self.paths: list[str] = []  # every path asked for, in order
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- building the chain ---------------------------------------------------------------------------------

    @property
    def tip(self) -> int:
        return max(self.best)

    def add_block(self, tx_hexes: list[str], *, height: int, prev_hash: str, when: int) -> Block:
        """Mine a synthetic block holding the given real transactions and put it on the best chain."""
        parsed = [parse_transaction(h) for h in tx_hexes]
        txids = [tx.txid for tx in parsed]
        header = mine_header(prev_hash, merkle_root(txids), when)
        count = len(tx_hexes).to_bytes(1, "little")  # fewer than 253 transactions: a one-byte count
        raw = header + count + b"".join(bytes.fromhex(h) for h in tx_hexes)
        block = Block(height, display_hex(sha256d(header)), when, header, txids, raw)
        self.blocks[block.hash] = block
        self.best[height] = block.hash
        for txid, tx_hex in zip(txids, tx_hexes, strict=True):
            self.transactions[txid] = tx_hex
            self.confirmed_in[txid] = block.hash
        return block

    def add_mempool(self, tx_hex: str) -> str:
        txid = parse_transaction(tx_hex).txid
        self.transactions[txid] = tx_hex
        self.confirmed_in.pop(txid, None)
        return txid

    def override(self, path: str, *, status: int = 200, body: bytes | str = b"", content_type: str = "text/plain",
                 delay: float = 0.0) -> None:
        self.overrides[path] = Reply(status, body.encode() if isinstance(body, str) else body, content_type, delay)

    # --- answering ------------------------------------------------------------------------------------------

    def answer(self, path: str) -> Reply:
        self.paths.append(path)
        if path in self.overrides:
            return self.overrides[path]
        parts = path.strip("/").split("/")
        if parts == ["blocks", "tip", "height"]:
            return Reply(body=str(self.tip).encode())
        if parts == ["blocks", "tip", "hash"]:
            return Reply(body=self.best[self.tip].encode())
        if len(parts) == 2 and parts[0] == "block-height" and parts[1].isdigit():
            block_hash = self.best.get(int(parts[1]))
            return Reply(body=block_hash.encode()) if block_hash else Reply(404, b"Block not found")
        if len(parts) == 3 and parts[0] == "block" and parts[1] in self.blocks:
            block = self.blocks[parts[1]]
            if parts[2] == "header":
                return Reply(body=block.header.hex().encode())
            if parts[2] == "raw":
                return Reply(body=block.raw, content_type="application/octet-stream")
        if len(parts) == 3 and parts[0] == "tx" and parts[1] in self.transactions:
            return self._tx_answer(parts[1], parts[2])
        if len(parts) == 3 and parts[0] == "tx":
            return Reply(404, b"Transaction not found")
        return Reply(404, b"Not found")

    def _tx_answer(self, txid: str, what: str) -> Reply:
        block = self.blocks.get(self.confirmed_in.get(txid, ""))
        if what == "hex":
            return Reply(body=self.transactions[txid].encode())
        if what == "status":
            status = {"confirmed": False}
            if block:
                status = {"confirmed": True, "block_height": block.height, "block_hash": block.hash,
                          "block_time": block.time}
            return Reply(body=json.dumps(status).encode(), content_type="application/json")
        if what == "merkle-proof" and block:
            pos = block.txids.index(txid)
            proof = {"block_height": block.height, "merkle": merkle_branch(block.txids, pos), "pos": pos}
            return Reply(body=json.dumps(proof).encode(), content_type="application/json")
        return Reply(404, b"Transaction not found")

    # --- the HTTP server ------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeEsplora:
        explorer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the name http.server calls
                reply = explorer.answer(self.path)
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:
                    pass  # the client gave up waiting (timeout tests)

            def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-esplora", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None


def build_scenario() -> tuple[FakeEsplora, list[Block], dict[str, dict]]:
    """The explorer of ``scenario.json``, not yet started: its blocks and the transaction fixtures."""
    scenario = load_fixture("scenario.json")
    recorded = recorded_transactions()
    explorer = FakeEsplora(genesis_hash=scenario["genesis_hash"])
    prev, when, blocks = scenario["first_prev_hash"], scenario["first_time"], []
    for offset, txids in enumerate(scenario["blocks"]):
        block = explorer.add_block([recorded[t]["hex"] for t in txids], height=scenario["first_height"] + offset,
                                   prev_hash=prev, when=when)
        blocks.append(block)
        prev, when = block.hash, when + scenario["seconds_between_blocks"]
    for txid in scenario["mempool"]:
        explorer.add_mempool(recorded[txid]["hex"])
    return explorer, blocks, recorded


def closed_port_url() -> str:
    """The URL of a local port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
