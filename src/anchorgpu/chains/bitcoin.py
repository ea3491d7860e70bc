"""Bitcoin data checked from its own bytes: transactions, block headers,
merkle proofs and whole blocks. No network here.

Everything an explorer says is re-derived locally before it is believed: a
transaction's id is recomputed from the bytes (double SHA-256 of the
serialisation without witness data, shown byte-reversed), a header's hash is
recomputed and held against the target its own ``bits`` field states, and a
merkle root is rebuilt from the transaction ids or from a proof.

Hashes are written as Bitcoin software shows them ("display order": the
digest's bytes reversed, lowercase hex, no ``0x``). Any input that does not
hold together raises ``BitcoinDataError``.
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from embit import compact
from embit.networks import NETWORKS
from embit.transaction import Transaction

_HEX64 = re.compile(r"[0-9a-f]{64}")
HEADER_SIZE = 80
# The easiest target each network allows (Bitcoin Core's powLimit), as compact bits.
POW_LIMIT_BITS = {"bitcoin": 0x1D00FFFF, "testnet": 0x1D00FFFF}
REGTEST_POW_LIMIT_BITS = 0x207FFFFF  # regtest: any header passes after a try or two
_NETWORK_PARAMS = {"bitcoin": NETWORKS["main"], "testnet": NETWORKS["test"]}


class BitcoinDataError(ValueError):
    """Bytes that are not what they claim to be: malformed, truncated, or not hashing to the expected value."""


def sha256d(data: bytes) -> bytes:
    return hashlib.sha256(hashlib.sha256(data).digest()).digest()


def display_hex(digest: bytes) -> str:
    """A 32-byte digest as Bitcoin shows it: bytes reversed, lowercase hex."""
    return digest[::-1].hex()


def internal_bytes(display: str, what: str = "hash") -> bytes:
    """The inverse of ``display_hex``, refusing anything but 64 hex digits."""
    if not isinstance(display, str) or not _HEX64.fullmatch(display.strip().lower()):
        raise BitcoinDataError(f"{what} is not 64 hexadecimal digits")
    return bytes.fromhex(display.strip().lower())[::-1]


def hex_to_bytes(text, what: str = "data") -> bytes:
    """Strict hex decoding (surrounding whitespace allowed, nothing else)."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("ascii")
        except UnicodeDecodeError:
            raise BitcoinDataError(f"{what} is not hexadecimal text") from None
    if not isinstance(text, str):
        raise BitcoinDataError(f"{what} is not hexadecimal text")
    text = text.strip()
    if not text:
        raise BitcoinDataError(f"{what} is empty")
    if len(text) % 2:
        raise BitcoinDataError(f"{what} has an odd number of hex digits")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise BitcoinDataError(f"{what} is not hexadecimal") from None


def network_params(network: str) -> dict:
    try:
        return _NETWORK_PARAMS[network]
    except KeyError:
        raise ValueError(f"Unknown Bitcoin network {network!r}: use one of {sorted(_NETWORK_PARAMS)}") from None


class _ExactReader(io.BytesIO):
    """A byte stream whose ``read(n)`` either returns n bytes or raises: embit
    itself does not notice a short read, so truncated data would otherwise
    parse into made-up numbers."""

    def read(self, size=-1):
        data = super().read(size)
        if size is not None and size >= 0 and len(data) != size:
            raise BitcoinDataError("the data ends too early")
        return data


# --- transactions -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TxOutput:
    index: int
    value: int  # satoshi
    address: str | None  # None for scripts without an address form (bare public key, OP_RETURN, ...)
    script_pubkey: str  # hex


@dataclass(frozen=True)
class ParsedTransaction:
    txid: str
    outputs: tuple[TxOutput, ...]
    has_witness: bool
    size: int  # bytes, witness included

    def paying(self, address: str) -> list[TxOutput]:
        """The outputs with a positive value paying ``address`` (bech32 compared case-insensitively)."""
        wanted = address_key(address)
        return [out for out in self.outputs if out.value > 0 and out.address and address_key(out.address) == wanted]


def address_key(address: str) -> str:
    """Bech32 addresses are case-insensitive and shown lowercase; base58 ones are case-sensitive."""
    address = (address or "").strip()
    lowered = address.lower()
    return lowered if lowered.startswith(("bc1", "tb1", "bcrt1")) else address


