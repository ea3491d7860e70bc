"""What the order page says about when the term runs (``orders.term_slide``), and the customer's choice when
a late payment found its cards taken: the earliest free start, or a refund."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from anchorgpu.allocation.selectors import earliest_start
from anchorgpu.audit.models import AuditEntry
from anchorgpu.formats import display
from anchorgpu.orders.errors import OrderError
from anchorgpu.orders.models import Order
from anchorgpu.orders.term_slide import is_sliding
from anchorgpu.payments.services import payment_take_earliest_start


def _late_by(order: Order) -> timedelta:
    """How much later than its term's start access was ready (the last slide's record), zero if it was not."""
    entry = (AuditEntry.objects.filter(action="term_slide", object_type="orders.order", object_id=str(order.pk))
             .order_by("-id").values_list("data", flat=True).first())
    seconds = int((entry or {}).get("short_by_seconds", 0)) if (entry or {}).get("final") else 0
    return timedelta(seconds=max(0, seconds))


def term_facts(order: Order, *, now: datetime) -> dict:
    sliding = is_sliding(order)
    late_by = _late_by(order) if order.start_asap and not sliding else timedelta(0)
    facts = {
        "term_sliding": sliding,
        "term_late_minutes": int(late_by.total_seconds() // 60) if late_by >= timedelta(minutes=1) else 0,
        "later_start": None,
    }
    # A late payment whose cards were taken meanwhile: offer the earliest start they are free for the term.
    if order.state == "paid_late" and order.product.is_active and not order.refunds.exists():
        facts["later_start"] = earliest_start(order.product, quantity=order.quantity, term_days=order.term_days,
                                              not_before=now, now=now)
    return facts


@login_required
@require_POST
def order_take_start(request, reference: str):
    order = get_object_or_404(Order, reference=reference, user=request.user)
    try:
        order = payment_take_earliest_start(order=order, actor=request.user.get_username())
    except OrderError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Your term is booked again, from %(start)s at the earliest.")
                         % {"start": display.moment(order.starts_at)})
    return redirect("order", reference=order.reference)
