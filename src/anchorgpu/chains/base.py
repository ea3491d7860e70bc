"""The plain records every chain adapter returns, and its one error type."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from urllib.parse import urlsplit


def redact(url: str) -> str:
    """Hosted nodes put an API key in the path, the query or the user part:
    what is shown or logged keeps only the scheme, host and port."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "node"
    return f"{parts.scheme}://{host}{port}" if host else "node"


def secrets_of(url: str) -> tuple[str, ...]:
    """The parts of ``url`` that may hold a key (longest first), for scrubbing error texts."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return (url,)
    found = [url, parts.path + ("?" + parts.query if parts.query else ""), parts.path, parts.query,
             parts.netloc.rpartition("@")[0]]
    return tuple(sorted({p for p in found if len(p) > 1}, key=len, reverse=True))


class ChainUnavailable(Exception):
    """The node or explorer is down, slow, on the wrong network, or answered
    something that does not hold together. Verification waits; nothing about
    an order is decided from a failed read."""

    def __init__(self, reason: str, *, endpoint: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.endpoint = endpoint

    def __str__(self) -> str:
        return f"{self.endpoint}: {self.reason}" if self.endpoint else self.reason


@dataclass(frozen=True)
class BlockRef:
    number: int  # height
    hash: str  # lowercase hex: "0x…" on EVM chains, bare on Bitcoin
    time: datetime | None = None  # the block's own timestamp, UTC


@dataclass(frozen=True)
class SeenTransfer:
    """One payment to one address: a native value transfer, one ERC-20
    Transfer log, or one Bitcoin output."""

    txid: str  # normalised as ``anchorgpu.payments.txids`` does
    index: int  # log index (tokens), 0 (native ETH), output index (Bitcoin)
    to: str  # the receiving address, lowercased on EVM chains
    amount: int  # base units, > 0
    sender: str = ""  # EVM: the sender; Bitcoin: "" (inputs name no single payer)
    block: BlockRef | None = None  # None while it waits in the mempool

    @property
    def key(self) -> tuple[str, int]:
        return (self.txid, self.index)

    def confirmations(self, tip: int) -> int:
        if self.block is None:
            return 0
        return max(0, tip - self.block.number + 1)


class LookupOutcome(str, Enum):
    """What a transaction id a customer pasted turned out to be."""

    FOUND = "found"  # it pays the address in the accepted asset (see ``transfers``)
    NOT_FOUND = "not_found"  # the node or explorer does not know it
    PENDING = "pending"  # EVM: known but not yet in a block, so its effect cannot be read yet
    FAILED = "failed"  # EVM: mined but reverted, nothing moved
    OTHER_ADDRESS = "other_address"  # it exists but pays none of this order's address
    WRONG_ASSET = "wrong_asset"  # it pays the address, but in another coin or token contract
    BAD_DATA = "bad_data"  # the source's transaction data does not hash to the id


@dataclass(frozen=True)
class TxLookup:
    outcome: LookupOutcome
    tip: int | None = None  # the height confirmations count from when looked up (``Watcher.counted_tip``)
    transfers: tuple[SeenTransfer, ...] = ()  # FOUND: every payment of the accepted asset to the address
    detail: dict = field(default_factory=dict)  # e.g. {"contract": "0x…"} for WRONG_ASSET


class Watcher:
    """What the payment services need from one network. Implementations:
    ``anchorgpu.chains.evm.EvmWatcher`` (one per EVM asset: native coin or
    one token contract) and ``anchorgpu.chains.esplora.BitcoinWatcher``.

    Block ranges are inclusive heights ``first..last`` (as ``eth_getLogs``
    counts them). Every method raises ``ChainUnavailable`` when its source is
    down or answers garbage; none returns a partial answer.
    """

    network: str = ""  # for log lines
    calls: int = 0  # single reads made so far (JSON-RPC calls or HTTP requests)
    round_trips: int = 0  # network round trips (a JSON-RPC batch is one)

    def head(self) -> BlockRef:
        """The chain tip, after checking the source is on the configured network."""
        raise NotImplementedError

    def counted_tip(self, head: BlockRef) -> int:
        """The height confirmations are counted from, read with ``head``: the tip itself, or on a network
        whose asset waits for a finality tag, the tagged block (``safe``, ``finalized``). A transfer above it
        has 0 confirmations however deep it is."""
        return head.number

    def scan(self, addresses, first: int, last: int) -> list[SeenTransfer]:
        """Every payment of the accepted asset to any of ``addresses`` in blocks ``first..last``."""
        raise NotImplementedError

    def hashes(self, heights) -> dict[int, str | None]:
        """The canonical block hash at each height (``None`` above the tip): how a poll tells that
        blocks it read earlier were replaced, without reading them again."""
        raise NotImplementedError

    def locate(self, txids) -> dict[str, BlockRef | None]:
        """Where each transaction is on the canonical chain now; ``None`` when it is in no block
        (dropped, or back in the mempool after a reorganisation)."""
        raise NotImplementedError

    def lookup(self, txid: str, address: str) -> TxLookup:
        """What a transaction id a customer pasted does for ``address``."""
        raise NotImplementedError
