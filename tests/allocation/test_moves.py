"""Moving a booking to other cards (``allocation.moves``), both passes: SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from anchorgpu.allocation import services
from anchorgpu.allocation.errors import InvalidBookingState, InvalidRequest, NoLongerAvailable
from anchorgpu.allocation.models import Booking, BookingDevice
from anchorgpu.allocation.moves import booking_move, move_proposal
from anchorgpu.allocation.selectors import current_slots
from anchorgpu.audit.models import AuditEntry
from anchorgpu.fleet.models import Host
from tests import factories as f
from tests.allocation.test_race import overlapping_live_rows, run_together

pytestmark = pytest.mark.django_db

HOUR, DAY = timedelta(hours=1), timedelta(days=1)


@pytest.fixture
def now() -> datetime:
    return f.now_minute()


def confirmed(product, quantity: int, start: datetime, *, days: int = 3, now: datetime) -> Booking:
    booking = services.hold_place(product=product, quantity=quantity, start=start, term_days=days, now=now)
    return services.hold_confirm(booking=booking, now=now)


def rows(booking: Booking) -> list[tuple]:
    return sorted(BookingDevice.objects.filter(booking=booking)
                  .values_list("device__host__name", "device__index", "starts_at", "ends_at", "live"),
                  key=lambda row: (row[2], row[0], row[1]))


def current_hosts(booking: Booking) -> set[str]:
    return set(current_slots(booking.pk).values_list("device__host__name", flat=True))


def test_an_upcoming_term_changes_cards_whole(now):
    p = f.product()
    a, b = f.host(p, cards=2), f.host(p, cards=2)
    booking = confirmed(p, 2, now + DAY, now=now)
    assert current_hosts(booking) == {a.name}
    moved = booking_move(booking=booking, actor="ops", reason="rack work", now=now)
    assert moved.swapped and moved.at == now + DAY
    assert rows(booking) == [(b.name, 0, now + DAY, now + 4 * DAY, True), (b.name, 1, now + DAY, now + 4 * DAY, True)]
    entry = AuditEntry.objects.get(action="booking_move")
    assert (entry.actor, entry.reason, entry.object_id) == ("ops", "rack work", str(booking.pk))
    assert entry.data["from"] == sorted(a.devices.values_list("id", flat=True))
    assert entry.data["to"] == sorted(b.devices.values_list("id", flat=True))
    assert overlapping_live_rows() == []


def test_an_active_term_keeps_its_past_on_the_old_cards_and_runs_on_the_new_ones(now):
    p = f.product()
    a, b = f.host(p, cards=1), f.host(p, cards=1)
    booking = confirmed(p, 1, now - DAY, now=now - DAY)
    moved = booking_move(booking=booking, actor="ops", reason="fan", now=now)
    assert not moved.swapped and moved.at == now
    assert rows(booking) == [(a.name, 0, now - DAY, now, True), (b.name, 0, now, now + 2 * DAY, True)]
    assert current_hosts(booking) == {b.name}
    # The old card is free again from the move on: a new booking may take it.
    other = confirmed(p, 1, now + HOUR, now=now)
    assert current_hosts(other) == {a.name}
    assert overlapping_live_rows() == []
    # A second move trims the new cards too; the first ones stay as they were.
    c = f.host(p, cards=1)
    booking_move(booking=booking, actor="ops", reason="again", now=now + HOUR)
    assert rows(booking) == [(a.name, 0, now - DAY, now, True), (b.name, 0, now, now + HOUR, True),
                             (c.name, 0, now + HOUR, now + 2 * DAY, True)]


def test_the_proposal_prefers_one_host_and_the_best_fit(now):
    p = f.product()
    a = f.host(p, cards=2)
    booking = confirmed(p, 2, now + DAY, now=now)
    assert current_hosts(booking) == {a.name}
    wide = f.host(p, cards=4)
    fits = f.host(p, cards=2)
    scattered = [f.host(p, cards=1) for _ in range(2)]
    proposal = move_proposal(booking, now=now)
    assert proposal.possible and proposal.at == now + DAY and proposal.end == now + 4 * DAY
    assert set(proposal.to_devices) == set(fits.devices.values_list("id", flat=True))
    # Once that host is taken, the four-card host (one host) is proposed before two one-card hosts.
    confirmed(p, 2, now + DAY, now=now)
    proposal = move_proposal(booking, now=now)
    chosen = Host.objects.filter(devices__id__in=proposal.to_devices).distinct()
    assert list(chosen) == [wide], scattered


def test_lots_move_as_whole_nvlink_pairs(now):
    lot = f.product(cards_per_unit=2)
    a, b = f.host(lot, cards=2), f.host(lot, cards=4)
    booking = confirmed(lot, 1, now + DAY, now=now)
    assert current_hosts(booking) == {a.name}
    proposal = move_proposal(booking, now=now)
    pair = sorted(b.devices.filter(nvlink_pair=0).values_list("id", flat=True))
    assert list(proposal.to_devices) == pair
    half = b.devices.get(index=1).pk, b.devices.get(index=2).pk  # one card of each pair
    with pytest.raises(InvalidRequest, match="NVLink pair"):
        booking_move(booking=booking, devices=half, actor="ops", reason="x", now=now)
    booking_move(booking=booking, devices=pair, actor="ops", reason="x", now=now)
    assert sorted(current_slots(booking.pk).values_list("device_id", flat=True)) == pair


def test_blocked_and_maintenance_hosts_are_never_targets(now):
    p = f.product()
    a = f.host(p, cards=1)
    blocked, down = f.host(p, cards=1), f.host(p, cards=1)
    later = f.host(p, cards=1)
    booking = confirmed(p, 1, now + DAY, now=now)
    assert current_hosts(booking) == {a.name}
    Host.objects.filter(pk=blocked.pk).update(sale_block="host key changed")
    services.host_enter_maintenance(host=down, start=now + 2 * DAY, end=now + 3 * DAY, actor="ops", reason="psu",
                                    now=now)
    Host.objects.filter(pk=later.pk).update(status=Host.Status.MAINTENANCE)
    proposal = move_proposal(booking, now=now)
    assert not proposal.possible
    assert "No other cards are free for this term" in proposal.reason
    for host in (blocked, down, later):
        with pytest.raises(NoLongerAvailable):
            booking_move(booking=booking, devices=[host.devices.get().pk], actor="ops", reason="x", now=now)
    assert current_hosts(booking) == {a.name}


def test_operator_picked_cards_that_are_busy_are_refused_clearly(now):
    p = f.product()
    a, b = f.host(p, cards=1), f.host(p, cards=1)
    booking = confirmed(p, 1, now + DAY, days=7, now=now)
    services.hold_place(product=p, quantity=1, start=now + 5 * DAY, term_days=3, now=now)  # b, inside the term
    card = b.devices.get()
    with pytest.raises(NoLongerAvailable) as refused:
        booking_move(booking=booking, devices=[card.pk], actor="ops", reason="x", now=now)
    assert f"Card {card.uid} is not free from" in str(refused.value)
    assert "it is booked" in str(refused.value)
    with pytest.raises(InvalidRequest, match="Pick 1 card"):
        booking_move(booking=booking, devices=[], actor="ops", reason="x", now=now)
    with pytest.raises(InvalidRequest, match="Say why"):
        booking_move(booking=booking, actor="ops", reason=" ", now=now)
    assert current_hosts(booking) == {a.name} and not AuditEntry.objects.filter(action="booking_move").exists()


def test_a_move_gives_the_freed_part_to_the_maintenance_window(now):
    p = f.product()
    a, b = f.host(p, cards=2), f.host(p, cards=2)
    booking = confirmed(p, 1, now - HOUR, now=now - HOUR)
    assert current_hosts(booking) == {a.name}
    card = current_slots(booking.pk).get().device
    window = services.host_enter_maintenance(host=a, start=now, end=now + DAY, actor="ops", reason="bios",
                                             now=now).booking
    assert not window.slots.filter(device=card).exists()  # cut around the term
    moved = booking_move(booking=booking, actor="ops", reason="maintenance", now=now + HOUR)
    assert moved.windows_filled == (window.pk,)
    assert list(window.slots.filter(device=card).values_list("starts_at", "ends_at")) == [(now + HOUR, now + DAY)]
    assert current_hosts(booking) == {b.name}
    assert overlapping_live_rows() == []


@pytest.mark.postgres_only
@pytest.mark.db_race
@pytest.mark.django_db(transaction=True)
def test_two_moves_racing_for_the_same_free_card_one_wins():
    now = f.now_minute()
    p = f.product()
    f.host(p, cards=2)
    first, second = (confirmed(p, 1, now + DAY, now=now) for _ in range(2))
    spare = f.host(p, cards=1)
    card = spare.devices.get().pk

    def job(booking):
        return lambda: booking_move(booking=booking, devices=[card], actor="ops", reason="race", now=now).booking.pk

    for _round in range(3):
        results = run_together([job(first), job(second)])
        won = [value for outcome, value in results if outcome == "granted"]
        lost = [value for outcome, value in results if outcome == "refused"]
        assert len(won) == 1 and len(lost) == 1, results
        assert isinstance(lost[0], NoLongerAvailable) and "is not free" in str(lost[0])
        assert overlapping_live_rows() == []
        winner = Booking.objects.get(pk=won[0])
        booking_move(booking=winner, actor="ops", reason="back", now=now)  # frees the spare card again


@pytest.mark.postgres_only
@pytest.mark.db_race
@pytest.mark.django_db(transaction=True)
def test_a_move_racing_new_orders_for_the_last_free_card():
    now = f.now_minute()
    p = f.product()
    f.host(p, cards=1)
    f.host(p, cards=1)
    booking = confirmed(p, 1, now + DAY, now=now)

    def move():
        return booking_move(booking=booking, actor="ops", reason="race", now=now).booking.pk

    def order():
        return services.hold_place(product=p, quantity=1, start=now + DAY, term_days=3, now=now).pk

    results = run_together([move, *[order] * 6])
    # The move takes the free card and frees its own, or an order takes the free card first and the move is
    # refused: either way exactly one of the new orders wins, and no card is booked twice.
    orders_won = [value for outcome, value in results[1:] if outcome == "granted"]
    assert len(orders_won) == 1, results
    for outcome, value in results:
        if outcome == "refused":
            assert isinstance(value, NoLongerAvailable), value
    assert overlapping_live_rows() == []
    mine = set(current_slots(booking.pk).values_list("device_id", flat=True))
    theirs = set(current_slots(orders_won[0]).values_list("device_id", flat=True))
    assert len(mine) == 1 and not mine & theirs
    assert (results[0][0] == "granted") == (AuditEntry.objects.filter(action="booking_move").count() == 1)


def test_a_hold_moves_with_its_expiry_and_an_expired_one_does_not(now):
    p = f.product()
    f.host(p, cards=1)
    hold = services.hold_place(product=p, quantity=1, start=now + DAY, term_days=3, now=now)
    f.host(p, cards=1)
    booking_move(booking=hold, actor="ops", reason="x", now=now)
    assert list(current_slots(hold.pk).values_list("expires_at", flat=True)) == [hold.expires_at]
    assert move_proposal(hold, now=hold.expires_at).reason.endswith("has expired; there is nothing to move.")
    with pytest.raises(InvalidBookingState, match="has expired"):
        booking_move(booking=hold, actor="ops", reason="x", now=hold.expires_at)
