"""One card, one customer, whatever the admin does (issue 19): releasing the booking of an order that still
counts on its cards is refused everywhere (service, booking page, bulk action), the database itself refuses a
paid, preparing or active order without its live confirmed booking, and the order's own tools (refund, end the
term, cancel) let the cards go together with the order."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from anchorgpu.allocation.errors import BookingOfLiveOrder
from anchorgpu.allocation.models import Booking
from anchorgpu.allocation.services import booking_release, host_enter_maintenance
from anchorgpu.audit.models import AuditEntry
from anchorgpu.fleet.models import Host
from anchorgpu.orders.errors import Unavailable
from anchorgpu.orders.invariants import invariant_violations
from anchorgpu.orders.models import Order
from anchorgpu.orders.provisioning import WIPE
from anchorgpu.orders.wipes import wipes_due
from tests import shop

pytestmark = pytest.mark.django_db


@pytest.fixture
def store():
    shop.load_shop()
    return shop.customer()


def _fresh(order) -> Order:
    return Order.objects.select_related("booking").get(pk=order.pk)


def _release_url(booking) -> str:
    return reverse("admin:allocation_booking_release", args=[booking.pk])


def test_the_service_refuses_to_release_the_cards_of_an_order_that_counts_on_them(store):
    waiting = shop.place(store)
    active = shop.activate(shop.place(store))
    for order in (waiting, active):
        with pytest.raises(BookingOfLiveOrder, match=order.reference):
            booking_release(booking=order.booking, actor="operator", reason="tidy up")
        order = _fresh(order)
        assert order.booking.state == Booking.State.LIVE and order.state in ("awaiting_payment", "active")


def test_the_booking_page_and_the_bulk_action_refuse_an_active_order_and_say_what_to_do(admin_client, store):
    order = shop.activate(shop.place(store))
    page = admin_client.get(_release_url(order.booking))
    assert order.reference in page.content.decode() and "Refused here: act on the order." in page.content.decode()
    response = admin_client.post(_release_url(order.booking), {"apply": "yes", "reason": "card looks free"},
                                 follow=True)
    text = response.content.decode()
    assert "was not released" in text and order.reference in text
    changelist = reverse("admin:allocation_booking_changelist")
    admin_client.post(changelist, {"action": "release_bookings", "_selected_action": [order.booking.pk],
                                   "apply": "yes", "reason": "bulk tidy-up"}, follow=True)
    order = _fresh(order)
    assert order.state == "active" and order.booking.state == Booking.State.LIVE
    assert not AuditEntry.objects.filter(action="booking_release").exists()
    # The card stays taken: the offers say so, and a second customer is not given it.
    assert Booking.objects.filter(state=Booking.State.LIVE, kind=Booking.Kind.CONFIRMED).count() == 1


def test_a_maintenance_window_is_still_released_from_the_booking_page(admin_client, store):
    host = Host.objects.filter(product__slug="h100-sxm-80gb").first()
    now = timezone.now()
    window = host_enter_maintenance(host=host, start=now + timedelta(days=40), end=now + timedelta(days=41),
                                    actor="operator", reason="firmware").booking
    response = admin_client.post(_release_url(window), {"apply": "yes", "reason": "postponed"})
    assert response.status_code == 302
    assert Booking.objects.get(pk=window.pk).state == Booking.State.RELEASED


@pytest.mark.parametrize("breach", ["release_booking", "unlink_booking", "hold_for_paid"])
def test_the_database_refuses_an_active_order_without_its_live_booking(store, breach):
    """Whatever path writes it (a shell, a script, a bug), the database refuses the stranded order."""
    order = shop.activate(shop.place(store))
    with pytest.raises(IntegrityError, match="order_needs_live_booking"):
        with transaction.atomic():
            if breach == "release_booking":
                Booking.objects.filter(pk=order.booking_id).update(state=Booking.State.RELEASED)
            elif breach == "unlink_booking":
                Order.objects.filter(pk=order.pk).update(booking=None)
            else:
                waiting = shop.place(store)
                Order.objects.filter(pk=waiting.pk).update(state="paid")  # its booking is only a hold
    assert _fresh(order).booking.state == Booking.State.LIVE and invariant_violations() == []


def test_a_whole_refund_of_an_active_order_ends_it_and_frees_its_card_for_the_next_customer(store):
    from anchorgpu.payments.refunds import RefundInput, refund_record
    from anchorgpu.payments.services import refund_address_set

    order = shop.activate(shop.place(store, product="h200-141gb", quantity=16))
    bob = shop.customer("bob@example.com")
    with pytest.raises(Unavailable, match="taken the last free unit"):
        shop.place(bob, product="h200-141gb", quantity=16, start=timezone.now())
    refund_address_set(order=order, actor=store.username, address=shop_refund_address())
    refund_record(order=order, actor="operator", refund=RefundInput(
        address=shop_refund_address(), amount=order.quote.amount, rate_choice="quote", txid="cd" * 32,
        reason="host fault on day one; customer asked for the money back", whole_order=True, customer_reason="refund"))
    order = _fresh(order)
    assert order.state == "refunded" and order.booking.state == Booking.State.RELEASED
    # The wipe is due with the refund and done by the worker, with no transaction open.
    assert order.wipe_due_at is not None and not order.steps.filter(step=WIPE).exists()
    assert wipes_due() == 1 and order.steps.filter(step=WIPE).exists()
    notes = order.invoice.credit_notes.all()
    assert [n.amount for n in notes] == [order.invoice.total]
    states = list(AuditEntry.objects.filter(object_id=str(order.pk), action="order_state").order_by("at", "id")
                  .values_list("to_state", flat=True))
    assert states[-2:] == ["active", "refunded"]
    second = shop.place(bob, product="h200-141gb", quantity=16)
    assert second.booking.starts_at <= timezone.now() + timedelta(minutes=1) and invariant_violations() == []


def shop_refund_address() -> str:
    return "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"


def test_end_the_term_now_completes_the_order_wipes_it_and_releases_its_cards(admin_client, store):
    order = shop.activate(shop.place(store))
    url = reverse("admin:orders_order_end_term", args=[order.pk])
    assert admin_client.post(url, {"reason": ""}).status_code == 200  # a reason is required
    assert _fresh(order).state == "active"
    assert admin_client.post(url, {"reason": "customer finished early and asked us to stop"}).status_code == 302
    order = _fresh(order)
    assert order.state == "completed" and order.booking.state == Booking.State.RELEASED
    assert order.wipe_due_at is not None and not order.steps.filter(step=WIPE).exists()
    assert wipes_due() == 1 and order.steps.filter(step=WIPE).exists()
    entry = AuditEntry.objects.get(object_id=str(order.pk), action="order_state", to_state="completed")
    assert entry.actor == "admin" and "customer finished early" in entry.reason
    assert admin_client.post(url, {"reason": "again"}).status_code == 200  # not active any more: refused


def test_a_failed_order_whose_cards_are_gone_is_not_retried(store):
    from anchorgpu.orders.errors import NotAllowedNow
    from anchorgpu.orders.fulfilment import order_retry_provisioning

    order = shop.place(store)
    shop.pay(order)
    Order.objects.filter(pk=order.pk).update(state="failed")
    Booking.objects.filter(pk=order.booking_id).update(state=Booking.State.RELEASED)  # allowed: failed needs none
    with pytest.raises(NotAllowedNow, match="no longer booked"):
        order_retry_provisioning(order=order, actor="operator", reason="fixed the host")
    assert _fresh(order).state == "failed"


class _HostDown:
    """A provisioner whose host does not answer when its machine is to be wiped."""

    name = "host-down"

    def run(self, step, order):
        from anchorgpu.orders.provisioner import ProvisioningError

        raise ProvisioningError("ssh: connect to host h1: Connection timed out")


def test_a_wipe_that_fails_is_tried_again_then_goes_to_the_operators_and_holds_the_cards(admin_client, store):
    from anchorgpu.orders.models import OperatorEvent
    from anchorgpu.orders.retry import MAX_WIPE_FAILURES

    order = shop.activate(shop.place(store))
    response = admin_client.post(reverse("admin:orders_order_end_term", args=[order.pk]), {"reason": "abuse"})
    assert response.status_code == 302
    order = _fresh(order)  # the term ends whatever the host does: the wipe is the worker's, later
    assert order.state == "completed" and order.booking.state == Booking.State.RELEASED
    at = order.wipe_due_at
    for attempt in range(1, MAX_WIPE_FAILURES + 1):
        assert wipes_due(provisioner=_HostDown(), now=at) == 1
        order = _fresh(order)
        assert order.wipe_attempts == attempt and order.retry_at > at
        assert order.last_error == "wipe: ssh: connect to host h1: Connection timed out"
        assert wipes_due(provisioner=_HostDown(), now=at) == 0  # backing off
        at = order.retry_at
    assert wipes_due(provisioner=_HostDown(), now=at + timedelta(days=1)) == 0  # given up: the operators' now
    assert not order.steps.filter(step=WIPE).exists() and order.wipe_due_at is not None
    event = OperatorEvent.objects.get(order=order, kind="order.wipe_failed")
    assert "could not be wiped" in event.text and "Connection timed out" in event.text
    assert AuditEntry.objects.filter(object_id=str(order.pk), action="wipe_error").count() == MAX_WIPE_FAILURES
    page = admin_client.get(reverse("admin:orders_order_change", args=[order.pk])).content.decode()
    assert "Connection timed out" in page
