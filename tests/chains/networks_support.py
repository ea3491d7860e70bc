"""A shop that takes USDT on several EVM networks at once, each network its own chain.

On anvil every network is its own node started with the network's real chain id; on eth-tester every network
is its own in-process chain (all with eth-tester's one chain id, so the chain-id checks are tested on anvil).
Each chain gets the test ERC-20 deployed as that network's "USDT", with the decimals the real token has there.

Facts, with their sources:
* chain ids: the EIP-155 registry (chainid.network, github.com/ethereum-lists/chains): Ethereum 1, Base 8453,
  Polygon PoS 137, BNB Smart Chain 56, Arbitrum One 42161;
* USDT's decimals: 6 on Ethereum (Tether's contract 0xdAC17F958D2ee523a2206206994597C13D831ec7), Polygon and
  Base; 18 on BNB Chain (the Binance-Peg BSC-USD token 0x55d398326f99059fF775485246999027B3197955, as BscScan's
  token page shows it).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.utils import timezone
from web3 import Web3

from anchorgpu.chains.evm import EvmWatcher
from anchorgpu.orders.models import Order
from anchorgpu.payments.models import Asset, Rate
from anchorgpu.payments.watch import watch_poll
from tests import shop
from tests.chains import evm_support as evm

CONFIRMATIONS = 3
SLOTS_IN_AN_EPOCH = 4  # anvil's "safe" block is this many below the tip, "finalized" twice as many (seen on 1.7.1)


@dataclass(frozen=True)
class Network:
    slug: str
    chain_id: int
    name: str  # as the asset's network_name
    usdt_decimals: int

    @property
    def code(self) -> str:
        return f"usdt-{self.slug}"


NETWORKS = (
    Network("ethereum", 1, "Ethereum", 6),
    Network("base", 8453, "Base", 6),
    Network("polygon", 137, "Polygon", 6),
    Network("bsc", 56, "BNB Chain", 18),
)
BY_SLUG = {n.slug: n for n in NETWORKS}


class NetworkShop:
    """``chains``: network slug -> (web3, URL or "" on eth-tester)."""

    def __init__(self, chains: dict[str, tuple[Web3, str]]):
        self.chains = chains
        shop.load_shop()
        self.payer = {}
        self.token = {}
        now = timezone.now().replace(microsecond=0)
        for position, network in enumerate(NETWORKS, start=10):
            w3, url = chains[network.slug]
            payer = w3.eth.accounts[1]
            token = evm.deploy_token(w3, symbol="USDT", name="Tether USD (test)", decimals=network.usdt_decimals)
            evm.mint(w3, token, payer, 10 ** (network.usdt_decimals + 9))
            self.payer[network.slug], self.token[network.slug] = payer, token
            asset, _ = Asset.objects.update_or_create(code=network.code, defaults=dict(
                symbol="USDT", name="Tether USD", network=network.slug, network_name=network.name, scheme="evm",
                chain_id=w3.eth.chain_id, decimals=network.usdt_decimals, quote_decimals=2, contract=token,
                confirmations_required=CONFIRMATIONS, finality="depth", tolerance_bps=10, watch_url=url,
                position=position, is_active=True))
            Rate.objects.create(asset=asset, currency="USD", price=Decimal("1.00"), observed_at=now,
                                source="test figure", entered_by="test")
        self.customer = shop.customer()

    def w3(self, slug: str) -> Web3:
        return self.chains[slug][0]

    def asset(self, slug: str) -> Asset:
        return Asset.objects.get(code=BY_SLUG[slug].code)

    def place(self, slug: str, *, user=None) -> Order:
        return shop.place(user or self.customer, asset=BY_SLUG[slug].code)

    def watcher(self, asset: Asset) -> EvmWatcher:
        """The watcher of ``asset`` on its own network's chain (an eth-tester chain has no URL)."""
        return EvmWatcher.for_web3(self.w3(asset.network), chain_id=asset.chain_id, contract=asset.contract,
                                   network=asset.network, decimals=asset.decimals, finality=asset.finality)

    def poll(self, slug: str):
        asset = self.asset(slug)
        return watch_poll(asset, watcher=self.watcher(asset))

    def poll_all(self) -> dict:
        return {n.slug: self.poll(n.slug) for n in NETWORKS}

    def send(self, order: Order, amount: int, *, on: str | None = None, token: str | None = None) -> str:
        """Pay ``amount`` base units of USDT to the order's deposit address on network ``on`` (default: the
        network it quoted), or of ``token`` there."""
        slug = on or order.quote.asset.network
        w3 = self.w3(slug)
        return evm.token_transfer(w3, token or self.token[slug], self.payer[slug], order.quote.address, amount)

    def mine(self, n: int, *, on: str | None = None) -> None:
        for slug in [on] if on else list(self.chains):
            evm.mine(self.w3(slug), n)

