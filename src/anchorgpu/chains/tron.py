"""The TRON watcher: one TRC-20 token (USDT…) over TRON's Ethereum-compatible
JSON-RPC (``/jsonrpc`` on a java-tron FullNode, port 8545; TronGrid serves it
at ``https://api.trongrid.io/jsonrpc``).

TRON's JSON-RPC answers in Ethereum's shapes, so this is the EVM watcher with
the differences handled. Each was checked against java-tron's own method
documentation (tronprotocol/documentation-en, docs/api/json-rpc/, commit
8f3209ef53d7, and its index page for the limits):

* **Chain id.** ``eth_chainId`` is the last 4 bytes of the genesis block id:
  mainnet 0x2b6653dc, Nile 0xcd8690dc, Shasta 0x94a9059e (node/eth_chainId.md).
  It is checked on every head read, as on EVM chains.
* **Tags.** No ``pending`` and no ``safe``: java-tron answers
  ``-32602 TAG pending not supported`` (index.md, eth_getBlockByNumber.md).
  Neither is ever sent; an asset with the "safe" rule is refused here.
  ``finalized`` is the latest *solidified* block (past TRON's irreversibility
  threshold, "about a minute" behind the tip: docs/api/index.md), and is
  TRON's default rule: a TRON payment counts from the solidified block.
* **Block hashes.** A TRON block id is the block number in its first 8 bytes
  and 24 bytes of the header's SHA-256 after it
  (eth_getBlockByNumber.md: ``0x0000000003fe1c00…`` for block 0x3fe1c00).
  Every block reference read is checked for that prefix; a node answering
  otherwise is not a TRON node and stops the poll.
* **Transaction hashes** are TRON's txid (SHA-256 of the raw transaction),
  written ``0x`` + 64 hex by the JSON-RPC; explorers (TRONSCAN) show the same
  64 digits without ``0x``; the node accepts both (``(0x)?[0-9a-fA-F]{64}``,
  eth_getTransactionByHash.md). Ids are kept with ``0x``.
* **Energy, not gas.** Receipts' ``gasUsed``/``cumulativeGasUsed`` are energy
  and ``effectiveGasPrice`` is sun per energy unit
  (eth_getTransactionReceipt.md). The watcher reads none of them.
* **Receipt status** is ``0x1``/``0x0`` from the transaction's result, and the
  documentation asks to check it before reading a receipt's logs: a Transfer
  log counts only when its transaction's receipt says ``0x1``.
* **Batches** are accepted up to ``maxBatchSize`` (default 100); larger
  batches get ``-32005 Batch size …`` (index.md): batches of 100 here.
* **eth_getLogs limits** (defaults, index.md): 5,000 blocks per request,
  1,000 addresses, 1,000 alternatives per topic slot, at most 4 topics. The
  EVM watcher's filters (500 blocks, 200 deposit addresses in topic 2, one
  contract) fit them. ``removed`` is part of each log (always false when read
  by eth_getLogs, which reads stored blocks) and a removed log is skipped.
* **Addresses** in filters, topics and ``from``/``to`` are 20-byte ``0x`` hex
  without the ``41`` byte (index.md "Address encoding"); the contract is
  configured as ``T…`` and converted (``anchorgpu.chains.tron_address``).
* ``eth_call`` takes only the ``latest`` tag (eth_call.md): the decimals()
  check uses it. ``eth_getBalance`` takes only ``latest`` too and there is
  no ``eth_getTransactionCount``: native TRX is not watched (a TRON asset
  must be a token, a database constraint), so ``balances``/``sent_counts``
  refuse.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from .base import BlockRef, SeenTransfer, TxLookup
from .evm import EvmWatcher, _receipt_state
from .rpc import Rpc, coerce
from .tron_address import TronAddressError, to_hex20

MAINNET_CHAIN_ID = 0x2B6653DC
NILE_CHAIN_ID = 0xCD8690DC
SHASTA_CHAIN_ID = 0x94A9059E
CHAIN_IDS = {"mainnet": MAINNET_CHAIN_ID, "nile": NILE_CHAIN_ID, "shasta": SHASTA_CHAIN_ID}
MAX_BATCH = 100  # java-tron's default node.jsonrpc.maxBatchSize
TRON_FINALITY = ("finalized", "depth")  # no "safe" block on TRON


class TronWatcher(EvmWatcher):
    def _receipt_state(self, receipt) -> tuple[bool, BlockRef]:
        return _tron_receipt_state(receipt)

    def __init__(self, rpc: Rpc, *, contract: str, chain_id: int = MAINNET_CHAIN_ID, network: str = "tron",
                 decimals: int | None = None, finality: str = "finalized"):
        """``contract``: the TRC-20 token, as ``T…`` (or 41-/0x-hex). ``finality``: "finalized" (the
        solidified block, the default) or "depth" (confirmations from the tip)."""
        if finality not in TRON_FINALITY:
            raise ValueError(f"TRON has no {finality!r} block: use 'finalized' (solidified) or 'depth'")
        if not contract:
            raise ValueError("a TRON asset is a TRC-20 token: native TRX is not watched")
        try:
            hex_contract = to_hex20(contract)
        except TronAddressError as exc:
            raise ValueError(f"the token contract is not a TRON address: {exc}") from None
        super().__init__(rpc, chain_id=chain_id, contract=hex_contract, network=network, decimals=decimals,
                         finality=finality)

    @classmethod
    def for_url(cls, url: str, *, contract: str, chain_id: int = MAINNET_CHAIN_ID,  # type: ignore[override]
                network: str = "tron", timeout: float = 10.0, decimals: int | None = None,
                finality: str = "finalized"):
        return cls(Rpc.for_url(url, timeout=timeout, batch_size=MAX_BATCH), contract=contract, chain_id=chain_id,
                   network=network, decimals=decimals, finality=finality)

    # --- block ids -----------------------------------------------------------

    def _block_id(self, ref: BlockRef) -> BlockRef:
        if ref.hash[2:18] != f"{ref.number:016x}":
            raise self.rpc.fail(f"block {ref.number} has the id {ref.hash}, which does not begin with its "
                                f"number as a TRON block id does")
        return ref

    def head(self) -> BlockRef:
        head = self._block_id(super().head())
        if self._tagged is not None:
            self._block_id(self._tagged)
        return head

    def hashes(self, heights: Iterable[int]) -> dict[int, str | None]:
        found = super().hashes(heights)
        for height, block_hash in found.items():
            if block_hash is not None:
                self._block_id(BlockRef(number=height, hash=block_hash))
        return found

    # --- finding transfers -------------------------------------------------

    def _scan_logs(self, wanted: set[str], first: int, last: int) -> list[SeenTransfer]:
        """The EVM read, then each transaction's receipt status: a Transfer log counts only when its
        transaction succeeded (``0x1``) in the very block it was read from."""
        seen = super()._scan_logs(wanted, first, last)
        for t in seen:
            self._block_id(t.block)
        txids = sorted({t.txid for t in seen})
        receipts = self.rpc.many([("eth_getTransactionReceipt", [txid]) for txid in txids])
        succeeded = set()
        for txid, receipt in zip(txids, receipts, strict=True):
            if receipt is None:
                # A node behind a load balancer may answer a log from one backend and "no receipt" from a
                # lagging one; skipped, the log would be passed over for good (the next poll starts after this
                # block). The whole poll fails instead and reads the blocks again.
                raise self.rpc.fail(f"no receipt for transaction {txid}, whose Transfer log was just read")
            ok, block = self._read("receipt", _tron_receipt_state, receipt)
            if ok:
                succeeded.add((txid, block.hash))
        return [t for t in seen if (t.txid, t.block.hash) in succeeded]

    def locate(self, txids: Iterable[str]) -> dict[str, BlockRef | None]:
        where = super().locate(_with_prefix(t) for t in txids)
        for ref in where.values():
            if ref is not None:
                self._block_id(ref)
        return where

    def lookup(self, txid: str, address: str) -> TxLookup:
        found = super().lookup(_with_prefix(txid), address)
        for t in found.transfers:
            self._block_id(t.block)
        return found

    # --- native TRX: not watched ------------------------------------------

    def balances(self, addresses: Collection[str], block: int) -> dict[str, int]:
        raise self.rpc.fail("TRX balances are not read: TRON's eth_getBalance answers for 'latest' only, and "
                            "TRON assets are TRC-20 tokens")

    def sent_counts(self, addresses: Collection[str], block: int) -> dict[str, int]:
        raise self.rpc.fail("TRON's JSON-RPC has no eth_getTransactionCount (TRON accounts have no nonce)")


def _with_prefix(txid: str) -> str:
    """A TRON txid as the JSON-RPC writes it: ``0x`` and 64 lowercase hex digits."""
    value = txid.strip().lower()
    return value if value.startswith("0x") else "0x" + value


def _tron_receipt_state(receipt) -> tuple[bool, BlockRef]:
    """As on EVM chains, but TRON's receipts always carry ``status``: one without it is malformed."""
    if coerce.mapping(receipt, "receipt").get("status") is None:
        raise ValueError("a TRON receipt without a status")
    return _receipt_state(receipt)


__all__ = ["TronWatcher", "MAINNET_CHAIN_ID", "NILE_CHAIN_ID", "SHASTA_CHAIN_ID", "CHAIN_IDS"]
