"""Bitcoin over an Esplora-compatible HTTP API (Blockstream's esplora,
mempool.space, or a self-hosted electrs).

The explorer is a messenger, not an authority. Amounts and addresses come only
from transaction bytes whose recomputed id is the id asked for; a block is
believed only when its header hashes to the hash asked for, meets its own
target, and (for a raw block) its transactions rebuild its merkle root. The
explorer's JSON summaries (``/tx/:txid`` with its ``vout`` values) are never
read. What remains trusted is the explorer's word on which chain is the best
one: a header chain is not followed back to genesis here.
"""

from __future__ import annotations

import re

import requests

from .base import BlockRef, ChainUnavailable, LookupOutcome, SeenTransfer, TxLookup, Watcher
from .bitcoin import (
    POW_LIMIT_BITS,
    BitcoinDataError,
    BlockHeader,
    address_key,
    hex_to_bytes,
    parse_block,
    parse_header,
    parse_transaction,
    verify_merkle_proof,
)
from .http import ExplorerHttp

_HEIGHT = re.compile(r"[0-9]{1,10}")
_HASH = re.compile(r"[0-9a-f]{64}")
# The hash of block 0 tells which chain an explorer follows.
GENESIS = {
    "bitcoin": {"000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f"},
    "testnet": {"000000000933ea01ad0ee984209779baaec3ced90fa3f408719526f8d77f4943",  # testnet3
                "00000000da84f2bafbbc53dee25a72ae507ff4914b867c565be350b0da8bf043"},  # testnet4
}


def _txid(value: str) -> str:
    text = (value or "").strip().lower() if isinstance(value, str) else ""
    if not _HASH.fullmatch(text):
        raise ValueError(f"Not a Bitcoin transaction id: {value!r}")
    return text


