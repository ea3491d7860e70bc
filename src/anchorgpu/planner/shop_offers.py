"""The shop's catalog and current prices as the planner's offers (reads the database)."""

from __future__ import annotations

from anchorgpu.catalog.selectors import NoPriceList, price_list_current, products_on_sale

from .recommend import Offer, prices_from_price_list

# How many units the planner considers per product: one host's worth (8 cards, or 4 B200 lots).
CARDS_PER_HOST = 8


def shop_offers() -> list[Offer]:
    try:
        price_list = price_list_current()
    except NoPriceList:
        price_list = None
    offers = []
    for product in products_on_sale():
        quantities = [q for q in (1, 2, 4, 8) if q * product.cards_per_unit <= CARDS_PER_HOST]
        prices = prices_from_price_list(price_list, product=product.slug, product_name=product.name,
                                        cards_per_unit=product.cards_per_unit, quantities=quantities) \
            if price_list is not None else {}
        offers.append(Offer.from_gb(product.slug, product.name, product.memory_gb_per_card, product.cards_per_unit,
                                    quantities, prices=prices, currency=price_list.currency if price_list else ""))
    return offers
