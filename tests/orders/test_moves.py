"""Moving an order's term to other cards (``orders.moves``), with the simulated provisioner: both passes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from anchorgpu.access.records import order_work
from anchorgpu.allocation.errors import BookingOfLiveOrder, NoLongerAvailable
from anchorgpu.allocation.moves import booking_move
from anchorgpu.allocation.selectors import current_slots
from anchorgpu.audit.models import AuditEntry
from anchorgpu.fleet.models import Device, Host
from anchorgpu.orders.errors import NotAllowedNow
from anchorgpu.orders.fulfilment import order_step_retry, provision_due
from anchorgpu.orders.lifecycle import terms_end_due
from anchorgpu.orders.models import Move, OperatorEvent, Order, ProvisioningStep
from anchorgpu.orders.move_wipes import move_wipes_due
from anchorgpu.orders.moves import move_offer, order_move
from anchorgpu.orders.notify import emails_send_due
from anchorgpu.orders.provisioner import ProvisioningError, SimulatedProvisioner
from anchorgpu.orders.provisioning import PLAN
from anchorgpu.orders.retry import MAX_WIPE_FAILURES
from anchorgpu.orders.wipes import wipe_blocker, wipes_due
from tests import shop

pytestmark = pytest.mark.django_db
STEPS = [step.value for step in PLAN]
DAY = timedelta(days=1)


@pytest.fixture
def alice(db):
    shop.load_shop()
    return shop.customer()


def active(order: Order, n: int) -> Order:
    """``order`` paid by the ``n``-th made-up transfer and prepared: an active term."""
    shop.pay(order, txid=shop.txid("btc", n))
    provision_due()
    order = Order.objects.get(pk=order.pk)
    assert order.state == "active", order.state
    return order


def cards_of(order: Order) -> set[int]:
    return set(current_slots(order.booking_id).values_list("device_id", flat=True))


def hosts_of(ids) -> set[str]:
    return set(Device.objects.filter(pk__in=list(ids)).values_list("host__name", flat=True))


def state_changes(order: Order) -> list[tuple[str, str]]:
    return list(AuditEntry.objects.filter(object_type="orders.order", object_id=str(order.pk), action="order_state")
                .order_by("id").values_list("from_state", "to_state"))


def test_an_active_order_is_prepared_again_on_the_new_cards_and_the_old_ones_are_wiped(alice, mailoutbox):
    order = shop.activate(shop.place(alice, options=("checkpoint-storage-1tb",)))
    old = cards_of(order)
    first_round = list(order.steps.order_by("id").values_list("step", flat=True))
    assert first_round == STEPS
    offer = move_offer(order=order)
    assert offer.possible and not set(offer.to_devices) & old

    move = order_move(order=order, actor="ops", reason="fan failing")
    order.refresh_from_db()
    assert order.state == "provisioning" and order.access_host == "" and not order.steps.exists()
    assert set(move.from_devices) == old and set(move.to_devices) == set(offer.to_devices) == cards_of(order)
    assert move.from_hosts == ", ".join(sorted(hosts_of(old))) and move.access_moved and move.access_delivered
    assert [s["step"] for s in move.previous_steps] == STEPS  # the first round is kept on the move
    assert move.wipe_pending
    # The new cards wait for the old ones' wipe (one host may hold both, under the order's container name).
    assert "when it was moved" in wipe_blocker(order)
    assert provision_due() == 0
    order.refresh_from_db()
    assert order.state == "provisioning" and "waiting for the wipe" in order.last_error

    assert move_wipes_due() == 1
    move.refresh_from_db()
    assert move.wiped_at is not None
    old_uids = set(Device.objects.filter(pk__in=old).values_list("uid", flat=True))
    assert set(move.wipe_detail["devices"]) == old_uids  # the wipe targets the old cards only
    assert wipe_blocker(order) == ""

    assert provision_due() == 1
    order.refresh_from_db()
    assert order.state == "active"
    new_uids = set(Device.objects.filter(pk__in=cards_of(order)).values_list("uid", flat=True))
    allocated = ProvisioningStep.objects.get(order=order, step="allocate_devices").detail
    assert set(allocated["devices"]) == new_uids
    assert order.access_host.startswith(next(iter(hosts_of(cards_of(order)))))
    assert state_changes(order)[-3:] == [("provisioning", "active"), ("active", "provisioning"),
                                         ("provisioning", "active")]
    assert [s for s in state_changes(order) if s[1] == "active"] == [("provisioning", "active")] * 2
    assert AuditEntry.objects.filter(action="order_move", object_id=str(order.pk)).count() == 1
    assert AuditEntry.objects.filter(action="move_wipe", object_id=str(order.pk)).count() == 1

    # The email says what moved and the truth about the data.
    assert list(order.emails.filter(kind="moved").values_list("kind", flat=True)) == ["moved"]
    # One email for the move, not a second "preparing access" one beside it.
    assert not order.emails.filter(kind="state_changed", state="provisioning", sent_at__isnull=True).exists()
    emails_send_due()
    moved_mail = next(m for m in mailoutbox if "moved to other cards" in m.subject)
    body = moved_mail.body
    assert "Nothing on the old machine's disks is copied to the new one" in body
    assert "What you saved to your off-machine checkpoint storage is still there" in body
    for uid in old_uids | new_uids:
        assert uid in body

    # The term ends as it was bought, and its wipe is of the new cards.
    assert (order.starts_at, order.ends_at) == (Order.objects.get(pk=order.pk).starts_at, order.ends_at)
    terms_end_due(now=order.ends_at)
    wipes_due(now=order.ends_at)
    wipe = ProvisioningStep.objects.get(order=order, step="wipe").detail
    assert set(wipe["devices"]) == new_uids


def test_the_order_page_shows_the_move_and_the_data_question(alice, client):
    order = shop.activate(shop.place(alice))
    move = order_move(order=order, actor="ops", reason="psu")
    client.force_login(alice)
    response = client.get(reverse("order", kwargs={"reference": order.reference}))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Your term was moved" in page
    for uid in Device.objects.filter(pk__in=move.from_devices + move.to_devices).values_list("uid", flat=True):
        assert uid in page
    assert "nothing on the old machine's disks is copied to the new cards" in page
    assert "This order has no off-machine checkpoint storage" in page
    assert "local NVMe, which is scratch space" in page


def test_a_paid_order_not_started_only_changes_cards(alice):
    start = (timezone.now() + 2 * DAY).replace(minute=0, second=0, microsecond=0)
    order = shop.place(alice, start=start)
    shop.pay(order)
    order = Order.objects.get(pk=order.pk)
    old = cards_of(order)
    move = order_move(order=order, actor="ops", reason="rebalance")
    order.refresh_from_db()
    assert order.state == "paid" and not move.access_moved and not move.wipe_pending
    assert cards_of(order) == set(move.to_devices) and not cards_of(order) & old
    assert not current_slots(order.booking_id).filter(device_id__in=old).exists()
    assert order.booking.slots.count() == 1  # swapped, not trimmed: the term had not started
    assert state_changes(order)[-1] == ("awaiting_payment", "paid")


def test_operator_cards_that_are_busy_are_refused_and_nothing_changes(alice):
    order = shop.activate(shop.place(alice))
    other = active(shop.place(shop.customer("bob@example.com")), 1)
    with pytest.raises(NoLongerAvailable, match="is not free from"):
        order_move(order=order, devices=sorted(cards_of(other)), actor="ops", reason="x")
    order.refresh_from_db()
    assert order.state == "active" and order.steps.count() == len(STEPS) and not Move.objects.exists()
    with pytest.raises(NotAllowedNow):
        order_move(order=shop.place(alice, quantity=1), actor="ops", reason="x", now=order.ends_at + DAY)


def test_a_later_term_on_the_old_cards_waits_for_their_wipe(alice):
    order = shop.activate(shop.place(alice))
    old = sorted(cards_of(order))
    move = order_move(order=order, actor="ops", reason="disk")
    bob = shop.place(shop.customer("bob@example.com"))
    shop.pay(bob, txid=shop.txid("btc", 1))
    bob = Order.objects.get(pk=bob.pk)
    if not cards_of(bob) & set(old):
        with pytest.raises(BookingOfLiveOrder):  # an order's booking moves with its order
            booking_move(booking=bob.booking, devices=old, actor="ops", reason="onto the old card")
        order_move(order=bob, devices=old, actor="ops", reason="onto the old card")
    assert "after its move" in wipe_blocker(bob)
    move_wipes_due()
    move.refresh_from_db()
    assert move.wiped_at is not None
    assert wipe_blocker(bob) == ""  # the old card's earlier tenant is wiped; its new cards are not bob's


def test_the_ssh_provisioner_reads_the_cards_the_order_holds_now(alice):
    order = shop.activate(shop.place(alice))
    move = order_move(order=order, actor="ops", reason="psu")
    Host.objects.update(ssh_address="192.0.2.10")
    for device in Device.objects.all():
        Device.objects.filter(pk=device.pk).update(gpu_uuid=f"GPU-{device.pk:08d}")
    order = Order.objects.get(pk=order.pk)
    now_work = order_work(order)
    assert {p.name for p in now_work.parts} == hosts_of(move.to_devices)
    assert sum(len(p.cards) for p in now_work.parts) == 1
    left = order_work(order, move.from_devices)
    assert {p.name for p in left.parts} == hosts_of(move.from_devices)


class WipeRefused(SimulatedProvisioner):
    def wipe_cards(self, order, device_ids):
        raise ProvisioningError(f"order {order.reference}: host unreachable for the wipe")


def test_a_failing_wipe_of_the_old_cards_is_counted_alerted_and_retried(alice):
    order = shop.activate(shop.place(alice))
    move = order_move(order=order, actor="ops", reason="psu")
    for attempt in range(1, MAX_WIPE_FAILURES + 1):
        assert move_wipes_due(provisioner=WipeRefused(), now=move.at + timedelta(hours=attempt)) == 1
    move.refresh_from_db()
    assert move.wipe_attempts == MAX_WIPE_FAILURES and move.wiped_at is None and "unreachable" in move.wipe_error
    assert move_wipes_due(provisioner=WipeRefused(), now=move.at + DAY) == 0  # given up until an operator acts
    assert OperatorEvent.objects.filter(order=order, kind=OperatorEvent.Kind.WIPE_FAILED, key=f"move:{move.pk}")
    assert provision_due() == 0  # the new cards still wait
    order_step_retry(order=order, actor="ops", reason="host back")
    move.refresh_from_db()
    assert move.wipe_attempts == 0
    assert move_wipes_due() == 1 and provision_due() == 1
    assert Order.objects.get(pk=order.pk).state == "active"


def test_the_operator_moves_an_order_from_its_admin_page(alice, admin_client):
    order = shop.activate(shop.place(alice))
    change = reverse("admin:orders_order_change", args=[order.pk])
    tool = reverse("admin:orders_order_move_term", args=[order.pk])
    assert tool in admin_client.get(change).content.decode()
    page = admin_client.get(tool).content.decode()
    assert "Leave empty for the shop&#x27;s proposal" in page or "Leave empty for the shop's proposal" in page
    mine = Device.objects.filter(pk__in=cards_of(order)).values_list("uid", flat=True)[0]
    refused = admin_client.post(tool, {"reason": "fan", "cards": mine})
    assert refused.status_code == 200 and "is not free from" in refused.content.decode()
    done = admin_client.post(tool, {"reason": "fan", "cards": ""}, follow=True)
    assert done.redirect_chain[-1][0] == change
    assert "The term was moved from" in done.content.decode()
    assert Order.objects.get(pk=order.pk).state == "provisioning"
    assert "fan" in done.content.decode()  # the move is listed on the order's page


@pytest.mark.postgres_only
@pytest.mark.db_race
@pytest.mark.django_db(transaction=True)
def test_two_operators_moving_one_running_term_at_once_move_it_once():
    from tests.allocation.test_race import overlapping_live_rows, run_together

    shop.load_shop()
    order = shop.activate(shop.place(shop.customer()))
    results = run_together([lambda i=i: order_move(order=order, actor=f"ops{i}", reason="race").pk for i in range(4)])
    won = [value for outcome, value in results if outcome == "granted"]
    assert len(won) == 1, results
    for outcome, value in results:
        if outcome == "refused":
            assert isinstance(value, NotAllowedNow) and "not wiped yet" in str(value), value
    assert Move.objects.count() == 1 and overlapping_live_rows() == []
    assert Order.objects.get(pk=order.pk).state == "provisioning"


class StopsAtKeys(SimulatedProvisioner):
    def install_ssh_keys(self, order):
        raise ProvisioningError(f"order {order.reference}: keys not installed yet")


def test_an_order_moved_while_its_access_is_half_prepared_starts_again_on_the_new_cards(alice):
    order = shop.place(alice)
    shop.pay(order)
    provision_due(provisioner=StopsAtKeys())
    order = Order.objects.get(pk=order.pk)
    assert order.state == "provisioning" and order.steps.count() == 2 and order.retry_at is not None
    move = order_move(order=order, actor="ops", reason="host failing")
    order.refresh_from_db()
    assert move.access_moved and not move.access_delivered and move.wipe_pending
    assert [s["step"] for s in move.previous_steps] == STEPS[:2]
    assert order.state == "provisioning" and not order.steps.exists() and order.retry_at is None
    assert order.provisioning_attempts == 0
    move_wipes_due()
    provision_due()
    order.refresh_from_db()
    assert order.state == "active" and order.steps.count() == len(STEPS)
    assert set(ProvisioningStep.objects.get(order=order, step="allocate_devices").detail["devices"]) == set(
        Device.objects.filter(pk__in=move.to_devices).values_list("uid", flat=True))


def test_the_moves_command_offers_moves_and_lists_a_windows_hits(alice, capsys):
    from django.core.management import call_command

    from anchorgpu.orders.maintenance import maintenance_enter

    order = shop.activate(shop.place(alice))
    call_command("moves", "offer", order.reference)
    assert f"{order.reference}: from " in capsys.readouterr().out
    host = Host.objects.filter(devices__in=cards_of(order)).distinct().get()
    now = timezone.now()
    result, _hits = maintenance_enter(host=host, start=now, end=now + DAY, actor="ops", reason="bios", now=now)
    call_command("moves", "window", str(result.booking.pk))
    assert f"#{order.booking_id} {order.reference}: to " in capsys.readouterr().out
    call_command("moves", "window", str(result.booking.pk), "--move-all")
    assert f"#{order.booking_id}: moved" in capsys.readouterr().out
    assert Order.objects.get(pk=order.pk).moves.get().actor == "cli"
