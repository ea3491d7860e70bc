"""Allocation services against the database (both passes: SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import IntegrityError, connection, transaction

from anchorgpu.allocation import selectors, services
from anchorgpu.allocation.errors import HoldExpired, InvalidBookingState, InvalidRequest, NoLongerAvailable
from anchorgpu.allocation.models import Booking, BookingDevice
from anchorgpu.allocation.periods import Period
from anchorgpu.audit.models import AuditEntry
from anchorgpu.fleet.models import Device, Host
from tests import factories as f

pytestmark = pytest.mark.django_db

HOUR, DAY, MINUTE = timedelta(hours=1), timedelta(days=1), timedelta(minutes=1)


@pytest.fixture
def now() -> datetime:
    return f.now_minute()


def devices_of(host: Host) -> list[Device]:
    return list(host.devices.order_by("index"))


def slot_rows(booking: Booking) -> list[tuple]:
    return sorted(BookingDevice.objects.filter(booking=booking)
                  .values_list("device__index", "starts_at", "ends_at", "live"))


def device_ids(booking: Booking) -> set[int]:
    return set(BookingDevice.objects.filter(booking=booking).values_list("device_id", flat=True))


def booked(devices, start: datetime, end: datetime, *, kind: str = Booking.Kind.CONFIRMED,
           product=None, expires_at=None) -> Booking:
    """A booking written straight to the tables, as an operator's data fix or an older booking would be."""
    booking = Booking.objects.create(kind=kind, product=product, quantity=len(devices), starts_at=start,
                                     ends_at=end, expires_at=expires_at)
    BookingDevice.objects.bulk_create([BookingDevice(booking=booking, device=d, starts_at=start, ends_at=end,
                                                     expires_at=expires_at) for d in devices])
    return booking


def audits(booking: Booking) -> list[tuple]:
    return list(AuditEntry.objects.filter(object_type="allocation.booking", object_id=str(booking.pk))
                .order_by("id").values_list("action", "from_state", "to_state", "actor"))


def free_ids(product, start, days, *, now) -> set[int]:
    units = selectors.units_free(product, Period.of_days(start, days), now=now)
    return {d for unit in units for d in unit.devices}


# --- hold: place, confirm, release ------------------------------------------------------------

def test_hold_place_reserves_devices_for_the_half_open_term(now):
    p = f.product()
    h = f.host(p, cards=4)
    start = now + HOUR
    hold = services.hold_place(product=p, quantity=2, start=start, term_days=7, actor="alice",
                               reference="ORD-1", now=now)
    hold.refresh_from_db()
    assert (hold.kind, hold.state, hold.quantity, hold.reference) == ("hold", "live", 2, "ORD-1")
    assert (hold.starts_at, hold.ends_at) == (start, start + 7 * DAY)
    assert hold.expires_at == now + 60 * MINUTE  # ANCHORGPU_HOLD_MINUTES
    rows = BookingDevice.objects.filter(booking=hold)
    assert rows.count() == 2
    assert all(r.live and r.starts_at == start and r.ends_at == start + 7 * DAY and r.expires_at == hold.expires_at
               for r in rows)
    assert {r.device.host_id for r in rows} == {h.pk}
    assert audits(hold) == [("hold_place", "", "live", "alice")]
    entry = AuditEntry.objects.get(action="hold_place", object_id=str(hold.pk))
    assert entry.data["quantity"] == 2 and sorted(entry.data["devices"]) == sorted(device_ids(hold))


def test_a_second_hold_takes_other_devices_and_then_capacity_runs_out(now):
    p = f.product(name="H100 SXM")
    f.host(p, cards=3)
    start = now + HOUR
    first = services.hold_place(product=p, quantity=2, start=start, term_days=3, now=now)
    second = services.hold_place(product=p, quantity=1, start=start + DAY, term_days=3, now=now)
    assert device_ids(first).isdisjoint(device_ids(second))
    with pytest.raises(NoLongerAvailable) as caught:
        services.hold_place(product=p, quantity=1, start=start + 2 * DAY, term_days=3, now=now)
    assert str(caught.value).startswith("No longer available: 0 of the 1 unit(s) of H100 SXM asked for are free from ")
    assert "for 3 days" in str(caught.value)


