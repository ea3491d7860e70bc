"""The host_update service: an edit that would strand a hold or a paid term is refused, under the product's row
lock, whichever way it comes (the admin or a direct call); what it writes is audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from anchorgpu.allocation import services as allocation
from anchorgpu.allocation.errors import AllocationError
from anchorgpu.allocation.models import Booking
from anchorgpu.audit.models import AuditEntry
from anchorgpu.fleet import services
from anchorgpu.fleet.models import Device, Host
from anchorgpu.fleet.services import DeviceEdit, HostUpdateRefused, host_update
from tests import factories as f
from tests.allocation.test_race import run_together


def _booked(paired: bool = True, reference: str = "ORD-9"):
    p = f.product()
    h = f.host(p, cards=2, paired=paired)
    booking = allocation.hold_confirm(booking=allocation.hold_place(product=p, quantity=1, start=f.now_minute(),
                                                                    term_days=3, reference=reference))
    return p, h, booking


def _audits(host):
    return AuditEntry.objects.filter(action="host_change", object_id=str(host.pk))


@pytest.mark.django_db
@pytest.mark.parametrize("changes", [{"status": "retired"}, {"status": "maintenance"}, "other product"])
def test_an_edit_of_the_whole_host_is_refused_while_a_booking_runs_on_it(changes):
    p, h, booking = _booked()
    if changes == "other product":
        changes = {"product": f.product()}
    with pytest.raises(HostUpdateRefused) as refused:
        host_update(host=h, actor="ops", changes=changes)
    assert "would be stranded" in refused.value.message and "ORD-9" in refused.value.message
    assert refused.value.bookings == [booking]
    h.refresh_from_db()
    assert (h.status, h.product_id) == ("active", p.pk)
    assert not _audits(h).exists()


@pytest.mark.django_db
def test_re_pairing_or_removing_a_booked_device_is_refused_but_a_free_one_is_not():
    p, h, booking = _booked(paired=False)
    taken = Booking.objects.get(pk=booking.pk).slots.get().device
    free = h.devices.exclude(pk=taken.pk).get()
    for edit in (DeviceEdit(taken.pk, delete=True),):
        with pytest.raises(HostUpdateRefused):
            host_update(host=h, actor="ops", changes={}, devices=[edit])
    # Adding a device, or renaming the free one, strands nothing.
    result = host_update(host=h, actor="ops", changes={"notes": "one more card"},
                         devices=[DeviceEdit(None, index=2, uid="spare-gpu2"),
                                  DeviceEdit(free.pk, index=free.index, uid="renamed", nvlink_pair=None)])
    assert result.changed == ["notes"]
    assert result.devices == {"added": ["spare-gpu2"], "changed": ["renamed"]}
    entry = _audits(h).get()
    assert (entry.actor, entry.data["changed"], entry.data["devices"]["added"]) == ("ops", ["notes"], ["spare-gpu2"])
    assert h.devices.count() == 3 and Device.objects.get(pk=free.pk).uid == "renamed"


@pytest.mark.django_db
def test_an_edit_is_allowed_once_the_booking_is_released_and_is_audited():
    _p, h, booking = _booked()
    allocation.booking_release(booking=booking, actor="ops", reason="moved")
    result = host_update(host=h, actor="ops", changes={"status": "retired"}, reason="end of life")
    assert result.changed == ["status"]
    h.refresh_from_db()
    assert h.status == "retired"
    entry = _audits(h).get()
    assert (entry.from_state, entry.to_state, entry.reason, entry.data) == (
        "active", "retired", "end of life", {"changed": ["status"]})


@pytest.mark.django_db
def test_a_bad_topology_or_a_foreign_device_is_refused():
    lot = f.product(cards_per_unit=2)
    h = f.host(lot, cards=4)
    first = h.devices.order_by("index").first()
    with pytest.raises(HostUpdateRefused) as refused:
        host_update(host=h, actor="ops", changes={}, devices=[DeviceEdit(first.pk, index=0, uid=first.uid)])
    assert "check pair(s) 0" in refused.value.message  # its partner is left alone on pair 0
    other = f.host(f.product(), cards=1).devices.get()
    with pytest.raises(HostUpdateRefused, match="not on this host"):
        host_update(host=h, actor="ops", changes={}, devices=[DeviceEdit(other.pk, delete=True)])
    with pytest.raises(HostUpdateRefused, match="cannot be edited"):
        host_update(host=h, actor="ops", changes={"id": 5})
    assert not _audits(h).exists()


@pytest.mark.django_db
def test_the_admin_shows_a_refusal_made_at_the_save_itself_as_a_message(admin_client, monkeypatch):
    h = f.host(f.product(), cards=1)
    device = h.devices.get()

    def refuse(**kwargs):
        raise HostUpdateRefused("1 live booking(s) would be stranded: #1.")
    monkeypatch.setattr(services, "host_update", refuse)
    url = reverse("admin:fleet_host_change", args=[h.pk])
    data = {"name": h.name, "site": h.site_id, "product": h.product_id, "status": "retired", "notes": "",
            "ssh_port": 22, "ssh_user": "anchorgpu", "runtime": "podman",
            "devices-TOTAL_FORMS": 1, "devices-INITIAL_FORMS": 1, "devices-MIN_NUM_FORMS": 0,
            "devices-MAX_NUM_FORMS": 1000, "devices-0-id": device.pk, "devices-0-host": h.pk,
            "devices-0-index": 0, "devices-0-uid": device.uid, "devices-0-nvlink_pair": ""}
    response = admin_client.post(url, data, follow=True)
    assert response.status_code == 200
    assert "would be stranded" in response.content.decode()
    h.refresh_from_db()
    assert h.status == "active"


@pytest.mark.django_db(transaction=True)
@pytest.mark.db_race
def test_a_retirement_and_a_booking_at_once_never_both_succeed():
    """Each round races a customer's hold for the host's only card against the operator retiring the host: the
    product's lock makes them take turns, so either the hold stands on an active host, or the host is retired
    and the hold is refused."""
    outcomes = set()
    for round_ in range(4):
        p = f.product()
        h = f.host(p, cards=1)
        start = f.now_minute() + timedelta(hours=1)
        jobs = [lambda p=p, start=start, ref=f"RACE-{round_}": allocation.hold_place(
                    product=p, quantity=1, start=start, term_days=3, reference=ref),
                lambda pk=h.pk: host_update(host=Host.objects.get(pk=pk), actor="ops", changes={"status": "retired"})]
        (hold_outcome, hold), (retire_outcome, retired) = run_together(jobs)
        h.refresh_from_db()
        assert {hold_outcome, retire_outcome} == {"granted", "refused"}, (hold, retired)
        if hold_outcome == "granted":
            assert isinstance(retired, HostUpdateRefused) and h.status == "active"
        else:
            assert isinstance(hold, AllocationError) and h.status == "retired"
            assert not Booking.objects.filter(reference=f"RACE-{round_}", state=Booking.State.LIVE).exists()
        outcomes.add(hold_outcome)
    assert outcomes  # at least one round ran to an outcome
