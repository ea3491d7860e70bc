"""Base units of one coin on two networks. The same coin (symbol) can have different decimal places on different
networks (USDT: 6 on Ethereum and TRON, 18 on BNB Chain), so a refund sent on another network than the quote's is
counted against the order in the quote's base units. Pure: no Django."""

from __future__ import annotations


def to_quote_units(amount: int, *, sent_decimals: int, quote_decimals: int) -> int:
    """``amount`` base units of a refund, in the quote's base units. Where the refund's network has more decimal
    places, a fraction of the quote's smallest unit counts as a whole one: the order is never told it gave back
    less than it sent."""
    if sent_decimals <= quote_decimals:
        return amount * 10 ** (quote_decimals - sent_decimals)
    step = 10 ** (sent_decimals - quote_decimals)
    return -(-amount // step)


def from_quote_units(units: int, *, quote_decimals: int, sent_decimals: int) -> int:
    """The most base units of the refund's network that stay within ``units`` of the quote's."""
    if sent_decimals >= quote_decimals:
        return units * 10 ** (sent_decimals - quote_decimals)
    return units // 10 ** (quote_decimals - sent_decimals)
