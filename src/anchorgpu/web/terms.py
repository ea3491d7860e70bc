"""The terms page: what a fixed term is, and the service credit rule with its numbers and a worked example, all
taken from the rule itself (``billing.credit_rule``), so the page cannot say one thing and the shop do another."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.shortcuts import render

from anchorgpu.billing import credit_rule as rule
from anchorgpu.catalog.rules import TERM_DAYS

EXAMPLE_PRICE = Decimal("1000.00")
EXAMPLE_DAYS = 7
EXAMPLE_LOST = timedelta(hours=3)


def credit_example() -> dict:
    """A 7-day term of 1000.00 that lost 3 hours: what the rule gives, computed by the rule."""
    start = datetime(2026, 1, 5, tzinfo=UTC)
    segment = rule.Segment(start, start + timedelta(days=EXAMPLE_DAYS), EXAMPLE_PRICE)
    lost = rule.Lost(start + timedelta(days=2), start + timedelta(days=2) + EXAMPLE_LOST)
    amount = rule.credit([segment], [lost], currency="EUR").total
    return {"price": EXAMPLE_PRICE, "days": EXAMPLE_DAYS, "hours": int(EXAMPLE_LOST.total_seconds() // 3600),
            "credit": amount}


def terms(request):
    numbers = rule.published()
    return render(request, "web/terms.html", {
        "grace_minutes": numbers["grace_minutes"], "multiplier": numbers["multiplier"],
        "half_term_percent": 100 // numbers["multiplier"], "example": credit_example(), "terms": TERM_DAYS})