def _txid_of(tx: Transaction) -> str:
    """Double SHA-256 over the serialisation without marker, flag and witnesses."""
    body = bytearray(tx.version.to_bytes(4, "little"))
    body += compact.to_bytes(len(tx.vin))
    for txin in tx.vin:
        body += txin.txid[::-1] + txin.vout.to_bytes(4, "little") + txin.script_sig.serialize()
        body += txin.sequence.to_bytes(4, "little")
    body += compact.to_bytes(len(tx.vout))
    for txout in tx.vout:
        body += txout.value.to_bytes(8, "little") + txout.script_pubkey.serialize()
    body += tx.locktime.to_bytes(4, "little")
    return display_hex(sha256d(bytes(body)))


def _read_transaction(stream: _ExactReader, network: str) -> ParsedTransaction:
    params = network_params(network)
    start = stream.tell()
    marker = stream.read(6)[4:]  # after the version: a witness marker and flag, or the input count
    stream.seek(start)
    flagged = marker == b"\x00\x01"
    if marker[:1] == b"\x00" and not flagged:
        raise BitcoinDataError("transaction has no inputs or a bad witness flag")
    try:
        tx = Transaction.read_from(stream)
    except BitcoinDataError:
        raise
    except Exception as exc:  # embit raises several types for malformed data  # noqa: BLE001
        raise BitcoinDataError(f"not a transaction ({type(exc).__name__})") from None
    if not tx.vin or not tx.vout:
        raise BitcoinDataError("transaction has no inputs or no outputs")
    if flagged and not tx.is_segwit:
        raise BitcoinDataError("transaction has a witness flag but no witness data")
    outputs = []
    for index, txout in enumerate(tx.vout):
        if txout.value > 21_000_000 * 100_000_000:
            raise BitcoinDataError(f"output {index} is worth more than all bitcoin")
        try:
            address = txout.script_pubkey.address(params) if txout.script_pubkey.script_type() else None
        except Exception:  # noqa: BLE001 - an unusual script is simply one without an address
            address = None
        outputs.append(TxOutput(index, txout.value, address, txout.script_pubkey.data.hex()))
    return ParsedTransaction(txid=_txid_of(tx), outputs=tuple(outputs), has_witness=flagged,
                             size=stream.tell() - start)


def parse_transaction(raw, *, network: str = "bitcoin") -> ParsedTransaction:
    """One whole transaction from raw bytes, or from hex text (``str``); trailing bytes are refused."""
    data = bytes(raw) if isinstance(raw, (bytes, bytearray)) else hex_to_bytes(raw, "transaction")
    stream = _ExactReader(bytes(data))
    parsed = _read_transaction(stream, network)
    if stream.tell() != len(data):
        raise BitcoinDataError("unexpected bytes after the transaction")
    return parsed


# --- block headers ----------------------------------------------------------------------------------------------


def bits_to_target(bits: int) -> int:
    """Decode the compact ``bits`` field into the 256-bit target, refusing the forms Bitcoin Core refuses."""
    if not isinstance(bits, int) or not 0 <= bits <= 0xFFFFFFFF:
        raise BitcoinDataError("bits is not a 32-bit number")
    exponent, mantissa = bits >> 24, bits & 0x007FFFFF
    if bits & 0x00800000:
        raise BitcoinDataError(f"bits {bits:#010x} encode a negative target")
    target = mantissa >> 8 * (3 - exponent) if exponent <= 3 else mantissa << 8 * (exponent - 3)
    if target == 0:
        raise BitcoinDataError(f"bits {bits:#010x} encode a zero target")
    if target >= 1 << 256:
        raise BitcoinDataError(f"bits {bits:#010x} encode a target above 256 bits")
    return target


@dataclass(frozen=True)
class BlockHeader:
    version: int
    prev_hash: str
    merkle_root: str
    time: int  # seconds since 1970, as the miner wrote it
    bits: int
    nonce: int
    hash: str

    @property
    def target(self) -> int:
        return bits_to_target(self.bits)

    @property
    def timestamp(self) -> datetime:
        return datetime.fromtimestamp(self.time, tz=UTC)

    def meets_target(self) -> bool:
        return int(self.hash, 16) <= self.target

    def check_proof_of_work(self, *, pow_limit_bits: int | None = None) -> None:
        """Raise unless the hash meets the header's own target (and that target is no easier than the limit)."""
        target = self.target
        if pow_limit_bits is not None and target > bits_to_target(pow_limit_bits):
            raise BitcoinDataError(f"block {self.hash} claims an easier target ({self.bits:#010x}) than the "
                                   f"network allows ({pow_limit_bits:#010x})")
        if int(self.hash, 16) > target:
            raise BitcoinDataError(f"block {self.hash} does not meet its own target {self.bits:#010x}")


