"""What the payment URI of an order's quote asks for: the whole amount, or only what is still missing once
the order is underpaid (as the order page does)."""

from __future__ import annotations

from anchorgpu.payments.uri import payment_uri


def units_due(order, quote, evaluation) -> tuple[int, str]:
    """The base units still to pay, and the BIP21 / EIP-681 URI that asks for them."""
    units = evaluation.shortfall if order.state == "underpaid" and evaluation and evaluation.shortfall \
        else quote.amount
    uri = payment_uri(scheme=quote.scheme, address=quote.address, amount=units, decimals=quote.asset.decimals,
                      chain_id=quote.asset.chain_id, contract=quote.asset.contract)
    return units, uri
