"""Payment URIs for wallets (BIP21 for Bitcoin, EIP-681 for Ethereum) and
their QR code as inline SVG. The URI carries the exact amount, so a wallet
that scans it cannot round it."""

from __future__ import annotations

from decimal import Decimal, localcontext

import segno


def whole_units(amount: int, decimals: int) -> str:
    """Base units as a plain decimal string of whole coins: 150000, 8 -> "0.0015"."""
    with localcontext() as ctx:
        ctx.prec = 80  # Decimal's default 28 digits would round a very large amount
        text = format(Decimal(amount).scaleb(-decimals), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def payment_uri(*, scheme: str, address: str, amount: int, decimals: int, chain_id: int | None = None,
                contract: str = "") -> str:
    if scheme in ("btc", "btc-testnet"):
        return f"bitcoin:{address}?amount={whole_units(amount, decimals)}"
    chain = f"@{chain_id}" if chain_id else ""
    if contract:  # an ERC-20 transfer call on the token contract
        return f"ethereum:{contract}{chain}/transfer?address={address}&uint256={amount}"
    return f"ethereum:{address}{chain}?value={amount}"


def qr_svg(uri: str) -> str:
    """An SVG element (no XML declaration) that can sit in an HTML page."""
    return segno.make(uri, error="m").svg_inline(scale=4, border=2, dark="#111", light="#fff")