def test_a_refused_hold_leaves_no_booking_and_no_audit_row(now):
    p = f.product()
    f.host(p, cards=1)
    services.hold_place(product=p, quantity=1, start=now + HOUR, term_days=3, now=now)
    bookings, entries = Booking.objects.count(), AuditEntry.objects.count()
    with pytest.raises(NoLongerAvailable):
        services.hold_place(product=p, quantity=1, start=now + HOUR, term_days=3, now=now)
    assert (Booking.objects.count(), AuditEntry.objects.count()) == (bookings, entries)


def test_a_term_may_start_exactly_when_the_previous_one_ends(now):
    p = f.product()
    f.host(p, cards=1)
    first = services.hold_place(product=p, quantity=1, start=now + HOUR, term_days=3, now=now)
    second = services.hold_place(product=p, quantity=1, start=first.ends_at, term_days=7, now=now)
    assert device_ids(first) == device_ids(second)


def test_hold_confirm_makes_the_booking_permanent(now):
    p = f.product()
    f.host(p, cards=2)
    start = now + HOUR
    hold = services.hold_place(product=p, quantity=2, start=start, term_days=3, now=now)
    confirmed = services.hold_confirm(booking=hold, actor="payments", now=now + 30 * MINUTE)
    confirmed.refresh_from_db()
    assert (confirmed.kind, confirmed.state, confirmed.expires_at) == ("confirmed", "live", None)
    assert list(BookingDevice.objects.filter(booking=hold).values_list("expires_at", "live").distinct()) == [(None, True)]
    # Long after the payment window the devices stay taken, and the sweep leaves them alone.
    later = now + 5 * HOUR
    assert services.hold_expire_due(now=later) == 0
    assert free_ids(p, start, 3, now=later) == set()
    assert audits(hold) == [("hold_place", "", "live", "system"), ("hold_confirm", "hold", "confirmed", "payments")]


def test_hold_confirm_refuses_anything_but_a_live_hold(now):
    p = f.product()
    f.host(p, cards=2)
    hold = services.hold_place(product=p, quantity=1, start=now + HOUR, term_days=3, now=now)
    services.hold_confirm(booking=hold, now=now)
    with pytest.raises(InvalidBookingState, match="Only a live hold can be confirmed"):
        services.hold_confirm(booking=hold, now=now)
    other = services.hold_place(product=p, quantity=1, start=now + HOUR, term_days=3, now=now)
    services.hold_release(booking=other, reason="changed my mind")
    with pytest.raises(InvalidBookingState, match="in state “released”"):
        services.hold_confirm(booking=other, now=now)


def test_hold_release_frees_the_devices_at_once(now):
    p = f.product()
    f.host(p, cards=2)
    start = now + HOUR
    hold = services.hold_place(product=p, quantity=2, start=start, term_days=3, now=now)
    assert free_ids(p, start, 3, now=now) == set()
    released = services.hold_release(booking=hold, actor="bob", reason="customer cancelled")
    released.refresh_from_db()
    assert (released.state, released.reason) == ("released", "customer cancelled")
    assert not BookingDevice.objects.filter(booking=hold, live=True).exists()
    assert free_ids(p, start, 3, now=now) == device_ids(hold)
    assert audits(hold)[-1] == ("hold_release", "live", "released", "bob")
    again = services.hold_place(product=p, quantity=2, start=start, term_days=3, now=now)
    assert device_ids(again) == device_ids(hold)


