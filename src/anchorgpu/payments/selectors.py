from __future__ import annotations

from datetime import datetime, timedelta

from django.utils.translation import gettext as _

from anchorgpu.orders.errors import Unavailable

from .models import Asset, PaymentSettings, Rate


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
