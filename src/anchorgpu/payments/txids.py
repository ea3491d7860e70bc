"""Transaction ids a customer pastes after paying: checked for the asset's
format and normalised before anything looks them up. Pure domain code."""

from __future__ import annotations

import re

from anchorgpu.messages import DomainError, gettext_noop

_HEX64 = re.compile(r"[0-9a-f]{64}")


class TxIdError(DomainError):
    pass


def normalise_txid(text: str, *, chain: str) -> str:
    """``chain`` is "btc" (64 hex digits, no prefix), "evm" (``0x`` and 64 hex digits) or "tron" (64 hex
    digits as TRON's explorers show them, or with ``0x`` as its JSON-RPC writes them; kept with ``0x`` so the
    pasted id and the watcher's read of it are one transaction)."""
    value = (text or "").strip().lower()
    if chain == "btc":
        if value.startswith("0x"):
            raise TxIdError(gettext_noop("A Bitcoin transaction id has no “0x”: 64 hexadecimal characters."))
        if not _HEX64.fullmatch(value):
            raise TxIdError(gettext_noop("A Bitcoin transaction id is 64 hexadecimal characters."))
        return value
    if chain == "evm":
        if not value.startswith("0x") or not _HEX64.fullmatch(value[2:]):
            raise TxIdError(gettext_noop("An Ethereum transaction hash is “0x” followed by 64 hexadecimal characters."))
        if value == "0x" + "0" * 64:
            raise TxIdError(gettext_noop("That transaction hash is all zeros."))
        return value
    if chain == "tron":
        body = value[2:] if value.startswith("0x") else value
        if not _HEX64.fullmatch(body):
            raise TxIdError(gettext_noop("A TRON transaction id is 64 hexadecimal characters."))
        if body == "0" * 64:
            raise TxIdError(gettext_noop("That transaction id is all zeros."))
        return "0x" + body
    raise TxIdError(gettext_noop("Unknown chain “%(chain)s”."), chain=chain)
