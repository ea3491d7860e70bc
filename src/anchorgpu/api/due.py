"""What the payment URI of an order's quote asks for: the amount still due by the order rules
(``orders.rules.amount_due``: the whole quote, or only what is missing once the order is underpaid), and the
whole quote for an order that cannot be paid now, as the API answered before."""

from __future__ import annotations

from anchorgpu.orders.rules import amount_due
from anchorgpu.payments.uri import payment_uri


def units_due(order, quote, evaluation) -> tuple[int, str]:
    """The base units still to pay, and the BIP21 / EIP-681 URI that asks for them."""
    confirmed = evaluation.confirmed_total if evaluation is not None else 0
    units = amount_due(order.state, quoted=quote.amount, confirmed=confirmed) or quote.amount
    uri = payment_uri(scheme=quote.scheme, address=quote.address, amount=units, decimals=quote.asset.decimals,
                      chain_id=quote.asset.chain_id, contract=quote.asset.contract)
    return units, uri
