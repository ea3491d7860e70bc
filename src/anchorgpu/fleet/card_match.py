"""Is a card what the product it is sold as promises? Pure domain code, no Django.

The rule lives here, and reads only the product's own fields (its name and its memory per card), so a product
the operator adds is judged the same way:

- **Model**: the product's model word is the first word of its name with a digit in it ("H100" in "H100 SXM 80
  GB", "MI300X", "B200"); the card's reported name must contain it as a word ("NVIDIA H100 80GB HBM3",
  "NVIDIA A100-SXM4-80GB", "AMD Instinct MI300X"), case aside. A product whose name says SXM refuses a card
  whose name says PCIe or NVL (those are other boards with the same chip).
- **Memory**: drivers report memory in MiB and the trade sells it in "GB" that are close to GiB: an H100 80 GB
  reports 81559 MiB (79.6 GiB), an H200 141 GB 143771 MiB (140.4 GiB), an L40S 48 GB 46068 MiB (45.0 GiB). The
  card's memory in GiB must be within 4 % of the product's GB figure. A card that reports no memory fails.

What this cannot tell: two boards of the same model word and memory (an H100 SXM that reports the plain name
and an H100 PCIe that does not say "PCIe" are told apart only by the driver's wording).
"""

from __future__ import annotations

import re

MEMORY_TOLERANCE = 0.04
_BOARD_WORDS = ("PCIE", "NVL")


def model_word(product_name: str) -> str:
    for word in re.split(r"[\s,]+", product_name or ""):
        if any(ch.isdigit() for ch in word):
            return word.upper()
    return ""


def card_problem(*, card_name: str, memory_mib: int | None, product_name: str, product_memory_gb: int) -> str | None:
    """None when the card is what the product promises; else why not, in a sentence."""
    word = model_word(product_name)
    name = (card_name or "").upper()
    if not word:
        return f"the product name {product_name!r} has no model word to check the cards against"
    if not re.search(rf"(?<![A-Z0-9]){re.escape(word)}(?![A-Z0-9])", name):
        return f"a card reports itself as {card_name!r}, not a {word} as {product_name!r} promises"
    if "SXM" in (product_name or "").upper():
        for board in _BOARD_WORDS:
            if re.search(rf"(?<![A-Z0-9]){board}(?![A-Z0-9])", name):
                return f"a card reports itself as {card_name!r}, a {board} board, where {product_name!r} is SXM"
    if memory_mib is None:
        return f"a card ({card_name}) did not report its memory"
    gib = memory_mib / 1024
    if abs(gib - product_memory_gb) > MEMORY_TOLERANCE * product_memory_gb:
        return (f"a card ({card_name}) has {memory_mib} MiB ({gib:.1f} GiB), not the {product_memory_gb} GB "
                f"{product_name!r} promises")
    return None
