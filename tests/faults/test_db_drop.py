"""The database connection dropping half-way through a service (issue 8, faults).

Each test terminates Django's PostgreSQL connection from the server side at
a chosen point inside a transaction (``dbkill``), then checks that nothing
of the interrupted work remains (no order, hold, quote, step, transfer,
invoice or audit row from it), that the customer or the worker was told
plainly (a 503 with ``Retry-After``; a failed sweep on record), and that
doing the same thing again succeeds once, and only once.

PostgreSQL only: SQLite is a file inside the process, with no connection to
lose.
"""

from __future__ import annotations

from collections import Counter

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.allocation.models import Booking, BookingDevice
from anchorgpu.api.models import ApiIdempotency
from anchorgpu.audit.models import AuditEntry
from anchorgpu.billing.models import Invoice
from anchorgpu.ops.models import SweepRecord
from anchorgpu.orders import fulfilment
from anchorgpu.orders import services as order_services
from anchorgpu.orders.models import Order, ProvisioningStep
from anchorgpu.orders.provisioning import PLAN
from anchorgpu.payments import services as payment_services
from anchorgpu.payments.models import Quote, Transfer
from anchorgpu.worker import run_once
from tests import shop
from tests.allocation.test_race import overlapping_live_rows
from tests.chains.watch_support import CONFIRMATIONS, ChainShop, fresh
from tests.faults.dbkill import drop_before, kill_connection
from tests.orders.test_fulfilment import Counting, paid_order
from tests.web.test_api_orders import Api, order_body
from tests.web.test_checkout import checkout_url, form_data

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]
STEPS = [step.value for step in PLAN]


def rows() -> dict[str, int]:
    """How many rows each table touched by an order's placement, payment and access preparation holds."""
    return {"orders": Order.objects.count(), "bookings": Booking.objects.count(),
            "booking_devices": BookingDevice.objects.count(), "quotes": Quote.objects.count(),
            "idempotency": ApiIdempotency.objects.count(), "transfers": Transfer.objects.count(),
            "invoices": Invoice.objects.count(), "steps": ProvisioningStep.objects.count(),
            "audit": AuditEntry.objects.count()}


def added(before: dict[str, int]) -> dict[str, int]:
    after = rows()
    return {name: after[name] - before[name] for name in after if after[name] != before[name]}


def audit_actions(order: Order) -> Counter:
    return Counter(AuditEntry.objects.filter(object_id=str(order.pk)).values_list("action", flat=True))


# Order placement ----------------------------------------------------------------------------------

def test_an_api_order_cut_off_before_its_quote_leaves_nothing_and_the_retry_places_one(monkeypatch):
    shop.load_shop()
    alice = shop.customer()
    api = Api(Client(), api_token_create(user=alice, name="test")[1])
    before = rows()
    # By the time the quote is made, the hold, the order, its keys and an audit row are written.
    drop = drop_before(monkeypatch, order_services, "quote_create")

    response = api.post("/api/v1/orders", order_body(), key="retry-me")

    assert drop.dropped, "the connection was not dropped"
    assert response.status_code == 503 and response["Retry-After"] == "5"
    error = response.json()["error"]
    assert error["code"] == "database_unavailable" and "same Idempotency-Key" in error["message"]
    assert added(before) == {}, "the interrupted placement left rows behind"

    retried = api.post("/api/v1/orders", order_body(), key="retry-me")
    assert retried.status_code == 201, retried.content
    assert added(before) == {"orders": 1, "bookings": 1, "booking_devices": 1, "quotes": 1, "idempotency": 1,
                             "audit": 3}  # order placed, hold placed, quote made
    order = Order.objects.get()
    assert order.reference == retried.json()["reference"] and order.state == "awaiting_payment"
    assert order.booking.state == Booking.State.LIVE and order.quote.expires_at == order.booking.expires_at

    again = api.post("/api/v1/orders", order_body(), key="retry-me")  # the client retries once more
    assert again.status_code == 200 and again["Idempotent-Replayed"] == "true"
    assert again.json()["reference"] == order.reference and Order.objects.count() == 1
    assert overlapping_live_rows() == []


def test_a_checkout_page_cut_off_mid_placement_says_so_in_the_customers_language(monkeypatch):
    shop.load_shop()
    client = Client()
    client.force_login(shop.customer())
    page = client.get(checkout_url())
    token = page.context["form"].initial["submission"]
    before = rows()
    drop = drop_before(monkeypatch, order_services, "audit_record")  # after the hold and the order's row

    with translation.override("pt"):
        portuguese = checkout_url()
    response = client.post(portuguese, form_data(submission=token))

    assert drop.dropped
    assert response.status_code == 503 and response["Retry-After"] == "5"
    body = response.content.decode()
    # The database answers again by the time the page is made: the checkout comes back, in Portuguese, with
    # what was sent and the reason (web.order_views: checkout.on_database_down).
    assert 'lang="pt' in body and "não sabemos se o que você enviou foi salvo" in body, body
    assert response.context["form"]["name"].value() == form_data(submission=token)["name"]
    assert added(before) == {}
    # The customer presses the button again: the same submission token places one order.
    done = client.post(checkout_url(), form_data(submission=token))
    assert done.status_code == 302 and Order.objects.count() == 1
    assert done.url == reverse("order", kwargs={"reference": Order.objects.get().reference})


