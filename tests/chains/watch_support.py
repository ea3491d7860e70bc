"""A demo shop whose ETH and USDC assets live on a test chain (anvil or eth-tester)."""

from __future__ import annotations

from datetime import datetime

from web3 import Web3

from anchorgpu.chains.evm import EvmWatcher
from anchorgpu.orders.models import Order
from anchorgpu.payments.models import Asset
from anchorgpu.payments.watch import watch_poll
from tests import shop
from tests.chains import evm_support as evm

CONFIRMATIONS = 3


class ChainShop:
    def __init__(self, w3: Web3, *, url: str = ""):
        self.w3 = w3
        self.url = url
        shop.load_shop()
        self.payer = w3.eth.accounts[1]
        self.token = evm.deploy_token(w3, symbol="USDC")
        evm.mint(w3, self.token, self.payer, 10**15)
        chain_id = w3.eth.chain_id
        Asset.objects.filter(code="eth").update(chain_id=chain_id, confirmations_required=CONFIRMATIONS, watch_url=url)
        Asset.objects.filter(code="usdc-ethereum").update(chain_id=chain_id, contract=self.token,
                                                           confirmations_required=CONFIRMATIONS, watch_url=url)
        self.customer = shop.customer()

    def asset(self, code: str) -> Asset:
        return Asset.objects.get(code=code)

    def place(self, code: str, *, user=None, now: datetime | None = None) -> Order:
        return shop.place(user or self.customer, asset=code, now=now)

    def watcher(self, asset: Asset) -> EvmWatcher:
        return EvmWatcher.for_web3(self.w3, chain_id=asset.chain_id, contract=asset.contract, network=asset.network,
                                   decimals=asset.decimals, finality=asset.finality)

    def poll(self, code: str, *, now: datetime | None = None):
        asset = self.asset(code)
        return watch_poll(asset, watcher=self.watcher(asset), now=now)

    def send(self, order: Order, amount: int, *, token: str | None = None) -> str:
        """Pay ``amount`` base units to the order's deposit address in its asset (or in ``token``)."""
        quote = order.quote
        contract = token or quote.asset.contract
        if contract:
            return evm.token_transfer(self.w3, contract, self.payer, quote.address, amount)
        return evm.send_eth(self.w3, self.payer, quote.address, amount)

    def mine(self, n: int) -> None:
        evm.mine(self.w3, n)

    def paid(self, code: str = "eth") -> Order:
        """An order paid in full by one transfer, which has all its confirmations and two more."""
        order = self.place(code)
        self.send(order, order.quote.amount)
        self.mine(CONFIRMATIONS + 2)
        self.poll(code)
        order = fresh(order)
        assert order.state == "paid"
        return order


def fresh(order: Order) -> Order:
    return Order.objects.select_related("quote__asset", "booking").get(pk=order.pk)
