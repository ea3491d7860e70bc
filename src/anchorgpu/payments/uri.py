"""Payment URIs for wallets (BIP21 for Bitcoin, EIP-681 for Ethereum and the
EVM networks, whose ``@chain_id`` names the network: Base 8453, Arbitrum One
42161, Polygon PoS 137, BNB Smart Chain 56) and their QR code as inline SVG.
The URI carries the exact amount, so a wallet that scans it cannot round it.

TRON has no payment URI that wallets agree on: TronLink, TokenPocket and
the exchanges' apps read a bare ``T…`` address from a QR code (TokenPocket's
scan protocol: "BTC, TRON, … use address … to generate receipt qrcode",
https://help.tokenpocket.pro/developer-en/scan-protocol), and what one
wallet's ``tron:`` form carries another ignores. So a TRON QR code holds the
address only, and the customer types the amount (``carries_amount``)."""

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


def carries_amount(scheme: str) -> bool:
    """Whether the scheme's payment URI (and so its QR code) asks for the amount: not on TRON."""
    return scheme != "tron"


def payment_uri(*, scheme: str, address: str, amount: int, decimals: int, chain_id: int | None = None,
                contract: str = "") -> str:
    """The BIP21 / EIP-681 URI; on TRON, the bare deposit address."""
    if scheme == "tron":
        return address
    if scheme in ("btc", "btc-testnet"):
        return f"bitcoin:{address}?amount={whole_units(amount, decimals)}"
    chain = f"@{chain_id}" if chain_id else ""
    if contract:  # an ERC-20 transfer call on the token contract
        return f"ethereum:{contract}{chain}/transfer?address={address}&uint256={amount}"
    return f"ethereum:{address}{chain}?value={amount}"


def qr_svg(uri: str) -> str:
    """An SVG element (no XML declaration) that can sit in an HTML page."""
    return segno.make(uri, error="m").svg_inline(scale=4, border=2, dark="#111", light="#fff")