def test_hold_release_refuses_twice_and_refuses_a_confirmed_booking(now):
    p = f.product()
    f.host(p, cards=2)
    hold = services.hold_place(product=p, quantity=1, start=now + HOUR, term_days=3, now=now)
    services.hold_release(booking=hold)
    with pytest.raises(InvalidBookingState, match="in state “released”; it cannot be released here"):
        services.hold_release(booking=hold)
    paid = services.hold_confirm(booking=services.hold_place(product=p, quantity=1, start=now + HOUR,
                                                             term_days=3, now=now), now=now)
    with pytest.raises(InvalidBookingState):
        services.hold_release(booking=paid)
    assert Booking.objects.get(pk=paid.pk).state == "live"


def test_booking_release_needs_a_reason_and_releases_a_confirmed_term(now):
    p = f.product()
    f.host(p, cards=1)
    paid = services.hold_confirm(booking=services.hold_place(product=p, quantity=1, start=now + HOUR,
                                                             term_days=3, now=now), now=now)
    with pytest.raises(InvalidRequest, match="Say why"):
        services.booking_release(booking=paid, actor="ops", reason="  ")
    services.booking_release(booking=paid, actor="ops", reason="refunded")
    paid.refresh_from_db()
    assert (paid.state, paid.reason) == ("released", "refunded")
    assert not BookingDevice.objects.filter(booking=paid, live=True).exists()
    assert audits(paid)[-1] == ("booking_release", "live", "released", "ops")


# --- expiry -----------------------------------------------------------------------------------

def test_an_expired_hold_stops_counting_by_time_before_any_sweep(now):
    p = f.product()
    h = f.host(p, cards=1)
    start = now + 2 * HOUR
    hold = services.hold_place(product=p, quantity=1, start=start, term_days=3, hold_minutes=30, now=now)
    just_before, at_expiry = now + 29 * MINUTE, now + 30 * MINUTE
    assert free_ids(p, start, 3, now=just_before) == set()
    assert selectors.earliest_start(p, quantity=1, term_days=3, not_before=start, now=just_before) == start + 3 * DAY
    # Nobody has swept: the row is still live in the database, yet reads ignore it.
    assert Booking.objects.get(pk=hold.pk).state == "live"
    assert free_ids(p, start, 3, now=at_expiry) == {devices_of(h)[0].pk}
    assert selectors.earliest_start(p, quantity=1, term_days=3, not_before=start, now=at_expiry) == start
    # and a new hold can take the cards; placing it marks the stale hold on the way.
    taker = services.hold_place(product=p, quantity=1, start=start, term_days=3, now=at_expiry)
    assert device_ids(taker) == device_ids(hold)
    assert Booking.objects.get(pk=hold.pk).state == "expired"
    assert audits(hold)[-1] == ("hold_expire", "live", "expired", "system")


def test_hold_expire_due_marks_due_holds_and_audits_each(now):
    p = f.product()
    f.host(p, cards=4)
    start = now + 2 * HOUR
    short = services.hold_place(product=p, quantity=1, start=start, term_days=3, hold_minutes=30, now=now)
    short2 = services.hold_place(product=p, quantity=1, start=start, term_days=3, hold_minutes=45, now=now)
    long = services.hold_place(product=p, quantity=1, start=start, term_days=3, hold_minutes=120, now=now)
    paid = services.hold_confirm(booking=services.hold_place(product=p, quantity=1, start=start, term_days=3,
                                                             hold_minutes=30, now=now), now=now)
    assert services.hold_expire_due(now=now + 29 * MINUTE) == 0
    assert services.hold_expire_due(now=now + 60 * MINUTE) == 2
    states = dict(Booking.objects.values_list("pk", "state"))
    assert (states[short.pk], states[short2.pk], states[long.pk], states[paid.pk]) == ("expired", "expired", "live", "live")
    assert not BookingDevice.objects.filter(booking__in=[short, short2], live=True).exists()
    assert BookingDevice.objects.filter(booking__in=[long, paid], live=True).count() == 2
    for hold in (short, short2):
        entry = AuditEntry.objects.get(action="hold_expire", object_id=str(hold.pk))
        assert (entry.actor, entry.from_state, entry.to_state, entry.reason) == (
            "system", "live", "expired", "payment window ended")
    assert services.hold_expire_due(now=now + 60 * MINUTE) == 0  # idempotent
    assert AuditEntry.objects.filter(action="hold_expire").count() == 2
    assert services.hold_expire_due(now=now + 120 * MINUTE) == 1
    assert Booking.objects.get(pk=long.pk).state == "expired"


