"""TRON account addresses in their three spellings. Pure code.

A TRON address is the last 20 bytes of the Keccak-256 hash of the public key,
exactly as on Ethereum, behind a version byte ``0x41`` on mainnet (and its
test networks Shasta and Nile). It is written:

* in Base58Check (``T…``, 34 characters): wallets, explorers, the HTTP API,
  and what customers copy;
* as 21-byte hex (``41…``): the node's native gRPC/HTTP APIs;
* as 20-byte hex with ``0x`` (``0x…``): TRON's Ethereum-compatible JSON-RPC,
  in ``eth_getLogs`` filters, log topics, ``from``/``to`` fields of
  transactions and receipts.

Source: TRON's developer documentation, "Account" (address format) and
"JSON-RPC API" (addresses are hex without the ``41`` prefix there).
"""

from __future__ import annotations

from bip_utils import Base58Decoder, Base58Encoder

VERSION = 0x41
_HEX = set("0123456789abcdef")


class TronAddressError(ValueError):
    pass


def to_base58(address: str) -> str:
    """Any spelling -> ``T…`` Base58Check."""
    return Base58Encoder.CheckEncode(bytes([VERSION]) + _body(address))


def to_hex20(address: str) -> str:
    """Any spelling -> ``0x`` and 40 lowercase hex digits (the JSON-RPC form)."""
    return "0x" + _body(address).hex()


def to_hex21(address: str) -> str:
    """Any spelling -> ``41`` and 40 lowercase hex digits."""
    return "41" + _body(address).hex()


def is_base58(text: str) -> bool:
    try:
        _from_base58(text)
    except TronAddressError:
        return False
    return True


def _body(address: str) -> bytes:
    """The 20 address bytes of a Base58Check, 21-byte hex or 0x-hex address."""
    value = (address or "").strip()
    if value[:1] == "T":
        return _from_base58(value)
    low = value.lower()
    if low.startswith("0x") and len(low) == 42 and set(low[2:]) <= _HEX:
        return bytes.fromhex(low[2:])
    if low.startswith("41") and len(low) == 42 and set(low) <= _HEX:
        return bytes.fromhex(low[2:])
    raise TronAddressError("not a TRON address: expected T… (34 characters), 41… or 0x… (42 hex characters)")


def _from_base58(value: str) -> bytes:
    if len(value) != 34:
        raise TronAddressError("a TRON address in Base58 has 34 characters")
    try:
        payload = Base58Decoder.CheckDecode(value)
    except Exception:  # noqa: BLE001 - bip-utils raises several types for a bad checksum or character
        raise TronAddressError("the address does not pass its Base58Check checksum") from None
    if len(payload) != 21 or payload[0] != VERSION:
        raise TronAddressError("not a TRON mainnet address (its version byte is not 0x41)")
    return payload[1:]


__all__ = ["TronAddressError", "to_base58", "to_hex20", "to_hex21", "is_base58", "VERSION"]
