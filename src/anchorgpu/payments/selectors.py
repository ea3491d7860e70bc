from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.utils.translation import gettext as _

from anchorgpu.orders.errors import Unavailable

from . import evaluation
from .models import Asset, PaymentSettings, Rate

if TYPE_CHECKING:
    from anchorgpu.orders.models import Order


def assets_accepted():
    return Asset.objects.filter(is_active=True)


def rate_current(asset: Asset, currency: str, *, now: datetime, settings: PaymentSettings | None = None) -> Rate:
    """The newest rate observed by ``now``; refused when older than the operator allows."""
    settings = settings or PaymentSettings.current()
    rate = Rate.objects.filter(asset=asset, currency=currency, observed_at__lte=now).order_by("-observed_at",
                                                                                              "-id").first()
    if rate is None or rate.observed_at < now - timedelta(minutes=settings.rate_max_age_minutes):
        raise Unavailable(_("We cannot quote %(asset)s right now (no current exchange rate). Choose another "
                            "asset or try again later.") % {"asset": asset.symbol}, code="no_rate")
    return rate


def _terms(order: Order) -> evaluation.Terms:
    quote = order.quote
    return evaluation.Terms(amount=quote.amount, tolerance=quote.tolerance,
                            confirmations_required=quote.confirmations_required, expires_at=quote.expires_at)


def _transfers(order: Order) -> list[evaluation.Transfer]:
    return [evaluation.Transfer(key=(t.chain, t.txid, t.index), amount=t.amount, confirmations=t.confirmations,
                                seen_at=t.seen_at) for t in order.transfers.filter(withdrawn_at__isnull=True)]


def payment_status(order: Order) -> evaluation.Evaluation:
    """The evaluation of the order's transfers as they stand (a read)."""
    return evaluation.evaluate(_terms(order), _transfers(order))
