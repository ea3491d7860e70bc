"""Checking an address a customer gives (for a refund). Pure domain code.

Bitcoin: native SegWit / Taproot (bech32, bech32m) or legacy base58check
(P2PKH, P2SH) on the right network. EVM: ``0x`` and 40 hex digits; a
mixed-case address must carry a valid EIP-55 checksum (a typo is caught).
TRON: Base58Check ``T…`` with the mainnet version byte (the form wallets
show; a hex form is refused, as customers never see it). The result is the
canonical form (lower-case bech32, EIP-55 checksummed, Base58Check)."""

from __future__ import annotations

from bip_utils import Base58Decoder, SegwitBech32Decoder
from Crypto.Hash import keccak

from anchorgpu.chains.tron_address import TronAddressError, to_base58, to_hex20
from anchorgpu.messages import DomainError, gettext_noop

from .addresses import Scheme

_HRP = {Scheme.BTC: "bc", Scheme.BTC_TESTNET: "tb"}
_BASE58_VERSIONS = {Scheme.BTC: {0x00, 0x05}, Scheme.BTC_TESTNET: {0x6F, 0xC4}}
_HEX = set("0123456789abcdef")


class AddressCheckError(DomainError):
    pass


def _eip55(hex40: str) -> str:
    digest = keccak.new(digest_bits=256, data=hex40.encode("ascii")).hexdigest()
    return "0x" + "".join(c.upper() if c.isalpha() and int(digest[i], 16) >= 8 else c for i, c in enumerate(hex40))


def check_address(text: str, scheme: Scheme | str) -> str:
    scheme = Scheme(scheme)
    value = (text or "").strip()
    if not value:
        raise AddressCheckError(gettext_noop("Give an address."))
    if len(value) > 100:
        raise AddressCheckError(gettext_noop("That is far too long to be an address."))
    if scheme is Scheme.EVM:
        body = value[2:] if value[:2] in ("0x", "0X") else None
        if body is None or len(body) != 40 or not set(body.lower()) <= _HEX:
            raise AddressCheckError(gettext_noop("An Ethereum address is “0x” followed by 40 hexadecimal characters."))
        checksummed = _eip55(body.lower())
        if body not in (body.lower(), body.upper()) and "0x" + body != checksummed:
            raise AddressCheckError(
                gettext_noop(
                    "The address's mixed upper and lower case does not match its checksum: "
                    "check it for a typing mistake."
                )
            )
        if int(body, 16) == 0:
            raise AddressCheckError(gettext_noop("That is the zero address; funds sent there are lost."))
        return checksummed
    if scheme is Scheme.TRON:
        return _tron(value)
    hrp = _HRP[scheme]
    if value.lower().startswith(hrp + "1"):
        try:
            version, program = SegwitBech32Decoder.Decode(hrp, value.lower() if value.islower() or value.isupper()
                                                          else value)
        except Exception:  # noqa: BLE001 - bip-utils raises several types
            raise AddressCheckError(gettext_noop(
                "That SegWit address does not pass its checksum: check it for a typing mistake.")) from None
        if not (version == 0 and len(program) in (20, 32)) and not (version == 1 and len(program) == 32):
            raise AddressCheckError(gettext_noop("That SegWit address is of a kind we do not send to."))
        return value.lower()
    try:
        payload = Base58Decoder.CheckDecode(value)
    except Exception:  # noqa: BLE001
        raise AddressCheckError(gettext_noop("That is not a valid Bitcoin address for this network.")) from None
    if len(payload) != 21 or payload[0] not in _BASE58_VERSIONS[scheme]:
        raise AddressCheckError(gettext_noop("That is not a valid Bitcoin address for this network."))
    return value


def _tron(value: str) -> str:
    if value[:2] in ("0x", "0X") or value[:2] == "41":
        raise AddressCheckError(gettext_noop("Give the TRON address as your wallet shows it: 34 characters "
                                             "starting with “T”."))
    if not value.startswith("T") or len(value) != 34:
        raise AddressCheckError(gettext_noop("A TRON address is 34 characters starting with “T”."))
    try:
        hex20 = to_hex20(value)
    except TronAddressError:
        raise AddressCheckError(gettext_noop("That TRON address does not pass its checksum: check it for a typing "
                                             "mistake.")) from None
    if int(hex20, 16) == 0:
        raise AddressCheckError(gettext_noop("That is the zero address; funds sent there are lost."))
    return to_base58(value)
