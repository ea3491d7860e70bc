"""What the order page says comes next once a customer has paid (or says so): the confirmations the quote
needs and about how long they take on its network (``payments.confirm_time``, an estimate), the e-mails
that follow; and, for a claimed order whose quote has expired, that the transfer is still being checked
during the watch window rather than a live payment request."""

from __future__ import annotations

from datetime import datetime

from django.utils.translation import ngettext

from anchorgpu.payments.confirm_time import confirmation_estimate


def wait_text(minutes: int) -> str:
    """'about 20 minutes', 'about 2 hours' (from 90 minutes on, in whole hours)."""
    if minutes >= 90:
        hours = round(minutes / 60)
        return ngettext("about %(n)d hour", "about %(n)d hours", hours) % {"n": hours}
    return ngettext("about %(n)d minute", "about %(n)d minutes", minutes) % {"n": minutes}


def payment_next(order, quote, *, now: datetime) -> dict:
    """Context for the order page's "what happens next" (empty without a quote). Whether the page shows it,
    and whether a claimed order's quote has run out, is the order page's state summary
    (``orders.selectors.order_page``)."""
    if quote is None:
        return {}
    asset = quote.asset
    wait = confirmation_estimate(confirmations=quote.confirmations_required, network=asset.network,
                                 chain=asset.chain, finality=asset.finality)
    return {"confirm_wait": wait_text(int(wait.total_seconds() // 60))}
