"""Transaction ids a customer pastes after paying: checked for the asset's
format and normalised before anything looks them up. Pure domain code."""

from __future__ import annotations

import re

_HEX64 = re.compile(r"[0-9a-f]{64}")


class TxIdError(ValueError):
    pass


def normalise_txid(text: str, *, chain: str) -> str:
    """``chain`` is "btc" (64 hex digits, no prefix) or "evm" (``0x`` and 64 hex digits)."""
    value = (text or "").strip().lower()
    if chain == "btc":
        if value.startswith("0x"):
            raise TxIdError("A Bitcoin transaction id has no “0x”: 64 hexadecimal characters.")
        if not _HEX64.fullmatch(value):
            raise TxIdError("A Bitcoin transaction id is 64 hexadecimal characters.")
        return value
    if chain == "evm":
        if not value.startswith("0x") or not _HEX64.fullmatch(value[2:]):
            raise TxIdError("An Ethereum transaction hash is “0x” followed by 64 hexadecimal characters.")
        if value == "0x" + "0" * 64:
            raise TxIdError("That transaction hash is all zeros.")
        return value
    raise TxIdError(f"Unknown chain “{chain}”.")