def test_confirming_an_expired_hold_raises_and_leaves_it_expired(now):
    p = f.product()
    f.host(p, cards=1)
    hold = services.hold_place(product=p, quantity=1, start=now + HOUR, term_days=3, hold_minutes=30, now=now)
    with pytest.raises(HoldExpired, match="The hold expired before it was confirmed"):
        services.hold_confirm(booking=hold, actor="payments", now=now + 30 * MINUTE)
    hold.refresh_from_db()
    assert (hold.kind, hold.state) == ("hold", "expired")
    assert not BookingDevice.objects.filter(booking=hold, live=True).exists()
    assert audits(hold) == [("hold_place", "", "live", "system"), ("hold_expire", "live", "expired", "payments")]
    # Asking again gives the same answer, not a confusing state error.
    with pytest.raises(HoldExpired):
        services.hold_confirm(booking=hold, now=now + 31 * MINUTE)


def test_confirming_a_hold_the_sweep_already_expired_raises_hold_expired(now):
    p = f.product()
    f.host(p, cards=1)
    hold = services.hold_place(product=p, quantity=1, start=now + HOUR, term_days=3, hold_minutes=30, now=now)
    assert services.hold_expire_due(now=now + 45 * MINUTE) == 1
    with pytest.raises(HoldExpired):
        services.hold_confirm(booking=hold, now=now + 46 * MINUTE)
    assert Booking.objects.get(pk=hold.pk).state == "expired"


# --- lots: NVLink pairs -----------------------------------------------------------------------

def test_a_lot_takes_both_devices_of_one_nvlink_pair(now):
    b200 = f.product("b200", cards_per_unit=2, stack="blackwell", name="B200 lot")
    h = f.host(b200, cards=8)
    start = now + HOUR
    hold = services.hold_place(product=b200, quantity=2, start=start, term_days=7, now=now)
    taken = Device.objects.filter(pk__in=device_ids(hold))
    pairs = {}
    for d in taken:
        pairs.setdefault(d.nvlink_pair, []).append(d.index)
    assert len(pairs) == 2 and all(len(v) == 2 for v in pairs.values())
    assert hold.quantity == 2 and BookingDevice.objects.filter(booking=hold).count() == 4
    assert {d.host_id for d in taken} == {h.pk}


def test_a_pair_with_one_device_busy_is_not_offered(now):
    b200 = f.product("b200", cards_per_unit=2, stack="blackwell", name="B200 lot")
    h = f.host(b200, cards=8)
    devices = devices_of(h)
    start = now + HOUR
    booked([devices[0]], start, start + 30 * DAY)  # pair 0 lost one card for the month
    units = selectors.units_free(b200, Period.of_days(start, 7), now=now)
    assert [u.devices for u in units] == [(devices[2].pk, devices[3].pk), (devices[4].pk, devices[5].pk),
                                          (devices[6].pk, devices[7].pk)]
    hold = services.hold_place(product=b200, quantity=3, start=start, term_days=7, now=now)
    assert devices[1].pk not in device_ids(hold)
    with pytest.raises(NoLongerAvailable, match="0 of the 1 unit\\(s\\) of B200 lot"):
        services.hold_place(product=b200, quantity=1, start=start, term_days=7, now=now)
    assert selectors.earliest_start(b200, quantity=1, term_days=7, not_before=start, now=now) == start + 7 * DAY
    assert selectors.earliest_start(b200, quantity=4, term_days=7, not_before=start, now=now) == start + 30 * DAY


def test_lots_span_hosts_pair_by_pair(now):
    b200 = f.product("b200", cards_per_unit=2, stack="blackwell")
    f.host(b200, cards=4)
    f.host(b200, cards=4)
    hold = services.hold_place(product=b200, quantity=3, start=now + HOUR, term_days=3, now=now)
    taken = list(Device.objects.filter(pk__in=device_ids(hold)).values_list("host_id", "nvlink_pair"))
    assert len(taken) == 6
    assert all(taken.count(key) == 2 for key in taken)


