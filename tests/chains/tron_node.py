"""A local JSON-RPC server that answers in java-tron's shapes, over an in-memory chain the test drives.

Not a TRON node: no transactions are executed, nothing is signed. It holds blocks of TRC-20 ``Transfer``
logs the test adds, a solidified height the test sets, and reorganisations the test makes above it, and
answers the methods the TRON watcher uses with the field names, hex forms, tags, limits and error objects
that java-tron's documentation shows. Every shape comes from
tronprotocol/documentation-en, docs/api/json-rpc/ at commit 8f3209ef53d7 (the example responses are kept in
``fixtures/tron/*.json`` with their page named, and ``test_tron_watcher`` checks that this server's answers have
exactly their fields):

* block ids begin with the block number's 8 bytes (eth_getBlockByNumber.md);
* tags: ``latest``, ``earliest``, ``finalized`` (the solidified block); ``pending`` and ``safe`` get
  ``-32602 TAG … not supported`` (index.md, eth_getBlockByNumber.md);
* eth_getLogs: 5,000 blocks, 1,000 addresses, 1,000 alternatives per topic, 4 topics at most, with the
  documented messages (filter/eth_getLogs.md); ``removed`` false (stored blocks only);
* receipts: energy in ``gasUsed``, ``status`` 0x1/0x0, ``type`` 0x0 (eth_getTransactionReceipt.md);
* transaction hashes accepted with or without ``0x`` (``(0x)?[0-9a-fA-F]{64}``), written with it;
* eth_call: the ``latest`` tag only (smart-contract/eth_call.md, index.md);
* batches: answered in order up to ``maxBatchSize`` (100); a larger one is refused whole with ``-32005``
  (index.md error catalog); errors travel with HTTP 200 (index.md, "HTTP status code").
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from anchorgpu.chains.evm import TRANSFER_TOPIC
from anchorgpu.chains.tron import MAINNET_CHAIN_ID

FIXTURES = Path(__file__).parent / "fixtures" / "tron"
_SPEC = json.loads((FIXTURES / "errors.json").read_text())
LIMITS = _SPEC["limits"]
ERRORS = _SPEC["errors"]
_HASH = re.compile(r"(0x)?[0-9a-fA-F]{64}")
_ZERO_BLOOM = "0x" + "00" * 256
DECIMALS_CALL = "0x313ce567"


class RpcError(Exception):
    def __init__(self, key: str, **values):
        spec = ERRORS[key]
        self.code = spec["code"]
        self.message = spec["message"].format(**values)
        super().__init__(self.message)


def _pad(address: str) -> str:
    return "0x" + "0" * 24 + address[2:]


@dataclass
class Tx:
    """A TRC-20 transfer (``TriggerSmartContract`` calling ``transfer``), or several Transfer logs of one call."""

    txid: str  # 0x + 64 hex
    sender: str  # 0x-hex20
    contract: str  # 0x-hex20, the contract called
    logs: list[tuple[str, list[str], str]]  # (emitting contract, topics, data)
    status: int = 1


@dataclass
class Block:
    number: int
    hash: str
    parent: str
    timestamp: int
    txs: list[Tx] = field(default_factory=list)


class TronChain:
    """Blocks, a solidified height and the contracts' decimals. All changes go through one lock."""

    def __init__(self, chain_id: int = MAINNET_CHAIN_ID):
        self.chain_id = chain_id
        self.lock = threading.Lock()
        self.decimals: dict[str, int] = {}
        self.blocks: list[Block] = []
        self.solidified = 0
        self._salt = 0
        self._txs = 0
        self._mine([])  # genesis

    # --- what the test does --------------------------------------------------

    def deploy(self, contract: str, decimals: int) -> None:
        self.decimals[contract.lower()] = decimals

    def transfer(self, contract: str, sender: str, to: str, amount: int, *, status: int = 1,
                 emitter: str | None = None) -> Tx:
        """A transaction calling ``contract`` that logs one Transfer of ``amount`` (by ``emitter``, default the
        contract itself). Not in a block until ``mine`` takes it."""
        self._txs += 1
        txid = "0x" + hashlib.sha256(f"tx{self._txs}{contract}{to}{amount}".encode()).hexdigest()
        logs = [] if status != 1 else [((emitter or contract).lower(),
                                         [TRANSFER_TOPIC, _pad(sender.lower()), _pad(to.lower())],
                                         "0x" + f"{amount:064x}")]
        return Tx(txid=txid, sender=sender.lower(), contract=contract.lower(), logs=logs, status=status)

    def mine(self, *txs: Tx) -> Block:
        with self.lock:
            return self._mine(list(txs))

    def mine_empty(self, n: int) -> None:
        with self.lock:
            for _ in range(n):
                self._mine([])

    def solidify(self, height: int | None = None) -> None:
        with self.lock:
            self.solidified = self.tip if height is None else min(height, self.tip)

    def reorg(self, height: int) -> list[Tx]:
        """Drop the blocks from ``height`` up (all above the solidified block, as on TRON) and return their
        transactions, which the test may mine again (a TRON txid is the hash of the raw transaction: the same
        transaction mined elsewhere keeps it)."""
        with self.lock:
            if height <= self.solidified:
                raise ValueError(f"block {height} is solidified: TRON does not reorganise it")
            dropped = [tx for b in self.blocks[height:] for tx in b.txs]
            del self.blocks[height:]
            return dropped

    @property
    def tip(self) -> int:
        return len(self.blocks) - 1

    def _mine(self, txs: list[Tx]) -> Block:
        number = len(self.blocks)
        parent = self.blocks[-1].hash if self.blocks else "0x" + "00" * 32
        self._salt += 1
        digest = hashlib.sha256(f"{parent}{self._salt}{[t.txid for t in txs]}".encode()).hexdigest()
        block = Block(number=number, hash="0x" + f"{number:016x}" + digest[:48], parent=parent,
                      timestamp=int(time.time()), txs=txs)
        self.blocks.append(block)
        return block

    # --- reads ---------------------------------------------------------------

    def find(self, txid: str) -> tuple[Block, int, Tx] | None:
        for block in self.blocks:
            for position, tx in enumerate(block.txs):
                if tx.txid == txid:
                    return block, position, tx
        return None


