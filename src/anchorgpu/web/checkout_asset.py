"""How the checkout asks how a customer pays: first the coin (the distinct symbols of the accepted assets),
then the network for that coin. A coin offered on one network needs no second choice. What the order takes
stays one Asset, the row for that coin on that network.

Without JavaScript the page lists every coin with its networks under it; with it, only the chosen coin's
networks show (checkout_network.js)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from anchorgpu.payments.confirm_time import confirmation_estimate

from .payment_next import wait_text

NO_CHOICE = _("Choose how you pay: a coin, and the network you send it on.")
UNKNOWN_COIN = _("Choose one of the coins listed.")
UNKNOWN_NETWORK = _("Choose one of the assets listed.")  # the API names the field "asset" too
NO_NETWORK = _("%(coin)s is accepted on several networks: choose the one you will send it on.")
MISMATCH = _("%(network)s is listed for %(other)s, not for %(coin)s: choose one of the networks under "
             "%(coin)s.")


def network_label(asset) -> str:
    """What a network option says: the network (with its token standard), and about how long a transfer
    takes to count there."""
    wait = confirmation_estimate(confirmations=asset.confirmations_required, network=asset.network,
                                 chain=asset.chain, finality=asset.finality)
    return gettext("%(network)s · confirmed in %(wait)s") % {
        "network": gettext(asset.network_name), "wait": wait_text(int(wait.total_seconds() // 60))}


def coin_choices(assets) -> list[tuple[str, str]]:
    """The distinct symbols, in the order of their first asset; a coin's label names it in full."""
    seen: dict[str, str] = {}
    for asset in assets:
        seen.setdefault(asset.symbol, f"{asset.symbol} · {gettext(asset.name)}")
    return list(seen.items())


@dataclass
class CoinGroup:
    symbol: str
    coin_widget: object  # the coin's radio (a BoundWidget)
    networks: list = field(default_factory=list)  # (BoundWidget, Asset) for each network of the coin

    @property
    def one_network(self) -> bool:
        return len(self.networks) == 1


def groups(coin_field, asset_field, assets) -> list[CoinGroup]:
    """Each coin's radio with the network radios under it, for the template."""
    by_code = {asset.code: asset for asset in assets}
    out = {w.data["value"]: CoinGroup(w.data["value"], w) for w in coin_field.subwidgets}
    for widget in asset_field.subwidgets:
        asset = by_code.get(str(widget.data["value"]))
        if asset is not None and asset.symbol in out:
            out[asset.symbol].networks.append((widget, asset))
    return list(out.values())


def chosen_asset(*, coin: str, asset, assets) -> tuple[object, str | None, str]:
    """The asset paid with, or the field and message that say why not: (asset, None, "") or
    (None, field, message)."""
    if asset is None:
        if not coin:
            return None, "asset", str(NO_CHOICE)
        networks = [a for a in assets if a.symbol == coin]
        if len(networks) == 1:
            return networks[0], None, ""
        return None, "asset", str(NO_NETWORK % {"coin": coin})
    if coin and asset.symbol != coin:
        return None, "asset", str(MISMATCH % {"network": gettext(asset.network_name), "other": asset.symbol,
                                              "coin": coin})
    return asset, None, ""
