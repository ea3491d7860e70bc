"""Releasing an active term while customers order the same cards (PostgreSQL, many threads, issue 19).

An operator tries to free the cards of an active order from the booking page and through the service, while
another refunds the order and twenty customers order the same product. Whatever the interleaving, no card
ever has two live claims: the bare releases are refused, the refund ends the order and its booking together,
and every customer gets cards that nobody else holds (a start after the old term, or now once it is refunded).
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from anchorgpu.allocation.errors import BookingOfLiveOrder, InvalidBookingState
from anchorgpu.allocation.models import Booking
from anchorgpu.allocation.services import booking_release
from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.invariants import invariant_violations
from anchorgpu.orders.models import Order
from anchorgpu.payments.refunds import RefundInput, refund_record
from anchorgpu.payments.services import refund_address_set
from tests import shop
from tests.allocation.test_race import overlapping_live_rows, run_together

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db_race, pytest.mark.postgres_only]

CUSTOMERS = 20
REFUND_TO = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"


def test_an_active_term_released_under_a_rush_never_gives_its_cards_twice():
    shop.load_shop()
    owner = shop.customer()
    active = shop.activate(shop.place(owner, product="h200-141gb", quantity=16))
    refund_address_set(order=active, actor=owner.username, address=REFUND_TO)
    get_user_model().objects.create_superuser("ops", "ops@anchorgpu.example", "pw")
    customers = [shop.customer(f"c{i}@example.com") for i in range(CUSTOMERS)]
    release_url = reverse("admin:allocation_booking_release", args=[active.booking_id])

    def admin_release():
        client = Client()
        client.login(username="ops", password="pw")
        return client.post(release_url, {"apply": "yes", "reason": "looks idle"}).status_code

    def service_release():
        return booking_release(booking=Booking.objects.get(pk=active.booking_id), actor="ops", reason="script")

    def refund():
        return refund_record(order=active, actor="ops", refund=RefundInput(
            address=REFUND_TO, amount=active.quote.amount, rate_choice="quote", txid="cd" * 32,
            reason="host fault", whole_order=True, customer_reason="refund")).pk

    def order_for(user):
        return lambda: shop.place(user, product="h200-141gb", quantity=4).pk

    jobs = [admin_release, service_release, refund, *(order_for(u) for u in customers)]
    results = run_together(jobs)

    assert results[2][0] == "granted", results[2]
    outcome, error = results[1]
    assert outcome == "refused" and isinstance(error, (BookingOfLiveOrder, InvalidBookingState)), results[1]
    assert results[0] == ("granted", 302)  # the page answers; the booking is released by the refund only
    assert list(AuditEntry.objects.filter(action="booking_release").values_list("actor", flat=True)) == ["ops"]
    active = Order.objects.select_related("booking").get(pk=active.pk)
    assert active.state == "refunded" and active.booking.state == Booking.State.RELEASED
    placed = [r for r in results[3:] if r[0] == "granted"]
    assert len(placed) == CUSTOMERS, [r for r in results[3:] if r[0] != "granted"][:3]
    assert overlapping_live_rows() == []
    assert invariant_violations() == []