class TronRpc:
    """The method table, on one chain."""

    def __init__(self, chain: TronChain):
        self.chain = chain
        self.methods_seen: list[str] = []
        self.batches: list[int] = []  # the size of each batch received
        # Transactions whose receipt this node does not have yet (a lagging backend behind a load balancer
        # that another backend's eth_getLogs answer ran ahead of): answered null, as for an unknown id.
        self.lagging_receipts: set[str] = set()

    def answer(self, request) -> dict:
        rid = request.get("id") if isinstance(request, dict) else None
        if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" or "method" not in request:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32600, "message": "Invalid Request"}}
        method, params = request["method"], request.get("params") or []
        self.methods_seen.append(method)
        handler = getattr(self, "m_" + method, None)
        if handler is None:
            err = ERRORS["method_not_found"]
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": err["code"], "message": err["message"]}}
        try:
            with self.chain.lock:
                result = handler(*params)
        except RpcError as exc:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": exc.code, "message": exc.message, "data": "{}"}}
        except TypeError:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "Invalid params"}}
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    # --- helpers ----------------------------------------------------------

    def _height(self, tag) -> int:
        if tag in ("pending", "safe"):
            raise RpcError("tag_" + tag)
        if tag == "latest":
            return self.chain.tip
        if tag == "earliest":
            return 0
        if tag == "finalized":
            return self.chain.solidified
        if isinstance(tag, str) and re.fullmatch(r"0x[0-9a-fA-F]+", tag):
            return int(tag, 16)
        if isinstance(tag, str) and tag.isdigit():  # JsonRpcApiUtil.parseBlockNumber takes decimal too
            return int(tag)
        raise RpcError("invalid_block_number")

    def _txid(self, value) -> str:
        if not isinstance(value, str) or not _HASH.fullmatch(value):
            raise RpcError("invalid_hash")
        return "0x" + value[-64:].lower()

    def _log(self, block: Block, position: int, tx: Tx, log_index: int, log) -> dict:
        emitter, topics, data = log
        return {"address": emitter, "blockHash": block.hash, "blockNumber": hex(block.number),
                "blockTimestamp": hex(block.timestamp), "transactionHash": tx.txid,
                "transactionIndex": hex(position), "logIndex": hex(log_index), "removed": False,
                "topics": list(topics), "data": data}

    def _logs_of(self, block: Block):
        index = 0
        for position, tx in enumerate(block.txs):
            for log in tx.logs:
                yield position, tx, index, log
                index += 1

    def _input(self, tx: Tx) -> str:
        if not tx.logs:
            return "0xa9059cbb"
        _emitter, topics, data = tx.logs[0]
        return "0xa9059cbb" + topics[2][2:] + data[2:]

    # --- methods ------------------------------------------------------------

    def m_eth_chainId(self):
        return hex(self.chain.chain_id)

    def m_net_version(self):
        return hex(self.chain.chain_id)

    def m_eth_blockNumber(self):
        return hex(self.chain.tip)

    def m_eth_getBlockByNumber(self, tag, full):
        height = self._height(tag)
        if height > self.chain.tip:
            return None
        block = self.chain.blocks[height]
        txs = [tx.txid for tx in block.txs]
        if full:
            txs = [self._tx(block, i, tx) for i, tx in enumerate(block.txs)]
        return {"number": hex(block.number), "hash": block.hash, "parentHash": block.parent,
                "miner": "0x" + "a2" * 20, "timestamp": hex(block.timestamp), "size": hex(200 + 300 * len(txs)),
                "transactionsRoot": "0x" + hashlib.sha256(str(txs).encode()).hexdigest(), "stateRoot": "0x",
                "transactions": txs, "uncles": [], "gasLimit": "0x0", "gasUsed": "0x0", "difficulty": "0x0",
                "totalDifficulty": "0x0", "extraData": "0x", "logsBloom": _ZERO_BLOOM, "nonce": "0x0000000000000000",
                "sha3Uncles": "0x" + "00" * 32, "receiptsRoot": "0x" + "00" * 32, "mixHash": "0x" + "00" * 32,
                "baseFeePerGas": "0x0"}

    def _tx(self, block: Block, position: int, tx: Tx) -> dict:
        return {"hash": tx.txid, "blockHash": block.hash, "blockNumber": hex(block.number),
                "transactionIndex": hex(position), "from": tx.sender, "to": tx.contract, "value": "0x0",
                "gas": "0xae29", "gasPrice": "0xd2", "input": self._input(tx), "type": "0x0",
                "nonce": "0x0000000000000000", "v": "0x1b", "r": "0x" + tx.txid[2:66], "s": "0x" + tx.txid[2:66]}

    def m_eth_getTransactionByHash(self, txid):
        found = self.chain.find(self._txid(txid))
        return None if found is None else self._tx(*found)

    def m_eth_getTransactionReceipt(self, txid):
        found = self.chain.find(self._txid(txid))
        if found is None or self._txid(txid) in self.lagging_receipts:
            return None
        block, position, tx = found
        logs = [self._log(block, p, t, i, log) for p, t, i, log in self._logs_of(block) if t is tx]
        return {"blockHash": block.hash, "blockNumber": hex(block.number), "transactionHash": tx.txid,
                "transactionIndex": hex(position), "from": tx.sender, "to": tx.contract,
                "cumulativeGasUsed": hex(0xae29 * (position + 1)), "gasUsed": "0xae29", "effectiveGasPrice": "0xd2",
                "contractAddress": None, "logs": logs, "logsBloom": _ZERO_BLOOM, "status": hex(tx.status),
                "type": "0x0"}

    def m_eth_getLogs(self, criteria):
        if "blockHash" in criteria:
            if "fromBlock" in criteria or "toBlock" in criteria:
                raise RpcError("both_block_hash")
            block = next((b for b in self.chain.blocks if b.hash == criteria["blockHash"]), None)
            if block is None:
                raise RpcError("invalid_hash")
            first = last = block.number
        else:
            first = self._height(criteria.get("fromBlock", "latest"))
            last = self._height(criteria.get("toBlock", "latest"))
        if first > last:
            raise RpcError("from_after_to")
        if last - first + 1 > LIMITS["maxBlockRange"]:
            raise RpcError("block_range", limit=LIMITS["maxBlockRange"])
        addresses = criteria.get("address")
        if isinstance(addresses, str):
            addresses = [addresses]
        if addresses is not None and len(addresses) > LIMITS["maxAddressSize"]:
            raise RpcError("addresses", limit=LIMITS["maxAddressSize"])
        wanted = {a.lower() for a in addresses} if addresses else None
        topics = criteria.get("topics") or []
        if len(topics) > LIMITS["maxTopics"]:
            raise RpcError("topics_size")
        slots = []
        for slot in topics:
            if isinstance(slot, list) and len(slot) > LIMITS["maxSubTopics"]:
                raise RpcError("sub_topics", limit=LIMITS["maxSubTopics"])
            slots.append(None if slot is None else {t.lower() for t in (slot if isinstance(slot, list) else [slot])})
        found = []
        for block in self.chain.blocks[first:last + 1]:
            for position, tx, index, log in self._logs_of(block):
                emitter, log_topics, _data = log
                if wanted is not None and emitter not in wanted:
                    continue
                if any(s is not None and (i >= len(log_topics) or log_topics[i] not in s) for i, s in enumerate(slots)):
                    continue
                found.append(self._log(block, position, tx, index, log))
        return found

    def m_eth_call(self, call, tag):
        if tag != "latest":
            if isinstance(tag, str) and tag in ("earliest", "pending", "finalized", "safe"):
                raise RpcError("call_tag", tag=tag)
            raise RpcError("call_quantity")
        data = call.get("input") or call.get("data") or ""
        contract = (call.get("to") or "").lower()
        if data == DECIMALS_CALL and contract in self.chain.decimals:
            return "0x" + f"{self.chain.decimals[contract]:064x}"
        return "0x"


class TronNode:
    """The server on 127.0.0.1, a free port, in a thread; ``stop`` shuts it down and joins the thread."""

    def __init__(self, chain: TronChain | None = None):
        self.chain = chain or TronChain()
        self.rpc = TronRpc(self.chain)
        rpc = self.rpc

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server's name
                if self.path != "/jsonrpc":
                    self.send_error(404)
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    request = json.loads(body)
                except ValueError:
                    self._send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
                    return
                if isinstance(request, list):
                    rpc.batches.append(len(request))
                    if not request:
                        reply = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}
                    elif len(request) > LIMITS["maxBatchSize"]:
                        err = RpcError("batch_size", size=len(request), limit=LIMITS["maxBatchSize"])
                        reply = {"jsonrpc": "2.0", "id": None, "error": {"code": err.code, "message": err.message}}
                    else:
                        reply = [rpc.answer(r) for r in request]
                    self._send(reply)
                    return
                self._send(rpc.answer(request))

            def _send(self, payload) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)  # java-tron's servlet answers JSON-RPC errors with HTTP 200 too
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/jsonrpc"

    def start(self) -> TronNode:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
