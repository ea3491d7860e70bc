"""Demo payment set-up: the assets the shop accepts, deposit keys and rates.

The deposit keys are the PUBLIC test-vector keys of BIP84 and BIP44 (the
mnemonic "abandon … about"), whose private keys everybody knows. They show
how addresses are derived; an operator replaces them in the admin with keys
of their own before taking real money.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from .models import Asset, DepositKey, PaymentSettings, Rate

DEMO_ZPUB = ("zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz"
             "2AGutZYs")
DEMO_XPUB_EVM = ("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3yZdUsT8"
                 "ddYM3PwnATt")
# Their private keys are public knowledge: quotes to them are refused unless the demo allows it.
PUBLIC_TEST_KEYS = frozenset({DEMO_ZPUB, DEMO_XPUB_EVM})
USDC_ETHEREUM = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"

ASSETS = [
    # code, symbol, name, network, network name, scheme, chain id, decimals, contract, confirmations, tolerance bps
    ("btc", "BTC", "Bitcoin", "bitcoin", gettext_noop("Bitcoin"), "btc", None, 8, "", 2, 20),
    ("eth", "ETH", "Ether", "ethereum", gettext_noop("Ethereum mainnet"), "evm", 1, 18, "", 12, 20),
    ("usdc-ethereum", "USDC", "USD Coin", "ethereum", gettext_noop("Ethereum mainnet (ERC-20)"), "evm", 1, 6,
     USDC_ETHEREUM, 12, 10),
]
# Decimal places a quote is rounded up to and shown with: one satoshi; a millionth of an ether; a cent.
QUOTE_DECIMALS = {"btc": 8, "eth": 6, "usdc-ethereum": 2}
# Demo figures only, in USD per whole coin.
RATES = {"btc": "91250.00", "eth": "3120.00", "usdc-ethereum": "1.00"}


@transaction.atomic
def load_payments(*, currency: str = "USD") -> dict[str, Asset]:
    assets = {}
    for position, (code, symbol, name, network, network_name, scheme, chain_id, decimals, contract, confirmations,
                   tolerance) in enumerate(ASSETS):
        assets[code], _ = Asset.objects.update_or_create(code=code, defaults=dict(
            symbol=symbol, name=name, network=network, network_name=network_name, scheme=scheme, chain_id=chain_id,
            decimals=decimals, quote_decimals=QUOTE_DECIMALS.get(code), contract=contract,
            confirmations_required=confirmations, tolerance_bps=tolerance, position=position))
    DepositKey.objects.get_or_create(scheme="btc", defaults=dict(extended_public_key=DEMO_ZPUB,
                                                                 label="BIP84 test vector (demo only)"))
    DepositKey.objects.get_or_create(scheme="evm", defaults=dict(extended_public_key=DEMO_XPUB_EVM,
                                                                 label="BIP44 test vector (demo only)"))
    settings = PaymentSettings.current()
    # The demo's rates are typed in once; let them stay usable for a month of demo use.
    settings.rate_max_age_minutes = 30 * 24 * 60
    settings.save()
    now = timezone.now().replace(microsecond=0) - timedelta(seconds=1)
    for code, price in RATES.items():
        Rate.objects.create(asset=assets[code], currency=currency, price=Decimal(price), observed_at=now,
                            source=gettext_noop("demo figure, entered by hand"), entered_by="demo")
    return assets