class BitcoinWatcher(Watcher):
    def __init__(self, *, base_url: str, network: str = "bitcoin", timeout: float = 10.0,
                 session: requests.Session | None = None, pow_limit_bits: int | None = None):
        """``pow_limit_bits``: the easiest target a header may claim; the network's own limit unless given
        (tests that mine headers on a laptop pass ``bitcoin.REGTEST_POW_LIMIT_BITS``)."""
        if network not in GENESIS:
            raise ValueError(f"Unknown Bitcoin network {network!r}: use one of {sorted(GENESIS)}")
        self.network = network
        self.pow_limit_bits = POW_LIMIT_BITS[network] if pow_limit_bits is None else pow_limit_bits
        self._http = ExplorerHttp(base_url, timeout=timeout, session=session, on_request=self._count)
        self.base_url = self._http.base_url
        self.calls = 0
        self.round_trips = 0
        self._network_checked = False

    def _count(self) -> None:
        # Every HTTP request is one call and one round trip: the API has no batches.
        self.calls += 1
        self.round_trips += 1

    # --- the Watcher interface ------------------------------------------------------------------------------

    def head(self) -> BlockRef:
        self._check_network()
        height = self._tip_height()
        block_hash = self._hash_at(height)
        if block_hash is None:
            raise self._fail(f"the tip is at height {height}, but there is no block at that height")
        header = self._header(block_hash)
        return BlockRef(height, block_hash, header.timestamp)

    def scan(self, addresses, first: int, last: int) -> list[SeenTransfer]:
        if isinstance(first, bool) or not isinstance(first, int) or first < 0 or not isinstance(last, int):
            raise ValueError("scan takes whole-number heights first..last, first >= 0")
        wanted = {address_key(a) for a in addresses}
        self._check_network()
        found: list[SeenTransfer] = []
        previous: str | None = None
        for height in range(first, last + 1):
            block_hash = self._hash_at(height)
            if block_hash is None:
                raise self._fail(f"no block at height {height}")
            raw = self._http.get(f"/block/{block_hash}/raw")
            try:
                block = parse_block(raw, network=self.network)
                block.header.check_proof_of_work(pow_limit_bits=self.pow_limit_bits)
            except BitcoinDataError as exc:
                raise self._fail(f"block {block_hash} at height {height}: {exc}") from None
            if block.hash != block_hash:
                raise self._fail(f"asked for block {block_hash} at height {height}, got block {block.hash}")
            if previous is not None and block.header.prev_hash != previous:
                raise self._fail(f"block {block_hash} at height {height} does not follow the block before it "
                                 "(the chain changed during the scan)")
            previous = block_hash
            ref = BlockRef(height, block_hash, block.header.timestamp)
            for tx in block.transactions:
                for out in tx.outputs:
                    if out.value > 0 and out.address and address_key(out.address) in wanted:
                        found.append(SeenTransfer(txid=tx.txid, index=out.index, to=out.address, amount=out.value,
                                                  sender="", block=ref))
        return found

    def locate(self, txids) -> dict[str, BlockRef | None]:
        self._check_network()
        headers: dict[str, BlockHeader] = {}  # checked headers, shared by transactions of one block
        return {txid: self._locate_one(txid, headers) for txid in (_txid(t) for t in txids)}

    def lookup(self, txid: str, address: str) -> TxLookup:
        txid = _txid(txid)
        tip = self.head().number
        raw = self._http.get_text(f"/tx/{txid}/hex", missing_ok=True)
        if raw is None:
            return TxLookup(LookupOutcome.NOT_FOUND, tip=tip)
        try:
            data = hex_to_bytes(raw, "transaction")
        except BitcoinDataError as exc:
            raise self._fail(f"GET /tx/{txid}/hex: {exc}") from None
        try:
            tx = parse_transaction(data, network=self.network)
        except BitcoinDataError as exc:
            return TxLookup(LookupOutcome.BAD_DATA, tip=tip, detail={"reason": str(exc)})
        if tx.txid != txid:
            return TxLookup(LookupOutcome.BAD_DATA, tip=tip,
                            detail={"reason": "the transaction data hashes to another id", "computed": tx.txid})
        outputs = tx.paying(address)
        if not outputs:
            return TxLookup(LookupOutcome.OTHER_ADDRESS, tip=tip)
        block = self._locate_one(txid, {})
        transfers = tuple(SeenTransfer(txid=txid, index=out.index, to=out.address, amount=out.value, sender="",
                                       block=block) for out in outputs)
        return TxLookup(LookupOutcome.FOUND, tip=tip, transfers=transfers)

    # --- pieces -----------------------------------------------------------------------------------------------

    def _fail(self, reason: str) -> ChainUnavailable:
        return self._http.fail(reason)

    def _check_network(self) -> None:
        if self._network_checked:
            return
        genesis = self._hash_at(0)
        if genesis not in GENESIS[self.network]:
            raise self._fail(f"this explorer follows another chain (block 0 is {genesis}), not {self.network}")
        self._network_checked = True

    def _tip_height(self) -> int:
        text = self._http.get_text("/blocks/tip/height")
        if not _HEIGHT.fullmatch(text):
            raise self._fail(f"GET /blocks/tip/height: not a block height: {text[:40]!r}")
        return int(text)

    def hashes(self, heights) -> dict[int, str | None]:
        self._check_network()
        return {h: self._hash_at(h) for h in sorted(set(heights))}

    def _hash_at(self, height: int) -> str | None:
        """The explorer's best-chain block at ``height``; ``None`` when its chain is shorter."""
        path = f"/block-height/{height}"
        text = self._http.get_text(path, missing_ok=True)
        if text is None:
            return None
        if not _HASH.fullmatch(text.lower()):
            raise self._fail(f"GET {path}: not a block hash: {text[:40]!r}")
        return text.lower()

    def _header(self, block_hash: str) -> BlockHeader:
        path = f"/block/{block_hash}/header"
        text = self._http.get_text(path)
        try:
            header = parse_header(text)
            header.check_proof_of_work(pow_limit_bits=self.pow_limit_bits)
        except BitcoinDataError as exc:
            raise self._fail(f"GET {path}: {exc}") from None
        if header.hash != block_hash:
            raise self._fail(f"GET {path}: the header hashes to {header.hash}")
        return header

    def _locate_one(self, txid: str, headers: dict[str, BlockHeader]) -> BlockRef | None:
        status = self._http.get_json(f"/tx/{txid}/status", missing_ok=True)
        if status is None:
            return None
        if not isinstance(status, dict) or not isinstance(status.get("confirmed"), bool):
            raise self._fail(f"GET /tx/{txid}/status: not a transaction status")
        if not status["confirmed"]:
            return None
        height, block_hash = status.get("block_height"), status.get("block_hash")
        if (isinstance(height, bool) or not isinstance(height, int) or height < 0
                or not isinstance(block_hash, str) or not _HASH.fullmatch(block_hash)):
            raise self._fail(f"GET /tx/{txid}/status: confirmed without a usable block height and hash")
        if self._hash_at(height) != block_hash:
            return None  # that block is no longer on the explorer's best chain
        if block_hash not in headers:
            headers[block_hash] = self._header(block_hash)
        header = headers[block_hash]
        proof = self._http.get_json(f"/tx/{txid}/merkle-proof", missing_ok=True)
        if proof is None:
            return None  # it left the block between two requests
        if not isinstance(proof, dict) or proof.get("block_height") != height:
            raise self._fail(f"GET /tx/{txid}/merkle-proof: not a proof for height {height}")
        try:
            verify_merkle_proof(txid, proof, header)
        except BitcoinDataError as exc:
            raise self._fail(f"GET /tx/{txid}/merkle-proof: {exc}") from None
        return BlockRef(height, block_hash, header.timestamp)