# --- host status and maintenance ---------------------------------------------------------------

@pytest.mark.parametrize("status", [Host.Status.MAINTENANCE, Host.Status.RETIRED])
def test_a_host_that_is_not_active_is_not_bookable(now, status):
    p = f.product(name="H200")
    f.host(p, cards=4, status=status)
    start = now + HOUR
    assert selectors.units_free(p, Period.of_days(start, 3), now=now) == []
    assert selectors.earliest_start(p, quantity=1, term_days=3, not_before=start, now=now) is None
    with pytest.raises(NoLongerAvailable, match="0 of the 1 unit\\(s\\) of H200"):
        services.hold_place(product=p, quantity=1, start=start, term_days=3, now=now)


def test_a_host_taken_off_sale_is_not_bookable_until_the_block_is_cleared(now):
    """Discovery (or a host-key mismatch) sets ``sale_block``: the host's cards stop being offered at once, in
    the counts and in placement, and come back when the block is cleared."""
    p = f.product(name="H100 SXM")
    blocked = f.host(p, cards=2)
    Host.objects.filter(pk=blocked.pk).update(sale_block="discovery: the host reports 4 cards, the record 2")
    start = now + HOUR
    assert selectors.units_free(p, Period.of_days(start, 3), now=now) == []
    assert selectors.product_units(p) == []
    assert selectors.earliest_start(p, quantity=1, term_days=3, not_before=start, now=now) is None
    with pytest.raises(NoLongerAvailable):
        services.hold_place(product=p, quantity=1, start=start, term_days=3, now=now)
    Host.objects.filter(pk=blocked.pk).update(sale_block="")
    hold = services.hold_place(product=p, quantity=2, start=start, term_days=3, now=now)
    assert set(Device.objects.filter(pk__in=device_ids(hold)).values_list("host_id", flat=True)) == {blocked.pk}


def test_only_active_hosts_are_used(now):
    p = f.product()
    active = f.host(p, cards=2)
    f.host(p, cards=8, status=Host.Status.MAINTENANCE)
    hold = services.hold_place(product=p, quantity=2, start=now + HOUR, term_days=3, now=now)
    assert set(Device.objects.filter(pk__in=device_ids(hold)).values_list("host_id", flat=True)) == {active.pk}
    with pytest.raises(NoLongerAvailable):
        services.hold_place(product=p, quantity=1, start=now + HOUR, term_days=3, now=now)


def test_maintenance_refuses_new_bookings_and_lists_hits_without_touching_them(now):
    p = f.product()
    h = f.host(p, cards=2)
    d0, d1 = devices_of(h)
    paid = services.hold_confirm(booking=services.hold_place(product=p, quantity=1, start=now + DAY,
                                                             term_days=3, now=now), now=now)
    assert device_ids(paid) == {d0.pk}
    paid_slots = slot_rows(paid)
    released = services.hold_place(product=p, quantity=1, start=now + DAY, term_days=3, now=now)
    services.hold_release(booking=released)
    window_start, window_end = now + 2 * DAY, now + 5 * DAY

    result = services.host_enter_maintenance(host=h, start=window_start, end=window_end, actor="ops",
                                             reason="replace PSU", now=now)

    assert [b.pk for b in result.hits] == [paid.pk]
    paid.refresh_from_db()
    assert (paid.kind, paid.state) == ("confirmed", "live") and slot_rows(paid) == paid_slots
    window = result.booking
    window.refresh_from_db()
    assert (window.kind, window.state, window.host_id, window.reason) == ("maintenance", "live", h.pk, "replace PSU")
    assert (window.starts_at, window.ends_at) == (window_start, window_end)
    # Each device is blocked for every part of the window that the paid term leaves free.
    assert slot_rows(window) == [(0, paid.ends_at, window_end, True), (1, window_start, window_end, True)]
    entry = AuditEntry.objects.get(action="host_enter_maintenance")
    assert (entry.actor, entry.to_state, entry.reason, entry.object_id) == ("ops", "live", "replace PSU", str(window.pk))
    assert entry.data["hits"] == [paid.pk]

    # New bookings are refused for any part of the window, even on the card the paid term leaves free.
    for start in (now + HOUR, window_start, window_end - HOUR):
        with pytest.raises(NoLongerAvailable):
            services.hold_place(product=p, quantity=1, start=start, term_days=3, now=now)
    assert free_ids(p, now + HOUR, 3, now=now) == set()
    # Right after the window the host is bookable again.
    after = services.hold_place(product=p, quantity=2, start=window_end, term_days=3, now=now)
    assert device_ids(after) == {d0.pk, d1.pk}