# Access preparation --------------------------------------------------------------------------------

class DropsInside(Counting):
    """Drops the connection while it is doing ``step``, the first time only (then reads the database,
    as a real provisioner may, and fails on the dead connection)."""

    def __init__(self, step: str):
        super().__init__()
        self.step, self.armed = step, True

    def run(self, step, order):
        if self.armed and getattr(step, "value", step) == self.step:
            self.armed = False
            kill_connection()
        return super().run(step, order)


@pytest.mark.parametrize("step", ["allocate_devices", "install_ssh_keys", "deliver_access"])
def test_a_provisioning_step_cut_off_is_redone_once_by_the_next_sweep_and_not_counted_as_a_failure(
        monkeypatch, step):
    shop.load_shop()
    order = paid_order()
    provisioner = DropsInside(step)
    monkeypatch.setattr(fulfilment, "get_provisioner", lambda: provisioner)

    first = run_once()  # the worker's sweeps, as ``anchorgpu worker`` runs them

    assert first["provision_due"] == -1, first
    assert [name for name, result in first.items() if result == -1] == ["provision_due"]  # the others ran
    failed = SweepRecord.objects.get(name="provision_due")
    assert failed.failures == 1 and failed.last_error.startswith("OperationalError")
    order.refresh_from_db()
    done_before = STEPS[:STEPS.index(step)]
    assert [s.step for s in ProvisioningStep.objects.filter(order=order).order_by("id")] == done_before
    # The step's claim (its lease, and the move to provisioning) was committed before the step's work began;
    # the lease is this process's own and no longer held, so the next sweep takes it back at once.
    assert order.state == "provisioning" and order.lease_step == step
    assert (order.provisioning_attempts, order.last_error) == (0, "")  # the database's fault, not the step's
    assert not order.access_host

    second = run_once()

    assert second["provision_due"] == 1
    order.refresh_from_db()
    assert order.state == "active" and order.access_host and order.access_port
    assert [s.step for s in ProvisioningStep.objects.filter(order=order).order_by("id")] == STEPS
    actions = audit_actions(order)
    assert actions["provisioning_step"] == len(STEPS) and actions["provisioning_error"] == 0
    # Every step completed exactly once: the one cut off had not completed the first time.
    assert provisioner.done == Counter({(order.pk, s): 1 for s in STEPS})
    assert SweepRecord.objects.get(name="provision_due").runs == 2


def test_a_step_cut_off_after_its_row_was_written_is_not_recorded_twice(monkeypatch):
    shop.load_shop()
    order = paid_order()
    provisioner = Counting()
    # The step's row is inserted, then its audit row: the connection drops between the two.
    drop_before(monkeypatch, fulfilment, "audit_record")
    with pytest.raises(Exception) as failure:
        fulfilment.provision_due(provisioner=provisioner)
    assert type(failure.value).__name__ in {"OperationalError", "InterfaceError"}
    assert ProvisioningStep.objects.filter(order=order).count() == 0
    fresh_order = Order.objects.get(pk=order.pk)
    # The claim committed (provisioning, the lease); the record transaction was lost with the connection.
    assert fresh_order.state == "provisioning" and fresh_order.provisioning_attempts == 0
    assert fresh_order.lease_step == "allocate_devices"

    assert fulfilment.provision_due(provisioner=provisioner) == 1
    assert [s.step for s in ProvisioningStep.objects.filter(order=order).order_by("id")] == STEPS
    assert audit_actions(order)["provisioning_step"] == len(STEPS)
    # The provisioner did the first step twice (it is idempotent); it was recorded once.
    assert provisioner.done[(order.pk, "allocate_devices")] == 2
    assert all(provisioner.done[(order.pk, s)] == 1 for s in STEPS[1:])


# Payment evaluation --------------------------------------------------------------------------------

@pytest.fixture
def chain(tester_w3):
    return ChainShop(tester_w3)


def test_a_payment_evaluation_cut_off_before_the_invoice_is_redone_once_by_the_next_poll(chain, monkeypatch):
    order = chain.place("eth")
    txid = chain.send(order, order.quote.amount)
    chain.mine(CONFIRMATIONS)
    before = rows()
    # The watcher found the transfer, recorded it and moved the order towards PAID; the invoice comes last.
    drop = drop_before(monkeypatch, payment_services, "invoice_issue")

    report = chain.poll("eth")

    assert drop.dropped
    assert not report.ok and "record" in report.error and report.recorded == 0
    assert added(before) == {}, "a half-applied payment was left behind"
    assert fresh(order).state == "awaiting_payment" and fresh(order).paid_at is None

    again = chain.poll("eth")  # the next poll reads the same block again

    assert again.ok and again.recorded == 1
    paid = fresh(order)
    assert paid.state == "paid" and paid.paid_at is not None
    transfer = Transfer.objects.get()
    assert (transfer.order_id, transfer.txid, transfer.amount) == (order.pk, txid, order.quote.amount)
    invoice = Invoice.objects.get()
    assert invoice.order_id == order.pk
    assert audit_actions(order)["transfer_record"] == 1 and Booking.objects.get().kind == Booking.Kind.CONFIRMED
    assert chain.poll("eth").recorded == 0 and Invoice.objects.count() == 1  # and nothing more later
