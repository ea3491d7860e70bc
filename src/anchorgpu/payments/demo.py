"""Demo payment set-up: the assets the shop accepts, deposit keys and rates.

The deposit keys are the PUBLIC test-vector keys of BIP84 and BIP44 (the
mnemonic "abandon … about"), whose private keys everybody knows. They show
how addresses are derived; an operator replaces them in the admin with keys
of their own before taking real money.

The stablecoins are offered on the networks an operator would usually enable: each (coin, network) pair is
its own Asset with its own token contract, decimals, chain id and finality rule. Contract addresses are the
issuers' published mainnet contracts:

* Tether (USDT): https://tether.to/en/supported-protocols/ (Ethereum, TRON); Arbitrum One and Polygon PoS
  carry USDT0, Tether's cross-chain USDT, at the contracts of the earlier bridged USDT
  (https://docs.usdt0.to/technical-documentation/deployments).
* Circle (USDC): https://developers.circle.com/stablecoins/usdc-contract-addresses (native USDC).
* BNB Smart Chain: Binance-Peg tokens, issued by Binance against USDT/USDC it holds
  (https://www.binance.com/en/collateral-btokens); both have 18 decimals there, not 6.

Left out on purpose:

* USDC on TRON: Circle stopped minting USDC on TRON on 20 February 2024 and ended its support in February
  2025 (Circle's announcement "Circle to discontinue USDC on TRON"), so it is not a coin to take payment in.
* USDT on Base: Tether issues none on Base; the token that circulates there is a bridged copy that neither
  Tether nor Base endorses.

Finality: where the network's "finalized" block tag means something final (TRON's solidified block, an L2's
batch finalized on Ethereum, Polygon PoS milestones, BNB Chain's fast finality), a transfer counts once its
block is finalized (``finality="finalized"``, 1 confirmation from that block). Ether and the Ethereum
tokens count 12 blocks from the tip, as before.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import NamedTuple

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from .models import Asset, DepositKey, PaymentSettings, Rate

DEMO_ZPUB = ("zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz"
             "2AGutZYs")
DEMO_XPUB_EVM = ("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3yZdUsT8"
                 "ddYM3PwnATt")
# The account key m/44'/195'/0' of the same BIP39 test mnemonic ("abandon" × 11, "about"), TRON's BIP44 coin.
DEMO_XPUB_TRON = ("xpub6D1AabNHCupeiLM65ZR9UStMhJ1vCpyV4XbZdyhMZBiJXALQtmn9p42VTQckoHVn8WNqS7dqnJokZHAHcHGoaQgmv8D45o"
                  "NUKx6DZMNZBCd")
# Their private keys are public knowledge: quotes to them are refused unless the demo allows it.
PUBLIC_TEST_KEYS = frozenset({DEMO_ZPUB, DEMO_XPUB_EVM, DEMO_XPUB_TRON})

# Token contracts (sources in the module's docstring).
USDC_ETHEREUM = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"
USDT_ETHEREUM = "0xdAC17F958D2ee523a2206206994597C13D831ec7"
USDT_TRON = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
USDC_BASE = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
USDC_ARBITRUM = "0xaf88d065e77c8cC2239327C5EDb3A432268e5831"
USDT_ARBITRUM = "0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9"
USDC_POLYGON = "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"
USDT_POLYGON = "0xc2132D05D31c914a87C6611C10748AEb04B58e8F"
USDC_BSC = "0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d"
USDT_BSC = "0x55d398326f99059fF775485246999027B3197955"

# Chain ids (eth_chainId). TRON mainnet answers 0x2b6653dc = 728126428, the last four bytes of its genesis
# block id (https://developers.tron.network/reference-link/eth_chainid).
CHAIN_IDS = {"ethereum": 1, "tron": 728126428, "base": 8453, "arbitrum": 42161, "polygon": 137, "bsc": 56}
NETWORK_NAMES = {
    "ethereum": gettext_noop("Ethereum mainnet (ERC-20)"), "tron": gettext_noop("TRON (TRC-20)"),
    "base": gettext_noop("Base"), "arbitrum": gettext_noop("Arbitrum One"), "polygon": gettext_noop("Polygon PoS"),
    "bsc": gettext_noop("BNB Smart Chain (BEP-20)"),
}
COIN_NAMES = {"USDT": "Tether USD", "USDC": "USD Coin"}


class DemoAsset(NamedTuple):
    code: str
    symbol: str
    name: str
    network: str
    network_name: str
    scheme: str
    chain_id: int | None
    decimals: int
    contract: str
    confirmations: int
    tolerance_bps: int
    quote_decimals: int
    finality: str = "depth"
    rate: str = "1.00"  # demo figure, USD per whole coin


def _stablecoin(symbol: str, network: str, contract: str, *, decimals: int = 6, finality: str = "finalized",
                confirmations: int = 1) -> DemoAsset:
    scheme = "tron" if network == "tron" else "evm"
    return DemoAsset(f"{symbol.lower()}-{network}", symbol, COIN_NAMES[symbol], network, NETWORK_NAMES[network],
                     scheme, CHAIN_IDS[network], decimals, contract, confirmations, 10, 2, finality)


# Quote decimals: one satoshi; a millionth of an ether; a cent. Rates are demo figures only.
ASSETS = [
    DemoAsset("btc", "BTC", "Bitcoin", "bitcoin", gettext_noop("Bitcoin"), "btc", None, 8, "", 2, 20, 8,
              rate="91250.00"),
    DemoAsset("eth", "ETH", "Ether", "ethereum", gettext_noop("Ethereum mainnet"), "evm", 1, 18, "", 12, 20, 6,
              rate="3120.00"),
    _stablecoin("USDT", "ethereum", USDT_ETHEREUM, finality="depth", confirmations=12),
    _stablecoin("USDT", "tron", USDT_TRON),
    _stablecoin("USDT", "arbitrum", USDT_ARBITRUM),
    _stablecoin("USDT", "polygon", USDT_POLYGON),
    _stablecoin("USDT", "bsc", USDT_BSC, decimals=18),
    _stablecoin("USDC", "ethereum", USDC_ETHEREUM, finality="depth", confirmations=12),
    _stablecoin("USDC", "base", USDC_BASE),
    _stablecoin("USDC", "arbitrum", USDC_ARBITRUM),
    _stablecoin("USDC", "polygon", USDC_POLYGON),
    _stablecoin("USDC", "bsc", USDC_BSC, decimals=18),
]
QUOTE_DECIMALS = {a.code: a.quote_decimals for a in ASSETS}
RATES = {a.code: a.rate for a in ASSETS}
DEPOSIT_KEYS = [("btc", DEMO_ZPUB, "BIP84 test vector (demo only)"),
                ("evm", DEMO_XPUB_EVM, "BIP44 test vector (demo only)"),
                ("tron", DEMO_XPUB_TRON, "BIP44 coin 195 test vector (demo only)")]


@transaction.atomic
def load_payments(*, currency: str = "USD") -> dict[str, Asset]:
    assets = {}
    for position, row in enumerate(ASSETS):
        assets[row.code], _ = Asset.objects.update_or_create(code=row.code, defaults=dict(
            symbol=row.symbol, name=row.name, network=row.network, network_name=row.network_name,
            scheme=row.scheme, chain_id=row.chain_id, decimals=row.decimals, quote_decimals=row.quote_decimals,
            contract=row.contract, confirmations_required=row.confirmations, finality=row.finality,
            tolerance_bps=row.tolerance_bps, position=position))
    for scheme, key, label in DEPOSIT_KEYS:
        DepositKey.objects.get_or_create(scheme=scheme, defaults=dict(extended_public_key=key, label=label))
    settings = PaymentSettings.current()
    # The demo's rates are typed in once; let them stay usable for a month of demo use.
    settings.rate_max_age_minutes = 30 * 24 * 60
    settings.save()
    now = timezone.now().replace(microsecond=0) - timedelta(seconds=1)
    for code, price in RATES.items():
        Rate.objects.create(asset=assets[code], currency=currency, price=Decimal(price), observed_at=now,
                            source=gettext_noop("demo figure, entered by hand"), entered_by="demo")
    return assets
