"""The one spelling of a deposit address that watchers and the payment code compare. Pure code.

EVM and Bitcoin addresses compare lowercased (EIP-55 and bech32 case carries no
meaning). A TRON Base58Check address is case-sensitive, so it is compared in the
form TRON's JSON-RPC writes it: ``0x`` and its 20 bytes in lowercase hex, which
is also what a TRC-20 ``Transfer`` log's topic holds.
"""

from __future__ import annotations

from .tron_address import TronAddressError, to_hex20


def watch_key(address: str) -> str:
    value = (address or "").strip()
    if value[:1] == "T" and len(value) == 34:
        try:
            return to_hex20(value)
        except TronAddressError:
            pass  # not a valid TRON address: compared as typed, it matches nothing
    return value.lower()


__all__ = ["watch_key"]
