"""The EVM watcher: one asset on one chain, either the chain's own coin
(ETH) or one ERC-20 token contract (USDC, USDT…).

* Tokens are found by ``Transfer`` logs of the configured contract only, to
  the deposit addresses, many addresses per ``eth_getLogs`` filter. A
  look-alike token at another address emitting the same event is never read.
* The native coin is found by reading the blocks' transactions (batched) and
  keeping value transfers to a deposit address whose receipt succeeded;
  ``balances`` lets the caller notice coin that arrived another way (a
  contract's internal transfer), which only an operator can attribute.
* Every block reference carries its hash, so the caller can tell when a
  transfer's block was replaced by a reorganisation.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from web3 import Web3

from .base import BlockRef, ChainUnavailable, LookupOutcome, SeenTransfer, TxLookup, Watcher
from .rpc import Rpc, coerce

# keccak256("Transfer(address,address,uint256)")
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
ADDRESSES_PER_FILTER = 200  # providers cap the size of one topic list
BLOCKS_PER_FILTER = 500  # and the block range of one eth_getLogs
FULL_BLOCKS_PER_BATCH = 25  # a mainnet block with its transactions is a few hundred kB
DECIMALS_CALL = "0x313ce567"  # decimals()
FINALITY_TAGS = ("depth", "safe", "finalized")  # "depth": no tag, confirmations counted from the tip


def _topic(address: str) -> str:
    return "0x" + "0" * 24 + address[2:]


class EvmWatcher(Watcher):
    def _receipt_state(self, receipt: Any) -> tuple[bool, BlockRef]:
        """(succeeded, the block it is in) from a receipt; a chain with stricter receipts overrides it."""
        return _receipt_state(receipt)

    def __init__(self, rpc: Rpc, *, chain_id: int, contract: str = "", network: str = "",
                 decimals: int | None = None, finality: str = "depth"):
        """``decimals``: what the asset is configured with; a token contract reporting otherwise is refused
        (the same token has 6 decimals on one chain and 18 on another). ``finality``: "depth" counts
        confirmations from the tip; "safe" or "finalized" from the block the node gives that tag."""
        if finality not in FINALITY_TAGS:
            raise ValueError(f"unknown finality rule {finality!r}")
        self.rpc = rpc
        self.chain_id = chain_id
        self.contract = contract.lower() if contract else ""
        self.network = network or f"evm:{chain_id}"
        self.decimals = decimals
        self.finality = finality
        self._chain_checked = False
        self._tagged: BlockRef | None = None  # the tagged block read with the last head()

    @classmethod
    def for_url(cls, url: str, *, chain_id: int, contract: str = "", network: str = "", timeout: float = 10.0,
                decimals: int | None = None, finality: str = "depth"):
        return cls(Rpc.for_url(url, timeout=timeout), chain_id=chain_id, contract=contract, network=network,
                   decimals=decimals, finality=finality)

    @classmethod
    def for_web3(cls, w3: Web3, *, chain_id: int, contract: str = "", network: str = "",
                 decimals: int | None = None, finality: str = "depth"):
        return cls(Rpc(w3), chain_id=chain_id, contract=contract, network=network, decimals=decimals,
                   finality=finality)

    @property
    def calls(self) -> int:  # type: ignore[override]
        return self.rpc.calls

    @property
    def round_trips(self) -> int:  # type: ignore[override]
        return self.rpc.round_trips

    def _read(self, what: str, fn, *args):
        try:
            return fn(*args)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise self.rpc.fail(f"malformed {what}: {exc}") from None

    # --- the tip ------------------------------------------------------------

    def head(self) -> BlockRef:
        calls = [("eth_chainId", []), ("eth_getBlockByNumber", ["latest", False])]
        if self.finality != "depth":
            calls.append(("eth_getBlockByNumber", [self.finality, False]))
        chain_id, block, *tagged = self.rpc.many(calls)
        found = self._read("chain id", coerce.quantity, chain_id)
        if found != self.chain_id:
            raise self.rpc.fail(f"the node is on chain id {found}, this asset is configured for {self.chain_id}")
        if self.contract and self.decimals is not None and not self._chain_checked:
            answer = self.rpc.call("eth_call", [{"to": self.contract, "data": DECIMALS_CALL}, "latest"])
            reported = self._read("decimals()", lambda v: int(coerce.data(v), 16) if coerce.data(v) != "0x" else -1,
                                  answer)
            if reported != self.decimals:
                raise self.rpc.fail(f"the token contract reports {reported} decimals, the asset is configured with "
                                    f"{self.decimals}")
        self._chain_checked = True
        if block is None:
            raise self.rpc.fail("the node has no latest block")
        head = self._read("latest block", _block_ref, block)
        if tagged:
            if tagged[0] is None:
                raise self.rpc.fail(f"the node reports no {self.finality!r} block; the asset waits for one")
            ref = self._read(f"{self.finality} block", _block_ref, tagged[0])
            if ref.number > head.number:
                # Read in one batch, a node may answer from two moments: the tip is the older read.
                head = ref
            self._tagged = ref
        return head

    def counted_tip(self, head: BlockRef) -> int:
        if self.finality == "depth":
            return head.number
        if self._tagged is None:
            raise self.rpc.fail(f"no {self.finality!r} block was read with the tip")
        return min(self._tagged.number, head.number)

    def _check_chain(self) -> None:
        if not self._chain_checked:
            self.head()

    # --- finding transfers ------------------------------------------------

    def scan(self, addresses: Collection[str], first: int, last: int) -> list[SeenTransfer]:
        wanted = {a.lower() for a in addresses}
        if not wanted or last < first:
            return []
        self._check_chain()
        found = self._scan_logs(wanted, first, last) if self.contract else self._scan_blocks(wanted, first, last)
        return sorted(found, key=lambda t: (t.block.number if t.block else -1, t.txid, t.index))

    def _scan_logs(self, wanted: set[str], first: int, last: int) -> list[SeenTransfer]:
        targets = sorted(wanted)
        # eth-tester takes no list of alternatives in a topic: there each address gets its own filter.
        per_filter = ADDRESSES_PER_FILTER if self.rpc.remote else 1
        filters = []
        for low in range(first, last + 1, BLOCKS_PER_FILTER):
            high = min(last, low + BLOCKS_PER_FILTER - 1)
            for start in range(0, len(targets), per_filter):
                chunk = [_topic(a) for a in targets[start:start + per_filter]]
                topics = [TRANSFER_TOPIC, None, chunk if self.rpc.remote else chunk[0]]
                filters.append(("eth_getLogs", [{"fromBlock": hex(low), "toBlock": hex(high),
                                                 "address": [self.contract], "topics": topics}]))
        seen: list[SeenTransfer] = []
        for logs in self.rpc.many(filters):
            if not isinstance(logs, list):
                raise self.rpc.fail(f"eth_getLogs answered {type(logs).__name__}, not a list")
            for log in logs:
                transfer = self._read("log", self._log_transfer, log, wanted, first, last)
                if transfer is not None:
                    seen.append(transfer)
        return self._with_block_times(seen, positions=True)

    def _log_transfer(self, log: Any, wanted: set[str], first: int, last: int) -> SeenTransfer | None:
        log = coerce.mapping(log, "log")
        if log.get("removed"):
            return None
        if not first <= coerce.quantity(log["blockNumber"]) <= last:
            raise ValueError(f"a log of block {log['blockNumber']} answered a filter for blocks {first}..{last}")
        if coerce.address(log["address"]) != self.contract:
            raise ValueError(f"a log of contract {log['address']} answered a filter for {self.contract}")
        topics = [coerce.hash32(t) for t in log["topics"]]
        if len(topics) != 3 or topics[0] != TRANSFER_TOPIC:
            return None  # not an ERC-20 Transfer (an ERC-721 one has the token id as a fourth topic)
        to = "0x" + topics[2][-40:]
        if to not in wanted:
            raise ValueError(f"a log to {to} answered a filter for other addresses")
        data = coerce.data(log["data"])
        if len(data) != 66:
            return None
        amount = int(data, 16)
        if amount == 0:
            return None  # zero-value transfers are address-poisoning spam, never a payment
        block = BlockRef(number=coerce.quantity(log["blockNumber"]), hash=coerce.hash32(log["blockHash"]))
        return SeenTransfer(txid=coerce.hash32(log["transactionHash"]), index=coerce.quantity(log["logIndex"]),
                            to=to, amount=amount, sender="0x" + topics[1][-40:], block=block)

    def _scan_blocks(self, wanted: set[str], first: int, last: int) -> list[SeenTransfer]:
        blocks = self.rpc.many([("eth_getBlockByNumber", [hex(n), True]) for n in range(first, last + 1)],
                               batch_size=FULL_BLOCKS_PER_BATCH)
        candidates: list[SeenTransfer] = []
        for number, block in zip(range(first, last + 1), blocks, strict=True):
            if block is None:
                raise self.rpc.fail(f"block {number} is missing")
            candidates.extend(self._read(f"block {number}", self._block_payments, block, number, wanted))
        return self._succeeded(candidates)

    def _block_payments(self, block: Any, number: int, wanted: set[str]) -> list[SeenTransfer]:
        ref = _block_ref(block)
        if ref.number != number:
            raise ValueError(f"asked for block {number}, got {ref.number}")
        payments = []
        for tx in block["transactions"]:
            tx = coerce.mapping(tx, "transaction")
            to = coerce.optional_address(tx.get("to"))
            value = coerce.quantity(tx["value"])
            if to in wanted and value > 0:
                payments.append(SeenTransfer(txid=coerce.hash32(tx["hash"]), index=0, to=to, amount=value,
                                             sender=coerce.address(tx["from"]), block=ref))
        return payments

    def _succeeded(self, candidates: list[SeenTransfer]) -> list[SeenTransfer]:
        """Keep the value transfers whose receipt says they succeeded, in the block they were read from."""
        receipts = self.rpc.many([("eth_getTransactionReceipt", [t.txid]) for t in candidates])
        kept = []
        for transfer, receipt in zip(candidates, receipts, strict=True):
            if receipt is None:
                continue  # the block moved on while we read; the next poll sees it again
            ok, block = self._read("receipt", self._receipt_state, receipt)
            if ok and block.hash == transfer.block.hash:
                kept.append(transfer)
        return kept

    def _with_block_times(self, transfers: list[SeenTransfer], *, positions: bool = False) -> list[SeenTransfer]:
        """Each transfer with its block's time. With ``positions``, a log's index becomes its place among
        its transaction's logs: the block-wide ``logIndex`` changes when a reorganisation mines the same
        transaction elsewhere, and the transfer must keep its identity (one transfer credits once)."""
        numbers = sorted({t.block.number for t in transfers})
        txids = sorted({t.txid for t in transfers}) if positions else []
        answers = self.rpc.many([("eth_getBlockByNumber", [hex(n), False]) for n in numbers]
                                + [("eth_getTransactionReceipt", [txid]) for txid in txids])
        refs = {}
        for number, header in zip(numbers, answers[:len(numbers)], strict=True):
            if header is None:
                raise self.rpc.fail(f"block {number} is missing")
            refs[number] = self._read(f"block {number}", _block_ref, header)
        log_indexes = {}  # txid -> (block hash, [block-wide logIndex of each of its logs])
        for txid, receipt in zip(txids, answers[len(numbers):], strict=True):
            if receipt is not None:
                log_indexes[txid] = self._read("receipt", _log_indexes, receipt)
        result = []
        for t in transfers:
            ref = refs[t.block.number]
            if ref.hash != t.block.hash:
                continue  # a reorganisation happened between the two reads; the next poll settles it
            index = t.index
            if positions:
                if t.txid not in log_indexes:
                    # Its block is still the one the log came from, yet the node has no receipt: a backend
                    # behind the others (load-balanced providers). Skipped, the log would be passed over for
                    # good, as the next poll starts after this block; the poll fails and reads it again.
                    raise self.rpc.fail(f"no receipt for transaction {t.txid}, whose Transfer log was just read")
                block_hash, indexes = log_indexes[t.txid]
                if block_hash != ref.hash or t.index not in indexes:
                    continue  # moved meanwhile
                index = indexes.index(t.index)
            result.append(SeenTransfer(txid=t.txid, index=index, to=t.to, amount=t.amount, sender=t.sender,
                                       block=ref))
        return result

    def hashes(self, heights: Iterable[int]) -> dict[int, str | None]:
        heights = sorted(set(heights))
        self._check_chain()
        headers = self.rpc.many([("eth_getBlockByNumber", [hex(h), False]) for h in heights])
        found: dict[int, str | None] = {}
        for height, header in zip(heights, headers, strict=True):
            if header is None:
                found[height] = None
                continue
            ref = self._read(f"block {height}", _block_ref, header)
            if ref.number != height:
                raise self.rpc.fail(f"asked for block {height}, got {ref.number}")
            found[height] = ref.hash
        return found

    # --- where recorded transfers are now ----------------------------------

    def locate(self, txids: Iterable[str]) -> dict[str, BlockRef | None]:
        txids = sorted(set(txids))
        if not txids:
            return {}
        self._check_chain()
        receipts = self.rpc.many([("eth_getTransactionReceipt", [txid]) for txid in txids])
        where: dict[str, BlockRef | None] = {}
        for txid, receipt in zip(txids, receipts, strict=True):
            if receipt is None:
                where[txid] = None
                continue
            ok, block = self._read("receipt", self._receipt_state, receipt)
            where[txid] = block if ok else None
        return where

    def balances(self, addresses: Collection[str], block: int) -> dict[str, int]:
        """The native coin held by each address at ``block``."""
        targets = sorted({a.lower() for a in addresses})
        answers = self.rpc.many([("eth_getBalance", [a, hex(block)]) for a in targets])
        return {a: self._read("balance", coerce.quantity, v) for a, v in zip(targets, answers, strict=True)}

    def sent_counts(self, addresses: Collection[str], block: int) -> dict[str, int]:
        """How many transactions each address had sent by ``block`` (its nonce): 0 means no coin can have
        left it by a transaction of its own (no sweep, no refund from it)."""
        targets = sorted({a.lower() for a in addresses})
        answers = self.rpc.many([("eth_getTransactionCount", [a, hex(block)]) for a in targets])
        return {a: self._read("transaction count", coerce.quantity, v) for a, v in zip(targets, answers, strict=True)}

    # --- a hash the customer pasted ------------------------------------------

    def lookup(self, txid: str, address: str) -> TxLookup:
        self._check_chain()
        address = address.lower()
        calls = [("eth_getTransactionByHash", [txid]), ("eth_getTransactionReceipt", [txid]), ("eth_blockNumber", [])]
        if self.finality != "depth":
            calls.append(("eth_getBlockByNumber", [self.finality, False]))
        tx, receipt, tip, *tagged = self.rpc.many(calls)
        tip = self._read("block number", coerce.quantity, tip)
        if tagged:  # confirmations count from the tagged block
            if tagged[0] is None:
                raise self.rpc.fail(f"the node reports no {self.finality!r} block; the asset waits for one")
            tip = min(tip, self._read(f"{self.finality} block", _block_ref, tagged[0]).number)
        if tx is None:
            return TxLookup(LookupOutcome.NOT_FOUND, tip=tip)
        if receipt is None:
            return TxLookup(LookupOutcome.PENDING, tip=tip)
        ok, block = self._read("receipt", self._receipt_state, receipt)
        if not ok:
            return TxLookup(LookupOutcome.FAILED, tip=tip, detail={"block": block.number})
        header = self.rpc.call("eth_getBlockByNumber", [hex(block.number), False])
        if header is None:
            raise self.rpc.fail(f"block {block.number} is missing")
        ref = self._read("block", _block_ref, header)
        if ref.hash != block.hash:
            return TxLookup(LookupOutcome.PENDING, tip=tip)  # its block was just replaced
        return self._read("transaction", self._judge, txid, tx, receipt, address, ref, tip)

    def _judge(self, txid: str, tx: Any, receipt: Any, address: str, block: BlockRef, tip: int) -> TxLookup:
        tx = coerce.mapping(tx, "transaction")
        native = SeenTransfer(txid=txid, index=0, to=address, amount=coerce.quantity(tx["value"]),
                              sender=coerce.address(tx["from"]), block=block)
        pays_native = coerce.optional_address(tx.get("to")) == address and native.amount > 0
        token_logs = []  # (contract, transfer) for every Transfer log to the address
        for position, log in enumerate(coerce.mapping(receipt, "receipt")["logs"]):
            log = coerce.mapping(log, "log")
            topics = [coerce.hash32(t) for t in log["topics"]]
            data = coerce.data(log["data"])
            if len(topics) == 3 and topics[0] == TRANSFER_TOPIC and topics[2][-40:] == address[2:] \
                    and len(data) == 66 and int(data, 16) > 0:
                token_logs.append((coerce.address(log["address"]), SeenTransfer(
                    txid=txid, index=position, to=address, amount=int(data, 16),
                    sender="0x" + topics[1][-40:], block=block)))
        if self.contract:
            mine = tuple(t for c, t in token_logs if c == self.contract)
            if mine:
                return TxLookup(LookupOutcome.FOUND, tip=tip, transfers=mine)
            if token_logs:
                return TxLookup(LookupOutcome.WRONG_ASSET, tip=tip, detail={"contract": token_logs[0][0]})
            if pays_native:
                return TxLookup(LookupOutcome.WRONG_ASSET, tip=tip, detail={"native": True})
            return TxLookup(LookupOutcome.OTHER_ADDRESS, tip=tip)
        if pays_native:
            return TxLookup(LookupOutcome.FOUND, tip=tip, transfers=(native,))
        if token_logs:
            return TxLookup(LookupOutcome.WRONG_ASSET, tip=tip, detail={"contract": token_logs[0][0]})
        return TxLookup(LookupOutcome.OTHER_ADDRESS, tip=tip)


def _block_ref(block: Any) -> BlockRef:
    block = coerce.mapping(block, "block")
    return BlockRef(number=coerce.quantity(block["number"]), hash=coerce.hash32(block["hash"]),
                    time=coerce.timestamp(block["timestamp"]))


def _log_indexes(receipt: Any) -> tuple[str, list[int]]:
    receipt = coerce.mapping(receipt, "receipt")
    return coerce.hash32(receipt["blockHash"]), [coerce.quantity(coerce.mapping(log, "log")["logIndex"])
                                                 for log in receipt["logs"]]


def _receipt_state(receipt: Any) -> tuple[bool, BlockRef]:
    """(succeeded, the block it is in) from a receipt."""
    receipt = coerce.mapping(receipt, "receipt")
    status = receipt.get("status")
    ok = status is None or coerce.quantity(status) == 1  # before Byzantium receipts had no status
    return ok, BlockRef(number=coerce.quantity(receipt["blockNumber"]), hash=coerce.hash32(receipt["blockHash"]))


__all__ = ["EvmWatcher", "ChainUnavailable", "TRANSFER_TOPIC"]