def test_maintenance_does_not_list_expired_holds_as_hits(now):
    p = f.product()
    h = f.host(p, cards=1)
    hold = services.hold_place(product=p, quantity=1, start=now + DAY, term_days=3, hold_minutes=30, now=now)
    result = services.host_enter_maintenance(host=h, start=now + DAY, end=now + 2 * DAY, actor="ops",
                                             reason="firmware", now=now + HOUR)
    assert result.hits == []
    assert Booking.objects.get(pk=hold.pk).state == "expired"
    assert slot_rows(result.booking) == [(0, now + DAY, now + 2 * DAY, True)]


def test_maintenance_only_blocks_its_own_host(now):
    p = f.product()
    down = f.host(p, cards=2)
    up = f.host(p, cards=2)
    services.host_enter_maintenance(host=down, start=now, end=now + 10 * DAY, actor="ops", reason="rack move", now=now)
    hold = services.hold_place(product=p, quantity=2, start=now + HOUR, term_days=3, now=now)
    assert set(Device.objects.filter(pk__in=device_ids(hold)).values_list("host_id", flat=True)) == {up.pk}


def test_earliest_start_respects_maintenance(now):
    p = f.product()
    h = f.host(p, cards=1)
    (device,) = devices_of(h)
    services.host_enter_maintenance(host=h, start=now, end=now + 2 * DAY, actor="ops", reason="cooling", now=now)
    assert selectors.earliest_start(p, quantity=1, term_days=3, not_before=now, now=now) == now + 2 * DAY
    booked([device], now + 3 * DAY, now + 10 * DAY, product=p)  # leaves a one-day gap: too short
    assert selectors.earliest_start(p, quantity=1, term_days=3, not_before=now, now=now) == now + 10 * DAY
    assert selectors.earliest_start(p, quantity=2, term_days=3, not_before=now, now=now) is None


@pytest.mark.parametrize("start, end, reason, message", [
    (1, 2, " ", "Say why the host goes into maintenance."),
    (-3, -1, "disk", "The maintenance window has already ended."),
    (2, 1, "disk", "a period must end after it starts"),
    (None, 1, "disk", "start must carry a time zone"),
])
def test_host_enter_maintenance_refuses_bad_input(now, start, end, reason, message):
    p = f.product()
    h = f.host(p, cards=1)
    start_at = datetime(2030, 1, 1) if start is None else now + start * DAY
    with pytest.raises(InvalidRequest) as caught:
        services.host_enter_maintenance(host=h, start=start_at, end=now + end * DAY, actor="ops", reason=reason, now=now)
    assert message in str(caught.value)
    assert not Booking.objects.exists()


