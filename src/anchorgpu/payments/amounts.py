"""Fiat to crypto at a locked rate. Pure domain code.

Crypto amounts are integers in the asset's base units. The customer is asked
for the smallest whole number of base units worth at least the fiat total,
so a quote rounds up, once, and never short-changes the invoice.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, localcontext


def crypto_amount(fiat_total: Decimal, *, rate: Decimal, decimals: int) -> int:
    """Base units of an asset with ``decimals`` places worth at least
    ``fiat_total`` when one whole coin costs ``rate`` in the same fiat."""
    if not isinstance(fiat_total, Decimal) or not isinstance(rate, Decimal):
        raise TypeError("money is Decimal, never float")
    if fiat_total <= 0 or rate <= 0:
        raise ValueError("the total and the rate must be positive")
    if not 0 <= decimals <= 30:
        raise ValueError("an asset has between 0 and 30 decimal places")
    with localcontext() as ctx:
        ctx.prec = 80  # 18-decimal tokens and large totals stay exact before the single rounding
        units = (fiat_total / rate).scaleb(decimals)
        return int(units.to_integral_value(rounding=ROUND_CEILING))


def fiat_value(amount: int, *, rate: Decimal, decimals: int) -> Decimal:
    """What ``amount`` base units are worth at ``rate`` (exact, unrounded)."""
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(amount).scaleb(-decimals) * rate
