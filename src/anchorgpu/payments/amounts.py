"""Fiat to crypto at a locked rate. Pure domain code.

Crypto amounts are integers in the asset's base units. The customer is asked
for the smallest amount worth at least the fiat total that has no more than
the asset's quoted decimal places (``places``: 8 for BTC, 6 for ETH, 2 for a
dollar stablecoin), so a quote rounds up, once, never short-changes the
invoice, and asks for a figure a person can read and type.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, localcontext

# Quoted precision when the operator set none: one satoshi for Bitcoin, a hundred-millionth of a coin for others.
DEFAULT_QUOTE_PLACES = 8


def quoted_places(decimals: int, quote_decimals: int | None) -> int:
    """Decimal places a quote of an asset with ``decimals`` places is rounded up to."""
    places = DEFAULT_QUOTE_PLACES if quote_decimals is None else quote_decimals
    return max(0, min(places, decimals))


def crypto_amount(fiat_total: Decimal, *, rate: Decimal, decimals: int, places: int | None = None) -> int:
    """Base units of an asset with ``decimals`` places worth at least
    ``fiat_total`` when one whole coin costs ``rate`` in the same fiat,
    rounded up to a whole multiple of 10**-``places`` coin (default: every
    base unit counts)."""
    if not isinstance(fiat_total, Decimal) or not isinstance(rate, Decimal):
        raise TypeError("money is Decimal, never float")
    if fiat_total <= 0 or rate <= 0:
        raise ValueError("the total and the rate must be positive")
    if not 0 <= decimals <= 30:
        raise ValueError("an asset has between 0 and 30 decimal places")
    if places is None:
        places = decimals
    if not 0 <= places <= decimals:
        raise ValueError("the quoted places are between 0 and the asset's decimal places")
    with localcontext() as ctx:
        ctx.prec = 80  # 18-decimal tokens and large totals stay exact before the single rounding
        steps = (fiat_total / rate).scaleb(places)
        return int(steps.to_integral_value(rounding=ROUND_CEILING)) * 10 ** (decimals - places)


def fiat_value(amount: int, *, rate: Decimal, decimals: int) -> Decimal:
    """What ``amount`` base units are worth at ``rate`` (exact, unrounded)."""
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(amount).scaleb(-decimals) * rate