# --- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("changes, message", [
    ({"quantity": 0}, "Quantity must be at least 1."),
    ({"quantity": -1}, "Quantity must be at least 1."),
    ({"quantity": 1001}, "Quantity must be at most 1000."),
    ({"quantity": 1.5}, "Quantity must be a whole number of units."),
    ({"term_days": 5}, "Terms are 3, 7, 30 days; 5 is not one of them."),
    ({"start": "past"}, "The start is in the past; choose now or a later date."),
    ({"start": "naive"}, "start must carry a time zone (UTC), got a naive datetime"),
    ({"start": "beyond"}, "Bookings can start at most 365 days ahead."),
    ({"hold_minutes": 0}, "A hold must last at least one minute."),
])
def test_hold_place_refuses_bad_input_with_a_clear_message(now, changes, message):
    p = f.product()
    f.host(p, cards=4)
    args = dict(product=p, quantity=1, start=now + HOUR, term_days=3, now=now)
    args.update(changes)
    if args["start"] == "past":
        args["start"] = now - 6 * MINUTE
    elif args["start"] == "beyond":
        args["start"] = now + 366 * DAY
    elif args["start"] == "naive":
        args["start"] = datetime(2030, 1, 1, 12, 0)
    with pytest.raises(InvalidRequest) as caught:
        services.hold_place(**args)
    assert str(caught.value) == message
    assert caught.value.code == "invalid_request"
    assert not Booking.objects.exists()


def test_a_start_a_few_minutes_ago_is_clock_skew_and_accepted(now):
    p = f.product()
    f.host(p, cards=1)
    hold = services.hold_place(product=p, quantity=1, start=now - 4 * MINUTE, term_days=3, now=now)
    assert hold.starts_at == now - 4 * MINUTE


def test_a_product_not_on_sale_cannot_be_held(now):
    p = f.product(name="A100 SXM")
    f.host(p, cards=1)
    p.is_active = False
    p.save()
    with pytest.raises(InvalidRequest, match="A100 SXM is not on sale."):
        services.hold_place(product=p, quantity=1, start=now + HOUR, term_days=3, now=now)


# --- the database itself keeps the invariant ------------------------------------------------------

def test_the_database_rejects_an_overlapping_live_row(now):
    p = f.product()
    (device, other) = devices_of(f.host(p, cards=2))
    start = now + DAY
    first = booked([device], start, start + 3 * DAY)
    intruder = Booking.objects.create(kind=Booking.Kind.CONFIRMED, starts_at=start, ends_at=start + 3 * DAY)
    for a, b in [(start + DAY, start + 2 * DAY), (start - DAY, start + timedelta(microseconds=1)),
                 (start + 3 * DAY - timedelta(microseconds=1), start + 5 * DAY), (start, start + 3 * DAY)]:
        with pytest.raises(IntegrityError), transaction.atomic():
            BookingDevice.objects.create(booking=intruder, device=device, starts_at=a, ends_at=b)
    # Touching periods, another device, and dead rows are fine.
    BookingDevice.objects.create(booking=intruder, device=device, starts_at=start + 3 * DAY, ends_at=start + 4 * DAY)
    BookingDevice.objects.create(booking=intruder, device=device, starts_at=start - DAY, ends_at=start)
    BookingDevice.objects.create(booking=intruder, device=other, starts_at=start, ends_at=start + 3 * DAY)
    dead = BookingDevice.objects.create(booking=intruder, device=device, starts_at=start, ends_at=start + DAY, live=False)
    # Bringing a dead overlapping row back to life is rejected too.
    with pytest.raises(IntegrityError), transaction.atomic():
        BookingDevice.objects.filter(pk=dead.pk).update(live=True)
    # So is moving a live row onto a taken period.
    mover = BookingDevice.objects.get(booking=intruder, device=device, starts_at=start + 3 * DAY)
    with pytest.raises(IntegrityError), transaction.atomic():
        BookingDevice.objects.filter(pk=mover.pk).update(starts_at=start + 2 * DAY)
    assert BookingDevice.objects.filter(booking=first, live=True).count() == 1
    assert BookingDevice.objects.filter(device=device, live=True).count() == 3


