"""The operators' admin: every page renders; hosts keep a valid topology;
maintenance and release go through the services and never end in a 500."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse
from django.utils import timezone

from anchorgpu.allocation import services
from anchorgpu.allocation.errors import NoLongerAvailable
from anchorgpu.allocation.models import Booking, BookingDevice
from anchorgpu.audit.models import AuditEntry
from anchorgpu.fleet.admin import MaintenanceForm
from anchorgpu.fleet.models import Device, Host
from tests import factories as f

pytestmark = pytest.mark.django_db

OUR_APPS = {"fleet", "catalog", "allocation", "audit"}
# The host form's SSH fields at their defaults, as a browser sends them.
SSH_FIELDS = {"ssh_address": "", "ssh_port": 22, "ssh_user": "anchorgpu", "host_key": "", "runtime": "podman",
              "sale_block": ""}


@pytest.fixture
def shop():
    """A little of everything: a product with a host, prices, a hold, a
    confirmed booking and a maintenance window."""
    p = f.product("h100")
    h = f.host(p, cards=4)
    lot = f.product("b200", cards_per_unit=2, memory=180)
    f.host(lot, cards=4)
    pl = f.price_list({p: "2.50", lot: "6.00"})
    f.option("checkpoint-storage", {3: "5", 7: "10", 30: "30"}, pl)
    f.environment("pytorch-cuda", "cuda")
    start = f.now_minute() + timedelta(days=1)
    hold = services.hold_place(product=p, quantity=1, start=start, term_days=3, reference="ORD-HOLD")
    confirmed = services.hold_place(product=p, quantity=1, start=start, term_days=7, reference="ORD-PAID")
    services.hold_confirm(booking=confirmed)
    window = services.host_enter_maintenance(host=h, start=start + timedelta(days=20), end=start + timedelta(days=21),
                                             actor="test", reason="firmware")
    from anchorgpu.orders.faults import host_fault_clear, host_mark_faulty

    lot_host = Host.objects.get(product=lot)
    host_fault_clear(fault=host_mark_faulty(host=lot_host, actor="test", reason="fans"), actor="test", reason="fixed")
    return {"product": p, "host": h, "hold": hold, "confirmed": confirmed, "maintenance": window.booking}


def _url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _our_models():
    return [m for m in admin.site._registry if m._meta.app_label in OUR_APPS]


# --- every page renders ------------------------------------------------------


def test_all_our_models_are_registered():
    labels = {m._meta.label for m in _our_models()}
    assert labels == {"fleet.Site", "fleet.Host", "fleet.Device", "fleet.HostFault",
                      "catalog.Product", "catalog.Environment", "catalog.Option", "catalog.PriceList",
                      "allocation.Booking", "audit.AuditEntry"}


def test_every_changelist_and_change_page_renders(admin_client, shop):
    for model in _our_models():
        assert admin_client.get(_url(model, "changelist")).status_code == 200, model
        obj = model.objects.first()
        assert obj is not None, f"the fixture makes no {model.__name__}"
        assert admin_client.get(_url(model, "change", obj.pk)).status_code == 200, model
        model_admin = admin.site._registry[model]
        if model_admin.has_add_permission(_request_for(admin_client)):
            assert admin_client.get(_url(model, "add")).status_code == 200, model


def _request_for(client):
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory
    request = RequestFactory().get("/")
    request.user = get_user_model().objects.get(pk=client.session["_auth_user_id"])
    return request


def test_admin_index_and_app_pages_render(admin_client, shop):
    assert admin_client.get(reverse("admin:index")).status_code == 200
    for app_label in sorted(OUR_APPS):
        assert admin_client.get(reverse("admin:app_list", args=[app_label])).status_code == 200, app_label


def test_changelists_filter_and_search(admin_client, shop):
    host = shop["host"]
    page = admin_client.get(_url(Host, "changelist"), {"status__exact": "active", "q": host.name})
    assert page.status_code == 200 and host.name in page.content.decode()
    assert admin_client.get(_url(Device, "changelist"), {"q": f"{host.name}-gpu1"}).status_code == 200
    page = admin_client.get(_url(Booking, "changelist"), {"q": "ORD-PAID", "kind__exact": "confirmed"})
    assert page.status_code == 200
    assert "ORD-PAID" in page.content.decode() and "ORD-HOLD" not in page.content.decode()


def test_host_changelist_counts_devices(admin_client, shop):
    page = admin_client.get(_url(Host, "changelist"))
    assert page.context["cl"].result_list.get(pk=shop["host"].pk)._device_count == 4


def test_devices_are_read_only_in_their_own_admin(admin_client, shop):
    device = shop["host"].devices.first()
    assert admin_client.get(_url(Device, "add")).status_code == 403
    response = admin_client.post(_url(Device, "change", device.pk), {"host": device.host_id, "index": 9,
                                                                     "uid": "changed"})
    assert response.status_code == 403
    device.refresh_from_db()
    assert device.uid != "changed"


def test_bookings_cannot_be_added_edited_or_deleted(admin_client, shop):
    booking = shop["confirmed"]
    assert admin_client.get(_url(Booking, "add")).status_code == 403
    assert admin_client.post(_url(Booking, "change", booking.pk), {"state": "released"}).status_code == 403
    assert admin_client.post(_url(Booking, "delete", booking.pk), {"post": "yes"}).status_code == 403
    booking.refresh_from_db()
    assert booking.state == Booking.State.LIVE
    page = admin_client.get(_url(Booking, "change", booking.pk))
    assert "ORD-PAID" in page.content.decode()
    assert f"{shop['product'].slug}-h" in page.content.decode()  # the slots inline names the devices


# --- host topology -----------------------------------------------------------


def _host_post(host, devices, **changes):
    """The host change form as a browser would send it; ``devices`` is a list
    of (device or None, index, uid, pair, delete)."""
    data = {"name": host.name, "site": host.site_id, "product": host.product_id, "status": host.status,
            "notes": host.notes, **SSH_FIELDS, "devices-TOTAL_FORMS": len(devices),
            "devices-INITIAL_FORMS": sum(1 for d in devices if d[0] is not None),
            "devices-MIN_NUM_FORMS": 0, "devices-MAX_NUM_FORMS": 1000}
    for i, (device, index, uid, pair, delete) in enumerate(devices):
        data.update({f"devices-{i}-id": device.pk if device else "", f"devices-{i}-host": host.pk,
                     f"devices-{i}-index": index, f"devices-{i}-uid": uid,
                     f"devices-{i}-nvlink_pair": "" if pair is None else pair})
        if delete:
            data[f"devices-{i}-DELETE"] = "on"
    data.update(changes)
    return data


def _rows(host):
    return [(d, d.index, d.uid, d.nvlink_pair, False) for d in host.devices.order_by("index")]


def test_host_saves_a_good_topology(admin_client):
    h = f.host(f.product(cards_per_unit=2), cards=4)
    rows = _rows(h) + [(None, 4, f"{h.name}-gpu4", 7, False), (None, 5, f"{h.name}-gpu5", 7, False)]
    response = admin_client.post(_url(Host, "change", h.pk), _host_post(h, rows, notes="two more"))
    assert response.status_code == 302
    h.refresh_from_db()
    assert h.notes == "two more"
    assert [d.nvlink_pair for d in h.devices.order_by("index")] == [0, 0, 1, 1, 7, 7]


@pytest.mark.parametrize("pairs, wrong", [
    ([0, 0, 1, 2], "1, 2"),        # a pair number on one device only
    ([0, 0, 0, None], "0"),         # three devices on one pair
])
def test_host_with_a_bad_topology_shows_the_error_and_saves_nothing(admin_client, pairs, wrong):
    h = f.host(f.product(cards_per_unit=2), cards=4)
    before = list(h.devices.order_by("index").values_list("index", "uid", "nvlink_pair"))
    rows = [(d, d.index, d.uid, pair, False) for d, pair in zip(h.devices.order_by("index"), pairs)]
    response = admin_client.post(_url(Host, "change", h.pk), _host_post(h, rows, notes="changed"))
    assert response.status_code == 200
    text = response.content.decode()
    assert "NVLink pair numbers must be used by exactly two devices each" in text
    assert f"check pair(s) {wrong}" in text
    h.refresh_from_db()
    assert h.notes == ""
    assert list(h.devices.order_by("index").values_list("index", "uid", "nvlink_pair")) == before


def test_a_lot_host_needs_every_device_paired(admin_client):
    lot_host = f.host(f.product(cards_per_unit=2), cards=4)
    rows = [(d, d.index, d.uid, None if d.index >= 2 else d.nvlink_pair, False) for d in lot_host.devices.order_by("index")]
    response = admin_client.post(_url(Host, "change", lot_host.pk), _host_post(lot_host, rows))
    assert response.status_code == 200
    assert "every device must be in an NVLink pair" in response.content.decode()
    assert list(lot_host.devices.order_by("index").values_list("nvlink_pair", flat=True)) == [0, 0, 1, 1]
    # Single-card hosts may leave devices unpaired.
    single = f.host(f.product(), cards=2)
    assert admin_client.post(_url(Host, "change", single.pk), _host_post(single, _rows(single))).status_code == 302


def test_deleting_one_device_of_a_pair_is_refused(admin_client):
    h = f.host(f.product(cards_per_unit=2), cards=4)
    rows = _rows(h)
    rows[3] = (*rows[3][:4], True)
    response = admin_client.post(_url(Host, "change", h.pk), _host_post(h, rows))
    assert response.status_code == 200
    assert "check pair(s) 1" in response.content.decode()
    assert h.devices.count() == 4


def test_a_new_host_with_a_bad_topology_saves_nothing(admin_client):
    p = f.product(cards_per_unit=2)
    site = f.site()
    hosts_before = Host.objects.count()
    data = {"name": "new-host", "site": site.pk, "product": p.pk, "status": "active", "notes": "", **SSH_FIELDS,
            "devices-TOTAL_FORMS": 3, "devices-INITIAL_FORMS": 0, "devices-MIN_NUM_FORMS": 0,
            "devices-MAX_NUM_FORMS": 1000}
    for i, pair in enumerate([0, 0, 1]):
        data.update({f"devices-{i}-index": i, f"devices-{i}-uid": f"new-gpu{i}", f"devices-{i}-nvlink_pair": pair})
    response = admin_client.post(_url(Host, "add"), data)
    assert response.status_code == 200
    assert "check pair(s) 1" in response.content.decode()
    assert Host.objects.count() == hosts_before
    assert not Device.objects.filter(uid__startswith="new-gpu").exists()


def test_duplicate_device_index_or_uid_is_a_form_error(admin_client):
    h = f.host(f.product(), cards=2)
    other = f.host(f.product(), cards=1)
    rows = _rows(h) + [(None, 1, "fresh-uid", None, False)]
    assert admin_client.post(_url(Host, "change", h.pk), _host_post(h, rows)).status_code == 200
    rows = _rows(h) + [(None, 2, other.devices.get().uid, None, False)]
    assert admin_client.post(_url(Host, "change", h.pk), _host_post(h, rows)).status_code == 200
    assert h.devices.count() == 2


def test_deleting_a_booked_device_is_refused(admin_client):
    p = f.product()
    h = f.host(p, cards=1)
    services.hold_place(product=p, quantity=1, start=f.now_minute() + timedelta(hours=1), term_days=3)
    rows = _rows(h)
    rows[0] = (*rows[0][:4], True)
    response = admin_client.post(_url(Host, "change", h.pk), _host_post(h, rows))
    assert response.status_code == 200
    assert "protected related objects" in response.content.decode()
    assert h.devices.count() == 1


def test_host_status_changes_are_audited(admin_client):
    h = f.host(f.product(), cards=2)
    response = admin_client.post(_url(Host, "change", h.pk), _host_post(h, _rows(h), status="retired"))
    assert response.status_code == 302
    h.refresh_from_db()
    assert h.status == Host.Status.RETIRED
    entry = AuditEntry.objects.get(action="host_change", object_id=str(h.pk))
    assert (entry.from_state, entry.to_state, entry.data["changed"]) == ("active", "retired", ["status"])


def test_inventory_changes_that_would_strand_a_booking_are_refused(admin_client):
    p = f.product()
    h = f.host(p, cards=2, paired=True)
    paid = services.hold_confirm(booking=services.hold_place(product=p, quantity=1, start=f.now_minute(),
                                                             term_days=3, reference="ORD-7"))
    for changes in ({"status": "retired"}, {"status": "maintenance"}, {"product": f.product().pk}):
        response = admin_client.post(_url(Host, "change", h.pk), _host_post(h, _rows(h), **changes))
        assert response.status_code == 200, changes
        assert "would be stranded" in response.content.decode() and "ORD-7" in response.content.decode()
    rows = [(d, d.index, d.uid, None, False) for d in h.devices.order_by("index")]
    response = admin_client.post(_url(Host, "change", h.pk), _host_post(h, rows))
    assert "would be stranded" in response.content.decode()
    h.refresh_from_db()
    assert h.status == "active" and list(h.devices.values_list("nvlink_pair", flat=True)) == [0, 0]
    services.booking_release(booking=paid, actor="ops", reason="moved to another host")
    response = admin_client.post(_url(Host, "change", h.pk), _host_post(h, _rows(h), status="retired"))
    assert response.status_code == 302


# --- maintenance -------------------------------------------------------------


def _when(moment):
    return {"0": f"{moment:%Y-%m-%d}", "1": f"{moment:%H:%M:%S}"}


def _maintenance_post(start, end, reason="firmware upgrade"):
    data = {"reason": reason}
    for name, moment in (("start", start), ("end", end)):
        if isinstance(moment, dict):
            data.update({f"{name}_{k}": v for k, v in moment.items()})
        else:
            data.update({f"{name}_{k}": v for k, v in _when(moment).items()})
    return data


def test_maintenance_page_renders_with_a_link_from_the_host(admin_client, shop):
    url = _url(Host, "maintenance", shop["host"].pk)
    assert url in admin_client.get(_url(Host, "change", shop["host"].pk)).content.decode()
    page = admin_client.get(url)
    assert page.status_code == 200
    assert "firmware" in page.content.decode()  # the window already scheduled is listed


def test_maintenance_blocks_the_host_and_lists_the_booking_it_hits(admin_client):
    p = f.product()
    h = f.host(p, cards=2)
    start = f.now_minute() + timedelta(days=1)
    paid = services.hold_confirm(booking=services.hold_place(product=p, quantity=1, start=start, term_days=7,
                                                             reference="ORD-42"))
    slots_before = list(BookingDevice.objects.filter(booking=paid).values_list("device_id", "starts_at", "ends_at",
                                                                               "live"))
    response = admin_client.post(_url(Host, "maintenance", h.pk),
                                 _maintenance_post(start + timedelta(days=2), start + timedelta(days=3)), follow=True)
    assert response.status_code == 200
    window = Booking.objects.get(kind=Booking.Kind.MAINTENANCE, host=h)
    assert response.redirect_chain[-1][0] == _url(Booking, "change", window.pk)
    assert (window.starts_at, window.ends_at) == (start + timedelta(days=2), start + timedelta(days=3))
    assert window.reason == "firmware upgrade"
    text = response.content.decode()
    assert "ORD-42" in text  # in the warning and in the window's list of bookings to move
    assert _url(Booking, "change", paid.pk) in text
    paid.refresh_from_db()
    assert (paid.kind, paid.state) == (Booking.Kind.CONFIRMED, Booking.State.LIVE)
    assert list(BookingDevice.objects.filter(booking=paid).values_list("device_id", "starts_at", "ends_at",
                                                                       "live")) == slots_before
    entry = AuditEntry.objects.get(action="host_enter_maintenance", object_id=str(window.pk))
    assert entry.actor == "admin" and entry.data["hits"] == [paid.pk]


def test_maintenance_without_hits_says_nothing_to_move(admin_client):
    h = f.host(f.product(), cards=2)
    start = f.now_minute() + timedelta(days=1)
    response = admin_client.post(_url(Host, "maintenance", h.pk), _maintenance_post(start, start + timedelta(hours=4)),
                                 follow=True)
    assert response.status_code == 200
    assert "nothing to move" in response.content.decode()


def test_maintenance_action_leads_to_the_page_for_one_host(admin_client):
    h = f.host(f.product(), cards=1)
    other = f.host(f.product(), cards=1)
    url = _url(Host, "changelist")
    response = admin_client.post(url, {"action": "schedule_maintenance", ACTION_CHECKBOX_NAME: [h.pk]})
    assert response.status_code == 302 and response["Location"] == _url(Host, "maintenance", h.pk)
    response = admin_client.post(url, {"action": "schedule_maintenance", ACTION_CHECKBOX_NAME: [h.pk, other.pk]},
                                 follow=True)
    assert response.status_code == 200 and "Select exactly one host" in response.content.decode()


def _bad_inputs():
    soon = timezone.now().replace(microsecond=0) + timedelta(days=1)
    return {
        "end before start": (_maintenance_post(soon + timedelta(hours=2), soon), "The end must be after the start"),
        "end equals start": (_maintenance_post(soon, soon), "The end must be after the start"),
        "end in the past": (_maintenance_post(soon - timedelta(days=3), soon - timedelta(days=2)), "in the past"),
        "missing reason": (_maintenance_post(soon, soon + timedelta(hours=2), reason=""), "This field is required"),
        "blank reason": (_maintenance_post(soon, soon + timedelta(hours=2), reason="   "), "This field is required"),
        "garbage date": (_maintenance_post({"0": "next tuesday", "1": "10:00"}, soon), "Enter a valid date"),
        "garbage time": (_maintenance_post(soon, {"0": f"{soon:%Y-%m-%d}", "1": "25:99"}), "Enter a valid time"),
        "missing start": (_maintenance_post({"0": "", "1": ""}, soon), "This field is required"),
        "half a start": (_maintenance_post({"0": f"{soon:%Y-%m-%d}", "1": ""}, soon), "This field is required"),
    }


@pytest.mark.parametrize("case", list(_bad_inputs()))
def test_bad_maintenance_input_is_a_form_error(admin_client, case):
    h = f.host(f.product(), cards=2)
    data, message = _bad_inputs()[case]
    response = admin_client.post(_url(Host, "maintenance", h.pk), data)
    assert response.status_code == 200
    assert response.context["form"].errors
    assert message in response.content.decode()
    assert not Booking.objects.filter(kind=Booking.Kind.MAINTENANCE).exists()


def test_a_service_refusal_becomes_a_form_error(admin_client, monkeypatch):
    h = f.host(f.product(), cards=2)

    def refuse(**kwargs):
        raise NoLongerAvailable("The host was booked by others while we tried; please try again.")

    monkeypatch.setattr(services, "host_enter_maintenance", refuse)
    start = f.now_minute() + timedelta(days=1)
    response = admin_client.post(_url(Host, "maintenance", h.pk), _maintenance_post(start, start + timedelta(hours=1)))
    assert response.status_code == 200
    assert "booked by others" in response.content.decode()


def test_maintenance_of_an_unknown_host_redirects(admin_client):
    response = admin_client.get(_url(Host, "maintenance", 999999))
    assert response.status_code == 302


def test_maintenance_times_are_utc_whatever_the_active_time_zone():
    year = timezone.now().year + 1  # within the window's reach (allocation.rules.MAINTENANCE_AHEAD)
    with timezone.override("Asia/Seoul"):
        form = MaintenanceForm(_maintenance_post(timezone.datetime(year, 5, 1, 10, 0),
                                                 timezone.datetime(year, 5, 1, 12, 30)))
        assert form.is_valid(), form.errors
    assert form.cleaned_data["start"].isoformat() == f"{year}-05-01T10:00:00+00:00"
    assert form.cleaned_data["end"].isoformat() == f"{year}-05-01T12:30:00+00:00"


# --- release -----------------------------------------------------------------


def test_release_action_asks_for_a_reason_then_releases(admin_client, shop):
    booking = shop["confirmed"]
    url = _url(Booking, "changelist")
    selected = {"action": "release_bookings", ACTION_CHECKBOX_NAME: [booking.pk]}
    page = admin_client.post(url, selected)
    assert page.status_code == 200 and "ORD-PAID" in page.content.decode()
    booking.refresh_from_db()
    assert booking.state == Booking.State.LIVE

    page = admin_client.post(url, {**selected, "apply": "yes", "reason": "  "})
    assert page.status_code == 200 and page.context["form"].errors
    booking.refresh_from_db()
    assert booking.state == Booking.State.LIVE

    response = admin_client.post(url, {**selected, "apply": "yes", "reason": "order refunded"}, follow=True)
    assert response.status_code == 200
    assert "1 booking released" in response.content.decode()
    booking.refresh_from_db()
    assert booking.state == Booking.State.RELEASED and booking.reason == "order refunded"
    assert not BookingDevice.objects.filter(booking=booking, live=True).exists()
    entry = AuditEntry.objects.get(action="booking_release", object_id=str(booking.pk))
    assert (entry.actor, entry.from_state, entry.to_state, entry.reason) == ("admin", "live", "released",
                                                                             "order refunded")


def test_release_action_reports_refusals_as_messages(admin_client, shop):
    done = services.booking_release(booking=shop["hold"], actor="test", reason="gone")
    live = shop["maintenance"]
    response = admin_client.post(_url(Booking, "changelist"),
                                 {"action": "release_bookings", ACTION_CHECKBOX_NAME: [done.pk, live.pk],
                                  "apply": "yes", "reason": "window cancelled"}, follow=True)
    assert response.status_code == 200
    text = response.content.decode()
    assert f"Booking #{done.pk} was not released" in text
    assert "1 booking released" in text
    live.refresh_from_db()
    assert live.state == Booking.State.RELEASED


def test_release_button_on_a_booking(admin_client, shop):
    booking = shop["maintenance"]
    url = _url(Booking, "release", booking.pk)
    assert url in admin_client.get(_url(Booking, "change", booking.pk)).content.decode()
    assert admin_client.get(url).status_code == 200
    assert admin_client.post(url, {"apply": "yes", "reason": ""}).status_code == 200
    response = admin_client.post(url, {"apply": "yes", "reason": "done early"})
    assert response.status_code == 302 and response["Location"] == _url(Booking, "change", booking.pk)
    booking.refresh_from_db()
    assert booking.state == Booking.State.RELEASED
    assert url not in admin_client.get(_url(Booking, "change", booking.pk)).content.decode()
    # Twice is refused with a message, not an error page.
    response = admin_client.post(url, {"apply": "yes", "reason": "again"}, follow=True)
    assert response.status_code == 200 and "was not released" in response.content.decode()
    assert AuditEntry.objects.filter(action="booking_release", object_id=str(booking.pk)).count() == 1


# --- permissions -------------------------------------------------------------


def test_staff_who_may_only_look_can_neither_schedule_nor_release(client, shop):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    user = get_user_model().objects.create_user("viewer", password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_host", "view_booking"]))
    client.force_login(user)
    host, booking = shop["host"], shop["confirmed"]
    assert client.get(_url(Host, "change", host.pk)).status_code == 200
    assert _url(Host, "maintenance", host.pk) not in client.get(_url(Host, "change", host.pk)).content.decode()
    assert client.get(_url(Host, "maintenance", host.pk)).status_code == 403
    page = client.get(_url(Booking, "change", booking.pk))
    assert page.status_code == 200 and _url(Booking, "release", booking.pk) not in page.content.decode()
    assert client.post(_url(Booking, "release", booking.pk), {"apply": "yes", "reason": "x"}).status_code == 403
    assert "release_bookings" not in client.get(_url(Booking, "changelist")).content.decode()
    booking.refresh_from_db()
    assert booking.state == Booking.State.LIVE
