"""Deposit addresses derived from the operator's account-level extended
PUBLIC key (bip-utils). No private key is ever given to, or made by, the shop.

* Bitcoin: BIP84 (native SegWit, ``bc1…``) from a ``zpub`` (``vpub`` on testnet).
* EVM assets (ETH and ERC-20 tokens, on any EVM network): BIP44 coin 60 from
  an ``xpub``. The index sequence is shared by every EVM network, so an address
  belongs to one order on all of them: a transfer sent on the wrong EVM network
  still reaches a key the operator holds, and names its order.
* TRON (TRC-20 tokens): BIP44 coin 195 from an ``xpub``; Base58Check ``T…``
  addresses (``anchorgpu.chains.tron_address``).

Addresses are on the external chain (``…/0/index``); each order takes a fresh
index, so no address is ever reused.
"""

from __future__ import annotations

from enum import Enum

from bip_utils import Bip44, Bip44Changes, Bip44Coins, Bip84, Bip84Coins

MAX_INDEX = 2**31 - 1  # non-hardened child indexes


class Scheme(str, Enum):
    BTC = "btc"
    BTC_TESTNET = "btc-testnet"
    EVM = "evm"
    TRON = "tron"


_FACTORY = {
    Scheme.BTC: (Bip84, Bip84Coins.BITCOIN),
    Scheme.BTC_TESTNET: (Bip84, Bip84Coins.BITCOIN_TESTNET),
    Scheme.EVM: (Bip44, Bip44Coins.ETHEREUM),
    Scheme.TRON: (Bip44, Bip44Coins.TRON),
}


class AddressError(ValueError):
    pass


_ACCOUNT_LEVEL = "Give the account-level extended public key (depth 3: m/purpose'/coin'/account')."


def _account(extended_key: str, scheme: Scheme):
    extended_key = (extended_key or "").strip()
    if "prv" in extended_key[:4]:
        raise AddressError("That is an extended PRIVATE key. The shop takes only the account's public key "
                           "(xpub / zpub); treat the private key as exposed and move its funds.")
    cls, coin = _FACTORY[Scheme(scheme)]
    try:
        account = cls.FromExtendedKey(extended_key.strip(), coin)
    except Exception as exc:  # bip-utils raises several types for malformed keys  # noqa: BLE001
        if "Depth" in str(exc):
            raise AddressError(_ACCOUNT_LEVEL) from None
        raise AddressError(f"Not a valid extended public key for {Scheme(scheme).value}.") from None
    if not account.IsPublicOnly():
        raise AddressError("The shop takes only an extended PUBLIC key.")
    if account.Level() != 3:
        raise AddressError(_ACCOUNT_LEVEL)
    return account


def check_account_key(extended_key: str, scheme: Scheme | str) -> None:
    """Refuse anything but a usable account-level public key (for the operator's settings form)."""
    _account(extended_key, Scheme(scheme))


def derive_address(extended_key: str, scheme: Scheme | str, index: int) -> str:
    if not isinstance(index, int) or not 0 <= index <= MAX_INDEX:
        raise AddressError(f"The address index must be a whole number from 0 to {MAX_INDEX}.")
    account = _account(extended_key, Scheme(scheme))
    return account.Change(Bip44Changes.CHAIN_EXT).AddressIndex(index).PublicKey().ToAddress()
