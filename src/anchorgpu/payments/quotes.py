"""Creating an order's quote: locks a rate, takes a fresh deposit address."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from anchorgpu.audit.services import audit_record
from anchorgpu.orders.errors import Unavailable

from .addresses import AddressError, derive_address
from .amounts import crypto_amount
from .demo import PUBLIC_TEST_KEYS
from .models import Asset, DepositKey, PaymentSettings, Quote
from .selectors import rate_current

log = logging.getLogger(__name__)


def _fresh_index(scheme: str) -> tuple[DepositKey, int]:
    """The next address index of the scheme's key, taken under a row lock so
    two orders can never get the same one (and the quote's unique
    (scheme, index) constraint says so again)."""
    key = DepositKey.objects.select_for_update().filter(scheme=scheme).first()
    if key is None:
        raise Unavailable(_("This asset cannot be paid in right now (no deposit key is set up)."), code="no_key")
    index = key.next_index
    key.next_index = index + 1
    key.save(update_fields=["next_index"])
    return key, index


def quote_create(*, order, asset: Asset, now: datetime, actor: str, settings: PaymentSettings | None = None) -> Quote:
    """Runs inside the order's transaction (``order_place``), which may pass the payment settings it read."""
    settings = settings or PaymentSettings.current()
    rate = rate_current(asset, order.currency, now=now, settings=settings)
    amount = crypto_amount(order.fiat_total, rate=rate.price, decimals=asset.decimals, places=asset.quoted_places)
    key, index = _fresh_index(asset.scheme)
    if key.extended_public_key.strip() in PUBLIC_TEST_KEYS and not django_settings.ANCHORGPU_ALLOW_TEST_KEYS:
        log.error("refusing a quote: the %s deposit key is the demo's public test key; set your own in the admin",
                  asset.scheme)
        raise Unavailable(_("Payments in %(asset)s are not set up yet. Please try again later or choose another "
                            "asset.") % {"asset": asset.symbol}, code="no_key")
    try:
        address = derive_address(key.extended_public_key, asset.scheme, index)
    except AddressError:
        raise Unavailable(_("This asset cannot be paid in right now (the deposit key is not usable)."),
                          code="bad_key") from None
    expires_at = now + timedelta(minutes=settings.quote_minutes)
    try:
        with transaction.atomic():
            quote = _create(order=order, asset=asset, rate=rate, amount=amount, index=index, address=address,
                            expires_at=expires_at, settings=settings)
    except IntegrityError:  # the index or the address was used before: the key's counter is behind
        raise Unavailable(_("We could not make a fresh deposit address just now; please try again."),
                          code="address_in_use") from None
    audit_record(actor=actor, action="quote_create", obj=order,
                 data={"asset": asset.code, "amount": str(amount), "rate": str(rate.price), "rate_source": rate.source,
                       "address_index": index, "address": address, "expires_at": expires_at.isoformat()})
    return quote


def _create(*, order, asset, rate, amount, index, address, expires_at, settings) -> Quote:
    return Quote.objects.create(
        order=order, asset=asset, currency=order.currency, fiat_total=order.fiat_total, rate=rate.price,
        rate_source=rate.source, rate_at=rate.observed_at, amount=amount, tolerance=asset.tolerance_for(amount),
        confirmations_required=asset.confirmations_required, scheme=asset.scheme, address_index=index,
        address=address, expires_at=expires_at, monitor_until=expires_at + timedelta(hours=settings.monitor_hours))