def parse_header(raw) -> BlockHeader:
    """An 80-byte header, given as bytes or hex."""
    data = hex_to_bytes(raw, "block header") if isinstance(raw, str) else bytes(raw)
    if len(data) != HEADER_SIZE:
        raise BitcoinDataError(f"a block header is {HEADER_SIZE} bytes, not {len(data)}")
    return BlockHeader(
        version=int.from_bytes(data[0:4], "little", signed=True),
        prev_hash=display_hex(data[4:36]),
        merkle_root=display_hex(data[36:68]),
        time=int.from_bytes(data[68:72], "little"),
        bits=int.from_bytes(data[72:76], "little"),
        nonce=int.from_bytes(data[76:80], "little"),
        hash=display_hex(sha256d(data)),
    )


# --- merkle trees -----------------------------------------------------------------------------------------------


def merkle_root(txids) -> str:
    """The merkle root of transaction ids in block order (an odd level repeats its last node)."""
    level = [internal_bytes(txid, "transaction id") for txid in txids]
    if not level:
        raise BitcoinDataError("a block has at least one transaction")
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        level = [sha256d(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
    return display_hex(level[0])


def merkle_proof_root(txid: str, branch, pos) -> str:
    """The root that ``txid`` at position ``pos`` leads to through ``branch`` (siblings, leaf first)."""
    if not isinstance(branch, (list, tuple)) or len(branch) > 32:
        raise BitcoinDataError("a merkle branch is a list of at most 32 hashes")
    if isinstance(pos, bool) or not isinstance(pos, int) or pos < 0 or pos >= 1 << len(branch):
        raise BitcoinDataError("the merkle position does not fit the branch")
    node = internal_bytes(txid, "transaction id")
    for sibling in branch:
        other = internal_bytes(sibling, "merkle branch hash")
        node = sha256d(other + node) if pos & 1 else sha256d(node + other)
        pos >>= 1
    return display_hex(node)


def verify_merkle_proof(txid: str, proof: dict, header: BlockHeader) -> None:
    """Check an Esplora ``/tx/:txid/merkle-proof`` answer (``{block_height, merkle, pos}``) against a header."""
    if not isinstance(proof, dict):
        raise BitcoinDataError("a merkle proof is an object with merkle and pos")
    root = merkle_proof_root(txid, proof.get("merkle"), proof.get("pos"))
    if root != header.merkle_root:
        raise BitcoinDataError(f"the merkle proof of {txid} does not lead to the merkle root of block {header.hash}")


# --- whole blocks -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedBlock:
    header: BlockHeader
    transactions: tuple[ParsedTransaction, ...]

    @property
    def hash(self) -> str:
        return self.header.hash


def parse_block(raw: bytes, *, network: str = "bitcoin") -> ParsedBlock:
    """A raw block (header, transaction count, transactions) whose transaction ids rebuild its merkle root.

    Also refuses duplicate transaction ids, the "mutated block" form (CVE-2012-2459) that a merkle root cannot tell
    apart from the real block.
    """
    data = bytes(raw)
    if len(data) < HEADER_SIZE + 1:
        raise BitcoinDataError("a block is a header and at least one transaction")
    header = parse_header(data[:HEADER_SIZE])
    stream = _ExactReader(data)
    stream.seek(HEADER_SIZE)
    try:
        count = compact.read_from(stream)
    except BitcoinDataError:
        raise
    except Exception:  # noqa: BLE001
        raise BitcoinDataError("the transaction count is unreadable") from None
    if count == 0 or count > len(data):
        raise BitcoinDataError(f"a block cannot hold {count} transactions in {len(data)} bytes")
    transactions = tuple(_read_transaction(stream, network) for _ in range(count))
    if stream.tell() != len(data):
        raise BitcoinDataError("unexpected bytes after the last transaction")
    txids = [tx.txid for tx in transactions]
    if len(set(txids)) != len(txids):
        raise BitcoinDataError(f"block {header.hash} lists a transaction twice")
    if merkle_root(txids) != header.merkle_root:
        raise BitcoinDataError(f"the transactions of block {header.hash} do not rebuild its merkle root")
    return ParsedBlock(header=header, transactions=transactions)