def test_a_conflict_found_by_the_database_becomes_no_longer_available(now, monkeypatch):
    """A stale availability read (another booking committed after it) makes the insert hit the
    constraint; the service retries on fresh data and reports the real answer."""
    p = f.product(name="MI300X", stack="rocm")
    (device,) = devices_of(f.host(p, cards=1))
    start = now + HOUR
    booked([device], start, start + 3 * DAY, product=p)
    stale = selectors.product_units(p)
    calls = []
    real = selectors.units_free

    def first_read_stale(product, period, *, now=None):
        calls.append(period)
        return stale if len(calls) == 1 else real(product, period, now=now)

    monkeypatch.setattr(selectors, "units_free", first_read_stale)
    with pytest.raises(NoLongerAvailable, match="No longer available: 0 of the 1 unit\\(s\\) of MI300X"):
        services.hold_place(product=p, quantity=1, start=start, term_days=3, now=now)
    assert len(calls) == 2
    assert Booking.objects.count() == 1


def test_endless_conflicts_give_up_with_a_clear_message(now, monkeypatch):
    p = f.product()
    (device,) = devices_of(f.host(p, cards=1))
    start = now + HOUR
    booked([device], start, start + 3 * DAY, product=p)
    stale = selectors.product_units(p)
    monkeypatch.setattr(selectors, "units_free", lambda product, period, *, now=None: stale)
    monkeypatch.setattr(services, "MAX_ATTEMPTS", 3)
    with pytest.raises(NoLongerAvailable, match="taken by others while we tried; please try again"):
        services.hold_place(product=p, quantity=1, start=start, term_days=3, now=now)
    assert Booking.objects.count() == 1


@pytest.mark.postgres_only
def test_postgres_has_the_exclusion_constraint():
    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT c.contype, pg_get_constraintdef(c.oid) FROM pg_constraint c
            JOIN pg_class t ON t.oid = c.conrelid
            WHERE t.relname = 'allocation_bookingdevice' AND c.conname = 'booking_slot_no_overlap'""")
        rows = cursor.fetchall()
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'btree_gist'")
        has_btree_gist = cursor.fetchone() is not None
    assert len(rows) == 1
    kind, definition = rows[0]
    assert kind == "x"
    assert "EXCLUDE USING gist" in definition
    assert "device_id WITH =" in definition and "WITH &&" in definition
    assert "WHERE (live)" in definition
    assert has_btree_gist


def test_sqlite_has_the_overlap_triggers(vendor):
    if vendor != "sqlite":
        pytest.skip("SQLite-only check; PostgreSQL has its own test")
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'allocation_bookingdevice'")
        names = {row[0] for row in cursor.fetchall()}
    assert names == {"booking_slot_no_overlap_insert", "booking_slot_no_overlap_update"}


def test_earliest_start_far_beyond_the_first_search_window(now):
    """The selector reads a window of bookings first and widens it; the answer must not change."""
    p = f.product()
    (a, b) = devices_of(f.host(p, cards=2))
    booked([a], now, now + 90 * DAY, product=p)
    booked([b], now, now + 40 * DAY, product=p)
    booked([b], now + 42 * DAY, now + 200 * DAY, product=p)  # a two-day gap: too short for 3 days
    assert selectors.earliest_start(p, quantity=1, term_days=3, not_before=now, now=now) == now + 90 * DAY
    assert selectors.earliest_start(p, quantity=2, term_days=30, not_before=now, now=now) == now + 200 * DAY
    assert selectors.earliest_start(p, quantity=1, term_days=3, not_before=now + 300 * DAY, now=now) == now + 300 * DAY


def test_maintenance_longer_than_the_limit_is_refused(now):
    h = f.host(f.product(), cards=1)
    with pytest.raises(InvalidRequest, match="at most 730 days"):
        services.host_enter_maintenance(host=h, start=now, end=now + 731 * DAY, actor="ops", reason="gone", now=now)


def test_earliest_start_beyond_the_booking_horizon_is_none(now):
    p = f.product()
    (device,) = devices_of(f.host(p, cards=1))
    booked([device], now, now + 400 * DAY, product=p)
    assert selectors.earliest_start(p, quantity=1, term_days=3, not_before=now, now=now) is None
    assert selectors.earliest_start(p, quantity=1, term_days=3, not_before=now + 366 * DAY, now=now) is None
