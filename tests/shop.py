"""Builders for order and payment tests: a demo shop that takes crypto, a
customer, and orders placed through the real services."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model

from anchorgpu.catalog.models import Environment, Product
from anchorgpu.demo import load_catalog, load_fleet, load_price_list
from anchorgpu.orders.services import Checkout, order_place
from anchorgpu.orders.ssh_keys import parse_keys
from anchorgpu.payments.demo import load_payments
from anchorgpu.payments.models import Asset
from anchorgpu.payments.transfers import TransferInput, transfer_record

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop"
TXID_BTC = "a1" * 32
TXID_EVM = "0x" + "b2" * 32


def load_shop() -> dict[str, Product]:
    products = load_catalog()
    load_price_list(products)
    load_fleet(products)
    load_payments()
    return products


def customer(email: str = "alice@example.com", password: str = "correct horse battery"):
    User = get_user_model()
    return User.objects.create_user(username=email, email=email, password=password, first_name="Alice")


def place(user, *, product: str = "h100-sxm-80gb", quantity: int = 1, term_days: int = 3,
          start: datetime | None = None, asset: str = "btc", environment: str | None = None,
          options: tuple[str, ...] = (), now: datetime | None = None, **billing):
    """An order placed through the checkout's service; ``billing`` overrides the customer's details (name,
    country, company, vat_id, business, billing_address, language)."""
    prod = Product.objects.get(slug=product)
    env_slug = environment or {"cuda": "pytorch-cuda124", "rocm": "pytorch-rocm63",
                               "blackwell": "pytorch-cuda128"}[prod.stack]
    request = Checkout(product=prod, quantity=quantity, term_days=term_days, start=start,
                       environment=Environment.objects.get(slug=env_slug), asset=Asset.objects.get(code=asset),
                       name="Alice Example", email=user.email, country="PT", ssh_keys=parse_keys(ED25519),
                       options=list(options))
    if billing:
        request = replace(request, **billing)
    return order_place(user=user, request=request, now=now)


def txid(chain: str, n: int = 0) -> str:
    """The ``n``-th made-up transaction id of a chain family (0: TXID_BTC or TXID_EVM)."""
    base = TXID_EVM if chain == "evm" else TXID_BTC
    return base if n == 0 else base[:-4] + f"{n:04x}"


def pay(order, *, amount: int | None = None, txid: str | None = None, index: int = 0, confirmations: int = 6,
        seen_at: datetime | None = None, actor: str = "operator", now: datetime | None = None,
        shared_statement: str = ""):
    """Record a transfer of ``amount`` base units (default: the quoted amount), typed as an operator would."""
    quote = order.quote
    if txid is None:
        txid = TXID_EVM if quote.asset.chain == "evm" else TXID_BTC
    seen = seen_at or (quote.created_at + timedelta(minutes=5))
    return transfer_record(order=order, actor=actor, now=now,
                           transfer=TransferInput(txid=txid, index=index, amount=quote.amount if amount is None
                                                  else amount, confirmations=confirmations, seen_at=seen,
                                                  shared_statement=shared_statement))


def order_for_all_h200(user, *, now: datetime):
    """Another customer takes all 16 H200 cards (the demo fleet's) for a week from ``now``."""
    return place(user, product="h200-141gb", quantity=16, term_days=7, now=now)


def activate(order):
    """Pay ``order`` and prepare its access with the simulated provisioner: an active term."""
    from anchorgpu.orders.fulfilment import provision_due
    from anchorgpu.orders.models import Order

    pay(order)
    provision_due()
    order = Order.objects.select_related("booking", "quote__asset").get(pk=order.pk)
    assert order.state == "active", order.state
    return order
