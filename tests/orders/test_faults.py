"""A host marked faulty under paid terms, cleared, and the orders it hit credited by the rule: exact to the cent,
numbered without gaps, never twice, never beyond what the invoice still holds."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from fractions import Fraction

import pytest

from anchorgpu.allocation.models import BookingDevice
from anchorgpu.audit.models import AuditEntry
from anchorgpu.billing.models import CreditNote, CustomerReason
from anchorgpu.fleet.models import Host, HostFault
from anchorgpu.orders.credits import order_credit, order_credit_issue
from anchorgpu.orders.errors import InvalidOrder, NotAllowedNow
from anchorgpu.orders.faults import fault_credits_due, host_fault_clear, host_mark_faulty, late_access_credits_due
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.models import OperatorEvent, Order, ProvisioningStep
from anchorgpu.payments.services import owed_back
from tests import shop

MINUTE, HOUR = timedelta(minutes=1), timedelta(hours=1)
REFUND_ADDRESS = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"


@pytest.fixture
def shop_db(db):
    shop.load_shop()


def fresh(order: Order) -> Order:
    return Order.objects.select_related("booking", "quote", "invoice").get(pk=order.pk)


def active(user, quantity: int) -> Order:
    order = shop.place(user, product="h200-141gb", quantity=quantity)
    shop.pay(order, txid=f"{order.pk:064x}")
    order = fresh(order)
    assert provision_due(now=order.starts_at + MINUTE) == 1
    order = fresh(order)
    assert order.state == "active"
    return order


def host_of(order: Order) -> Host:
    (host_id,) = set(BookingDevice.objects.filter(booking=order.booking).values_list("device__host_id", flat=True))
    return Host.objects.get(pk=host_id)


def expected(order: Order, lost: timedelta) -> Decimal:
    """The rule by hand: total × 2 × lost / term, capped at the total, half up to the cent."""
    total = Fraction(order.invoice.total)
    term = order.ends_at - order.starts_at
    share = min(total * 2 * Fraction(lost // timedelta(microseconds=1), term // timedelta(microseconds=1)), total)
    return Decimal(int((share * 100 + Fraction(1, 2)) // 1)) / 100


@pytest.fixture
def three(shop_db):
    """Two active orders on one H200 host, one on the other."""
    alice = shop.customer()
    orders = [active(alice, 4), active(alice, 4), active(alice, 8)]
    by_host: dict[int, list[Order]] = {}
    for order in orders:
        by_host.setdefault(host_of(order).pk, []).append(order)
    pair = next(v for v in by_host.values() if len(v) == 2)
    (single,) = next(v for v in by_host.values() if len(v) == 1)
    return Host.objects.get(pk=host_of(pair[0]).pk), pair, single


def test_marking_a_host_faulty_flags_its_orders_only_and_takes_it_off_sale(three):
    host, (a, b), other = three
    at = a.starts_at + HOUR + timedelta(seconds=17, microseconds=250000)
    fault = host_mark_faulty(host=host, actor="ops", reason="GPU 3 fell off the bus", at=at, now=at + MINUTE)
    host.refresh_from_db()
    assert host.sale_block == "Fault: GPU 3 fell off the bus"
    assert sorted(fault.orders) == sorted([a.pk, b.pk])
    flagged = set(AuditEntry.objects.filter(action="host_fault").values_list("object_id", flat=True))
    assert flagged == {str(a.pk), str(b.pk)}
    event = OperatorEvent.objects.get(host=host, key=f"fault:{fault.pk}")
    assert a.reference in event.text and b.reference in event.text and other.reference not in event.text
    with pytest.raises(NotAllowedNow):
        host_mark_faulty(host=host, actor="ops", reason="again", now=at + 2 * MINUTE)
    # Nothing is credited while the fault is open and the terms run.
    assert fault_credits_due(now=at + 2 * MINUTE) == 0
    assert not CreditNote.objects.exists()


def test_clearing_credits_each_order_exactly_numbered_without_gaps_and_only_once(three):
    host, (a, b), other = three
    at = a.starts_at + HOUR + timedelta(seconds=17, microseconds=250000)
    fault = host_mark_faulty(host=host, actor="ops", reason="PSU failure", at=at, now=at + MINUTE)
    cleared = at + timedelta(hours=7, minutes=3, seconds=41, microseconds=500000)
    host_fault_clear(fault=fault, actor="ops", reason="PSU replaced", at=cleared, now=cleared + MINUTE)

    host.refresh_from_db()
    assert host.sale_block == ""
    notes = list(CreditNote.objects.order_by("sequence"))
    assert [n.sequence for n in notes] == [1, 2]
    year = notes[0].year
    assert [n.number for n in notes] == [f"CN-{year}-000001", f"CN-{year}-000002"]
    by_order = {n.invoice.order_id: n for n in notes}
    for order in (a, b):
        order = fresh(order)
        note = by_order[order.pk]
        assert note.amount == expected(order, cleared - at) > 0
        assert note.customer_reason == CustomerReason.FAULT and note.refund is None
        assert "host fault" in note.customer_reason_text
        assert owed_back(order) > 0 and order.refund_due  # the money goes back through the refund flow
    assert other.pk not in by_order
    fault.refresh_from_db()
    assert fault.settled_at is not None
    # Again, by the sweep or by hand: nothing more.
    assert fault_credits_due(now=cleared + HOUR) == 0
    assert order_credit_issue(order=a, actor="ops", now=cleared + HOUR) == []
    assert CreditNote.objects.count() == 2
    # The next credit note of the year takes the next number.
    c = fresh(other)
    ProvisioningStep.objects.filter(order=c, step="deliver_access").update(finished_at=c.starts_at + HOUR)
    (late,) = order_credit_issue(order=c, actor="ops", now=c.starts_at + 2 * HOUR)
    assert late.sequence == 3 and late.amount == expected(c, HOUR - timedelta(minutes=15))


def test_a_term_ending_before_the_clear_is_credited_up_to_its_end_by_the_sweep(three):
    host, (a, b), _other = three
    at = a.ends_at - timedelta(hours=2, seconds=0.5)
    fault = host_mark_faulty(host=host, actor="ops", reason="fans", at=at, now=at + MINUTE)
    after = max(a.ends_at, b.ends_at) + MINUTE
    assert fault_credits_due(now=after) == 2
    for order in (a, b):
        order = fresh(order)
        lost = order.ends_at - at if order.ends_at > at else timedelta(0)
        assert order.invoice.credit_notes.get().amount == expected(order, lost)
    fault.refresh_from_db()
    assert fault.settled_at is None  # still open: the host stays off sale
    host_fault_clear(fault=fault, actor="ops", reason="fans replaced", now=after + HOUR)
    assert CreditNote.objects.count() == 2
    fault.refresh_from_db()
    assert fault.settled_at is not None


def test_late_access_is_credited_from_the_provisioning_step_times(shop_db):
    order = active(shop.customer(), 1)
    step = ProvisioningStep.objects.get(order=order, step="deliver_access")
    delivered = order.starts_at + timedelta(minutes=15, seconds=1)
    ProvisioningStep.objects.filter(pk=step.pk).update(finished_at=delivered)
    assert order_credit(order, now=delivered).due == expected(order, timedelta(seconds=1))
    ProvisioningStep.objects.filter(pk=step.pk).update(finished_at=order.starts_at + timedelta(minutes=15))
    assert order_credit(order, now=delivered).due == 0  # within the grace
    late = order.starts_at + timedelta(hours=4, minutes=15)
    ProvisioningStep.objects.filter(pk=step.pk).update(finished_at=late)
    assert late_access_credits_due(now=late + MINUTE) == 1
    assert fresh(order).invoice.credit_notes.get().amount == expected(order, timedelta(hours=4))
    assert late_access_credits_due(now=late + 2 * MINUTE) == 0


def test_a_refunded_order_gets_nothing_and_a_partly_refunded_one_at_most_the_rest(shop_db):
    from anchorgpu.payments.refunds import RefundInput, refund_record
    from anchorgpu.payments.services import refund_address_set

    alice = shop.customer()
    order = active(alice, 8)
    refund_address_set(order=order, actor=alice.email, address=REFUND_ADDRESS)
    # Nearly all of the price refunded first: 1 % of it is left on the invoice.
    part = order.quote.amount * 99 // 100
    refund_record(order=order, actor="ops", refund=RefundInput(
        address=REFUND_ADDRESS, amount=part, rate_choice="quote", txid="cd" * 32, reason="goodwill",
        whole_order=False, of_price=True, customer_reason="goodwill"))
    order = fresh(order)
    open_amount = order.invoice.total - sum(n.amount for n in order.invoice.credit_notes.all())
    host = host_of(order)
    at = order.starts_at + HOUR
    fault = host_mark_faulty(host=host, actor="ops", reason="dead host", at=at, now=at + MINUTE)
    host_fault_clear(fault=fault, actor="ops", reason="back", now=at + timedelta(days=2))
    note = order.invoice.credit_notes.filter(refund__isnull=True).get()
    assert expected(order, timedelta(days=2)) > open_amount
    assert note.amount == open_amount  # the rest, no more
    assert order_credit(fresh(order), now=at + timedelta(days=3)).due == 0

    other = active(alice, 8)
    refund_address_set(order=other, actor=alice.email, address=REFUND_ADDRESS)
    refund_record(order=other, actor="ops", refund=RefundInput(
        address=REFUND_ADDRESS, amount=other.quote.amount, rate_choice="quote", txid="ce" * 32,
        reason="refunded whole", whole_order=True, customer_reason="refund"))
    other = fresh(other)
    assert other.state == "refunded"
    ProvisioningStep.objects.filter(order=other, step="deliver_access").update(finished_at=other.starts_at + HOUR)
    assert order_credit_issue(order=other, actor="ops", now=other.starts_at + 2 * HOUR) == []


def test_bad_input_is_refused_with_a_message(three):
    host, (a, _b), _ = three
    now = a.starts_at + HOUR
    with pytest.raises(InvalidOrder, match="reason"):
        host_mark_faulty(host=host, actor="ops", reason="  ", now=now)
    with pytest.raises(InvalidOrder, match="future"):
        host_mark_faulty(host=host, actor="ops", reason="x", at=now + MINUTE, now=now)
    fault = host_mark_faulty(host=host, actor="ops", reason="x", at=now - MINUTE, now=now)
    with pytest.raises(InvalidOrder):
        host_fault_clear(fault=fault, actor="ops", reason="y", at=now - HOUR, now=now)
    host_fault_clear(fault=fault, actor="ops", reason="y", now=now)
    with pytest.raises(NotAllowedNow):
        host_fault_clear(fault=HostFault.objects.get(pk=fault.pk), actor="ops", reason="y", now=now)


def test_a_block_set_before_the_fault_comes_back_when_it_is_cleared(three):
    host, (a, _b), _ = three
    Host.objects.filter(pk=host.pk).update(sale_block="Discovery: driver too old")
    now = a.starts_at + HOUR
    fault = host_mark_faulty(host=Host.objects.get(pk=host.pk), actor="ops", reason="x", now=now)
    assert Host.objects.get(pk=host.pk).sale_block == "Fault: x"
    host_fault_clear(fault=fault, actor="ops", reason="y", now=now + HOUR)
    assert Host.objects.get(pk=host.pk).sale_block == "Discovery: driver too old"


def test_the_customer_sees_the_service_credit_on_the_order_page(client, shop_db):
    alice = shop.customer()
    order = active(alice, 1)
    ProvisioningStep.objects.filter(order=order, step="deliver_access").update(finished_at=order.starts_at + HOUR)
    (note,) = order_credit_issue(order=order, actor="system", now=order.starts_at + 2 * HOUR)
    client.force_login(alice)
    html = client.get(f"/en/orders/{order.reference}/").content.decode()
    assert f"Service credit {note.number}" in html and "late access" in html
    assert f"/en/orders/{order.reference}/documents/credit-notes/{note.number}.pdf" in html
    assert "Service credit for time lost through our fault" in html and "owed back to you for a service credit" in html
    assert "More than the quote arrived" not in html


def test_a_move_ends_the_fault_and_its_downtime_runs_until_access_is_delivered_again(three):
    """The move itself is ``orders.moves`` (another branch): here its audit row, and the steps started again."""
    from anchorgpu.audit.services import audit_record
    from anchorgpu.orders.credits import intervals_closed

    host, (a, _b), _other = three
    fault_at, moved_at = a.starts_at + 2 * HOUR, a.starts_at + 3 * HOUR
    fault = host_mark_faulty(host=host, actor="ops", reason="ECC errors", at=fault_at, now=fault_at + MINUTE)
    audit_record(actor="ops", action="order_move", obj=a, reason="off the faulty host",
                 data={"at": moved_at.isoformat(), "access_moved": True})
    ProvisioningStep.objects.filter(order=a).delete()  # the move prepares access again on the new cards
    assert not intervals_closed(fresh(a), now=moved_at + MINUTE)
    assert order_credit(fresh(a), now=moved_at + 10 * MINUTE).credit.lost == HOUR + 10 * MINUTE
    back = moved_at + timedelta(minutes=40, seconds=3)
    ProvisioningStep.objects.create(order=a, step="deliver_access", started_at=back - MINUTE, finished_at=back)
    audit_record(actor="system", action="provisioning_step", obj=a,
                 data={"step": "deliver_access", "finished_at": back.isoformat()})
    assert intervals_closed(fresh(a), now=back + MINUTE)
    # The fault is still open on the old host, but this order's loss ended when access came back.
    assert fault_credits_due(now=back + MINUTE) == 1
    note = fresh(a).invoice.credit_notes.get()
    assert note.amount == expected(fresh(a), back - fault_at)
    assert "move to other cards" in note.customer_reason_text and "host fault" in note.customer_reason_text
    fault.refresh_from_db()
    assert fault.settled_at is None


def test_a_fault_recorded_as_started_before_a_term_ended_credits_that_completed_term(shop_db):
    from anchorgpu.orders.lifecycle import terms_end_due

    order = active(shop.customer(), 1)
    host = host_of(order)
    assert terms_end_due(now=order.ends_at) == 1
    assert fresh(order).state == "completed"
    fault = host_mark_faulty(host=host, actor="ops", reason="found in the logs: fans failed",
                             at=order.ends_at - HOUR, now=order.ends_at + HOUR)
    assert fault.orders == [order.pk]
    host_fault_clear(fault=fault, actor="ops", reason="fans replaced", now=order.ends_at + 2 * HOUR)
    assert fresh(order).invoice.credit_notes.get().amount == expected(fresh(order), HOUR)


def test_access_is_not_prepared_on_a_host_marked_faulty(shop_db):
    order = shop.place(shop.customer(), product="h200-141gb", quantity=1)
    shop.pay(order, txid=f"{order.pk:064x}")
    order = fresh(order)
    fault = host_mark_faulty(host=host_of(order), actor="ops", reason="PSU", now=order.starts_at)
    assert provision_due(now=order.starts_at + MINUTE) == 0
    waiting = fresh(order)
    assert waiting.state == "paid" and "marked faulty" in waiting.last_error
    assert waiting.provisioning_attempts == 0  # a wait, not a failure
    host_fault_clear(fault=fault, actor="ops", reason="fixed", now=order.starts_at + 2 * MINUTE)
    assert provision_due(now=order.starts_at + 3 * MINUTE) == 1
    assert fresh(order).state == "active"


def test_a_fault_offers_each_order_a_move_and_the_real_move_ends_its_loss(three):
    """The whole path with the real services: the fault's event and page propose other cards for each order it
    hits; the operator moves one there (``order_move``), the worker prepares access again, and the credit covers
    the fault until the move and the move until access is back, without anyone adding it up."""
    from anchorgpu.orders.moves import order_move

    host, (a, b), other = three
    fault_at = a.starts_at + 2 * HOUR
    host_mark_faulty(host=host, actor="ops", reason="ECC errors", at=fault_at, now=fault_at + MINUTE)
    event = OperatorEvent.objects.get(key__startswith="fault:")
    offers = event.payload["data"]["fault"]["move_offers"]
    # 4 + 4 cards on the faulty host; the other host has 8 cards of which `other` takes all 8: nothing is free.
    assert set(offers) == {a.reference, b.reference}
    free_elsewhere = [o for o in offers.values() if o.startswith("move proposed to ")]
    assert not free_elsewhere and all(o.startswith("no move: ") for o in offers.values())
    assert f"{a.reference} (active" in event.text and "no move: " in event.text

    # The other host's term ends early: its cards are free, and the offer now proposes them.
    from anchorgpu.orders.faults import fault_move_offers
    from anchorgpu.orders.lifecycle import order_end_now

    moved_at = fault_at + HOUR
    order_end_now(order=fresh(other), actor="ops", reason="customer finished early", now=moved_at - MINUTE)
    from anchorgpu.orders.wipes import wipes_due
    wipes_due(now=moved_at - MINUTE)
    offer = fault_move_offers([fresh(a)], now=moved_at)[a.pk]
    cards_on_other = set(BookingDevice.objects.filter(booking=other.booking).values_list("device__uid", flat=True))
    assert offer.startswith("move proposed to ")
    assert set(offer.removeprefix("move proposed to ").split(" from ")[0].split(", ")) <= cards_on_other

    order_move(order=fresh(a), actor="ops", reason="off the faulty host", now=moved_at)
    assert fresh(a).state == "provisioning"
    back = moved_at + 5 * MINUTE
    provision_due(now=back)
    a = fresh(a)
    assert a.state == "active"
    # Access on the other host did not wait for the faulty host's wipe, which is still due (and retried).
    assert a.moves.get().wipe_due_at is not None and a.moves.get().wiped_at is None
    delivered = ProvisioningStep.objects.get(order=a, step="deliver_access").finished_at
    assert fault_credits_due(now=delivered + MINUTE) >= 1
    note = fresh(a).invoice.credit_notes.get()
    assert note.amount == expected(fresh(a), delivered - fault_at)
    assert note.customer_reason == CustomerReason.FAULT


def test_the_customer_is_emailed_each_service_credit_once_in_their_language(three, mailoutbox):
    from anchorgpu.orders.models import OrderEmail
    from anchorgpu.orders.notify import emails_send_due

    host, (a, b), _other = three
    Order.objects.filter(pk=b.pk).update(language="pt")
    at = a.starts_at + HOUR
    fault = host_mark_faulty(host=host, actor="ops", reason="PSU failure", at=at, now=at + MINUTE)
    cleared = at + 3 * HOUR
    host_fault_clear(fault=fault, actor="ops", reason="PSU replaced", at=cleared, now=cleared + MINUTE)
    assert fault_credits_due(now=cleared + HOUR) == 0  # nothing more to credit, nothing more to send
    rows = OrderEmail.objects.filter(kind=OrderEmail.Kind.SERVICE_CREDIT)
    assert sorted(rows.values_list("order_id", flat=True)) == sorted([a.pk, b.pk])
    mailoutbox.clear()
    emails_send_due(now=cleared + 2 * MINUTE)
    sent = [m for m in mailoutbox if "service credit" in m.subject or "crédito de serviço" in m.subject]
    assert len(sent) == 2
    note_a = fresh(a).invoice.credit_notes.get()
    mail_a = next(m for m in sent if a.reference in m.subject)
    assert note_a.number in mail_a.body and str(note_a.amount) in mail_a.body and note_a.currency in mail_a.body
    assert "refund address" in mail_a.body
    note_b = fresh(b).invoice.credit_notes.get()
    mail_b = next(m for m in sent if b.reference in m.subject)
    assert mail_b.subject.startswith(f"Pedido {b.reference}") and note_b.number in mail_b.body
    assert "crédito de serviço" in mail_b.body
