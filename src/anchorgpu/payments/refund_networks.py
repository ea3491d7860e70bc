"""On which networks a refund may go: the same coin (symbol) as the quote, on a network the shop accepts it on
(or the quote's own, even if no longer offered). A refund never changes coin."""

from __future__ import annotations

from django.utils.translation import gettext as _

from anchorgpu.orders.errors import InvalidOrder

from .models import Asset
from .refund_units import to_quote_units


def refund_networks(quote) -> list[Asset]:
    """The assets a refund of ``quote`` may be sent in, the quote's own first."""
    others = Asset.objects.filter(is_active=True, symbol=quote.asset.symbol).exclude(pk=quote.asset_id)
    return [quote.asset, *others.order_by("position", "code")]


def refund_network(quote, asset) -> Asset:
    """``asset`` (an Asset, its pk or code; None: the quote's) checked as a network the refund may go on."""
    if asset is None or asset == "":
        return quote.asset
    if not isinstance(asset, Asset):
        found = Asset.objects.filter(code=asset).first() if not str(asset).isdigit() else \
            Asset.objects.filter(pk=int(asset)).first()
        if found is None:
            raise InvalidOrder(_("There is no such network for a refund."), code="bad_network")
        asset = found
    if asset.symbol != quote.asset.symbol:
        raise InvalidOrder(_("A refund is paid in the coin that was paid, %(symbol)s; %(other)s is another coin.")
                           % {"symbol": quote.asset.symbol, "other": asset.symbol}, code="other_coin")
    if asset.pk != quote.asset_id and not asset.is_active:
        raise InvalidOrder(_("The shop no longer uses %(network)s for %(symbol)s; choose another network.")
                           % {"network": _(asset.network_name), "symbol": asset.symbol}, code="bad_network")
    return asset


def customer_network(order) -> Asset:
    """The network the customer asked their refund on (the quote's unless they chose another)."""
    return order.refund_asset if order.refund_asset_id else order.quote.asset


def refund_quote_units(refund, quote) -> int:
    """A recorded refund's amount and network fee, in the quote's base units."""
    sent = refund.amount + refund.network_fee
    if refund.asset_id == quote.asset_id:
        return sent
    return to_quote_units(sent, sent_decimals=refund.asset.decimals, quote_decimals=quote.asset.decimals)


def refund_amount_quote_units(refund, quote) -> int:
    """A recorded refund's amount alone (no network fee), in the quote's base units."""
    if refund.asset_id == quote.asset_id:
        return refund.amount
    return to_quote_units(refund.amount, sent_decimals=refund.asset.decimals, quote_decimals=quote.asset.decimals)
