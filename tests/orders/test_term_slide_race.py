"""Slid terms under a rush (PostgreSQL, many threads, issue 20 item 4).

Eight as-soon-as-possible orders hold every H200 card. At once: each is paid and its access prepared at its
own moment (two of them so late that their terms must stretch past what was held), while sixteen other
customers order dated terms that start inside or just after those held periods. Whatever the interleaving:
no card is claimed twice, every term is as long as bought, and a term starts when its access was ready
unless another customer's booking, placed first, begins right where it ends.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from anchorgpu.audit.models import AuditEntry
from anchorgpu.allocation.models import BookingDevice
from anchorgpu.orders import fulfilment
from anchorgpu.orders.errors import Unavailable
from anchorgpu.orders.invariants import invariant_violations
from anchorgpu.orders.models import Order
from anchorgpu.orders.provisioner import get_provisioner
from tests import shop
from tests.allocation.test_race import overlapping_live_rows, run_together

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db_race, pytest.mark.postgres_only]

MINUTE, DAY = timedelta(minutes=1), timedelta(days=1)
TERM = 3 * DAY
REACH = 150 * MINUTE


def test_slid_terms_and_rival_orders_at_once_never_double_book_nor_shorten_a_term():
    shop.load_shop()
    t0 = timezone.now().replace(microsecond=0)
    owner = shop.customer()
    held = [shop.place(owner, product="h200-141gb", quantity=2, term_days=3, now=t0) for _ in range(8)]
    rivals = [shop.customer(f"rival{i}@example.com") for i in range(16)]
    # Access ready at its own moment for each order; the last two well past the 30 minutes allowed, so
    # their terms need cards beyond the held period, which the rivals are after too.
    ready = {order.pk: t0 + (5 + 12 * i) * MINUTE for i, order in enumerate(held)}
    ready[held[-2].pk] = t0 + REACH + 20 * MINUTE
    ready[held[-1].pk] = t0 + REACH + 45 * MINUTE
    paid_at = {order.pk: min(ready[order.pk] - 2 * MINUTE, t0 + 55 * MINUTE) for order in held}

    def prepare(order, n):
        def job():
            shop.pay(order, now=paid_at[order.pk], seen_at=t0 + MINUTE, txid=shop.txid("btc", n + 1))
            clock = ready[order.pk]
            fulfilment._advance(order.pk, get_provisioner(), lambda: clock)
            return order.pk
        return job

    def rival(user, start):
        def job():
            for attempt in range(3):  # a customer who is refused tries again a moment later
                try:
                    return shop.place(user, product="h200-141gb", quantity=2, term_days=3, start=start,
                                      now=t0 + 2 * MINUTE).pk
                except Unavailable:
                    if attempt == 2:
                        raise
                    time.sleep(0.2)
        return job

    # Most rivals want terms that start inside the held periods (free only once a term is fixed and its
    # room let go), four want the cards from the very end of the held periods: the room the two late terms
    # must stretch into.
    starts = [t0 + TERM + 10 * (i + 1) * MINUTE for i in range(12)] + [t0 + TERM + REACH] * 4
    jobs = [prepare(order, n) for n, order in enumerate(held)] + [rival(user, start) for user, start in zip(rivals, starts)]
    results = run_together(jobs)

    for outcome, value in results[:len(held)]:
        assert outcome == "granted", f"preparing access failed: {value!r}"
    winners = []
    for outcome, value in results[len(held):]:
        if outcome == "granted":
            winners.append(value)
        else:
            assert isinstance(value, Unavailable), f"unexpected {type(value).__name__}: {value!r}"
    assert overlapping_live_rows() == []
    assert invariant_violations() == []

    short = 0
    for order in Order.objects.filter(pk__in=[o.pk for o in held]).select_related("booking"):
        assert order.state == "active", order.state
        assert order.ends_at - order.starts_at == TERM  # never shorter than bought
        assert order.booking.ends_at == order.ends_at  # the room after the term is let go
        assert order.starts_at <= ready[order.pk]
        if order.starts_at < ready[order.pk]:
            # Only when another booking begins right at the term's end on one of its cards.
            short += 1
            devices = list(order.booking.slots.values_list("device_id", flat=True))
            assert BookingDevice.objects.filter(device_id__in=devices, live=True, starts_at=order.ends_at) \
                .exclude(booking=order.booking).exists(), order.reference
            last = AuditEntry.objects.filter(action="term_slide", object_id=str(order.pk)).order_by("id").last()
            assert last.data["short_by_seconds"] == (ready[order.pk] - order.starts_at).total_seconds()
    # The early ones slide all the way whatever the rivals do (their held room covers them).
    for order in held[:6]:
        assert Order.objects.get(pk=order.pk).starts_at == ready[order.pk]
    assert len(winners) >= 4, "the cards after every held period were free: those rivals must have won"
    assert short <= 2
