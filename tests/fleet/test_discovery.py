"""Fleet discovery end to end against a real SSH server (tests/fleet/replay_host.py): the host's nvidia-smi and
podman are stand-ins that replay output recorded on real machines, since there is no GPU here; everything else
(SSH, the key check, nproc, lscpu, /proc/meminfo, df) is real."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from anchorgpu.allocation import selectors, services
from anchorgpu.allocation.periods import Period
from anchorgpu.audit.models import AuditEntry
from anchorgpu.fleet import discovery
from anchorgpu.fleet.models import Device, Host
from tests import factories as f

from .replay_host import ADDRESS

pytestmark = pytest.mark.django_db
H100_UUID = "GPU-00000000-0000-0000-0000-000000000000"  # the capture's masked UUID (see SOURCES.md)


def _env(slug, stack, image, cuda=""):
    env = f.environment(slug, stack)
    env.image, env.cuda_version = image, cuda
    env.save()
    return env


def _host(replay, product, *, name="gpu-host-1", cards=0, key=None, port=None) -> Host:
    h = f.host(product, cards=cards)
    Host.objects.filter(pk=h.pk).update(name=name, ssh_address=ADDRESS, ssh_port=port or replay.port, ssh_user="root",
                                        host_key=key or replay.host_key)
    return Host.objects.select_related("product").get(pk=h.pk)


@pytest.fixture
def h100():
    return f.product("h100-sxm", name="H100 SXM 80 GB", memory=80)


def test_an_h100_host_is_read_and_its_card_recorded_with_its_uuid(replay, ssh_settings, h100):
    replay.use("h100")
    _env("pytorch-cu124", "cuda", "anchorgpu/pytorch:2.5-cu124", "12.4")
    host = _host(replay, h100)
    result = discovery.host_discover(host=host, actor="op")
    host.refresh_from_db()
    [device] = host.devices.all()
    assert (device.index, device.uid, device.gpu_uuid, device.pci_bus_id) == (0, H100_UUID, H100_UUID,
                                                                              "00000000:00:09.0")
    assert host.sale_block == "" and result.problems == []
    assert host.last_contact_at == host.discovered_at is not None
    inv = host.inventory
    assert inv["driver_version"] == "590.48.01" and inv["cards"][0]["memory_mib"] == 81559
    assert inv["cpu_count"] >= 1 and inv["memory_bytes"] > 0 and inv["disk"]["mount"] == "/"
    assert "localhost/anchorgpu/pytorch:2.5-cu124" in inv["images"]
    assert AuditEntry.objects.filter(action="device_discovered", object_id=str(device.pk)).exists()
    assert AuditEntry.objects.filter(action="host_discovered", object_id=str(host.pk)).count() == 1


def test_a_second_run_changes_nothing(replay, ssh_settings, h100):
    replay.use("h100")
    host = _host(replay, h100)
    discovery.host_discover(host=host, actor="op")
    before = list(Device.objects.filter(host=host).values())
    second = discovery.host_discover(host=Host.objects.get(pk=host.pk), actor="op")
    assert list(Device.objects.filter(host=host).values()) == before
    assert second.changes == {"created": [], "updated": {}, "deleted": []}
    assert AuditEntry.objects.filter(action="device_discovered").count() == 1


def test_a_host_whose_cards_are_not_its_product_is_flagged_and_not_offered(replay, ssh_settings, h100):
    replay.use("l40s")
    host = _host(replay, h100)
    discovery.host_discover(host=host, actor="op")
    host.refresh_from_db()
    assert host.sale_block.startswith(discovery.BLOCK_PREFIX)
    assert "'NVIDIA L40S', not a H100" in host.sale_block
    start = f.now_minute() + timedelta(hours=1)
    assert selectors.product_units(h100) == []
    assert selectors.units_free(h100, Period.of_days(start, 3)) == []


def test_fixing_the_cause_clears_discoverys_own_block_but_never_an_operators(replay, ssh_settings, h100):
    replay.use("l40s")
    host = _host(replay, h100)
    discovery.host_discover(host=host, actor="op")
    replay.use("h100")
    Device.objects.filter(host=host).delete()  # the operator swapped the card and removed the old row
    discovery.host_discover(host=Host.objects.get(pk=host.pk), actor="op")
    host.refresh_from_db()
    assert host.sale_block == "" and len(selectors.product_units(h100)) == 1
    Host.objects.filter(pk=host.pk).update(sale_block="Operator: waiting for a new PSU")
    discovery.host_discover(host=Host.objects.get(pk=host.pk), actor="op")
    assert Host.objects.get(pk=host.pk).sale_block == "Operator: waiting for a new PSU"


def test_a_driver_too_old_for_an_environment_is_flagged(replay, ssh_settings):
    replay.use("rtx2080-old-driver")
    _env("pytorch-cu124", "cuda", "anchorgpu/pytorch:2.5-cu124", "12.4")
    product = f.product("rtx2080", name="RTX 2080 SUPER 8 GB", memory=8)
    host = _host(replay, product)
    discovery.host_discover(host=host, actor="op")
    host.refresh_from_db()
    assert "CUDA 12.4 needs an NVIDIA driver of at least 525.60.13; the host has 466.63" in host.sale_block
    assert host.devices.get().gpu_uuid == "GPU-df6e7a7c-7314-46f8-abc4-b88b36dcf3aa"


def test_a_missing_image_is_flagged(replay, ssh_settings, h100):
    replay.use("h100-no-images")
    _env("pytorch-cu124", "cuda", "anchorgpu/pytorch:2.5-cu124", "12.4")
    host = _host(replay, h100)
    discovery.host_discover(host=host, actor="op")
    assert "image(s) missing on the host: anchorgpu/pytorch:2.5-cu124" in Host.objects.get(pk=host.pk).sale_block


def test_a_lot_of_two_without_nvlink_partners_is_flagged(replay, ssh_settings):
    replay.use("h100")
    lot = f.product("h100-lot", name="H100 lot 2 x 80 GB", memory=80, cards_per_unit=2)
    host = _host(replay, lot)
    discovery.host_discover(host=host, actor="op")
    assert "card(s) 0 have no NVLink partner" in Host.objects.get(pk=host.pk).sale_block


def test_a_changed_host_key_is_refused_and_the_host_blocked(replay, ssh_settings, h100):
    replay.use("h100")
    host = _host(replay, h100, key=replay.other_key)
    with pytest.raises(discovery.DiscoveryError, match="not the pinned one"):
        discovery.host_discover(host=host, actor="op")
    host.refresh_from_db()
    assert host.sale_block.startswith(discovery.BLOCK_PREFIX) and host.last_contact_at is None
    assert not host.devices.exists()
    assert AuditEntry.objects.filter(action="host_key_refused", object_id=str(host.pk)).exists()


def test_an_unreachable_host_is_an_error_and_its_last_contact_stays(replay, ssh_settings, h100):
    host = _host(replay, h100, port=1)
    with pytest.raises(discovery.DiscoveryError, match="unreachable"):
        discovery.host_discover(host=host, actor="op")
    host.refresh_from_db()
    assert host.last_contact_at is None and host.sale_block == ""


def test_a_booked_host_whose_card_count_changed_is_flagged_not_rewritten(replay, ssh_settings, h100):
    replay.use("h100")
    host = _host(replay, h100, cards=2)
    services.hold_place(product=h100, quantity=2, start=f.now_minute() + timedelta(hours=1), term_days=3,
                        reference="ORD-1")
    uids = sorted(Device.objects.filter(host=host).values_list("uid", flat=True))
    discovery.host_discover(host=host, actor="op")
    host.refresh_from_db()
    assert "the host shows 1 card(s) where the record has 2, and devices are booked" in host.sale_block
    assert sorted(Device.objects.filter(host=host).values_list("uid", flat=True)) == uids


def test_the_same_card_on_two_hosts_is_flagged(replay, ssh_settings, h100):
    replay.use("h100")
    first = _host(replay, h100, name="gpu-host-a")
    discovery.host_discover(host=first, actor="op")
    second = _host(replay, h100, name="gpu-host-b")
    discovery.host_discover(host=second, actor="op")
    assert f"card {H100_UUID} is recorded on host gpu-host-a" in Host.objects.get(pk=second.pk).sale_block
    assert not Device.objects.filter(host=second).exists()


def test_dry_run_writes_nothing(replay, ssh_settings, h100):
    replay.use("l40s")
    host = _host(replay, h100)
    result = discovery.host_discover(host=host, actor="op", dry_run=True)
    assert result.changes["created"] == [H100_UUID] and any("not a H100" in p for p in result.problems)
    host.refresh_from_db()
    assert host.sale_block == "" and host.last_contact_at is None and not host.devices.exists()


def test_cli_discover_and_its_errors(replay, ssh_settings, h100, capsys):
    replay.use("h100")
    _host(replay, h100, name="cli-host")
    call_command("fleet", "discover", "cli-host")
    out = capsys.readouterr().out
    assert f"gpu0  {H100_UUID}  NVIDIA H100 80GB HBM3" in out and "cli-host: sold" in out
    with pytest.raises(CommandError, match="no host named 'nope'"):
        call_command("fleet", "discover", "nope")
    _host(replay, h100, name="dead-host", port=1)
    with pytest.raises(CommandError, match="dead-host: .*unreachable"):
        call_command("fleet", "discover", "dead-host")


def test_cli_pin_host_key_shows_the_fingerprint_and_pins_only_with_yes(replay, ssh_settings, h100, capsys):
    host = _host(replay, h100, name="new-host", key="")
    Host.objects.filter(pk=host.pk).update(host_key="")
    call_command("fleet", "pin-host-key", "new-host")
    assert "SHA256:" in capsys.readouterr().out and Host.objects.get(pk=host.pk).host_key == ""
    call_command("fleet", "pin-host-key", "new-host", "--yes")
    assert Host.objects.get(pk=host.pk).host_key.split()[:2] == replay.host_key.split()[:2]


def test_pin_host_key_prints_the_fingerprint_ssh_keygen_prints(replay, ssh_settings, h100, capsys):
    import subprocess

    host = _host(replay, h100, name="fp-host")
    Host.objects.filter(pk=host.pk).update(host_key="")
    call_command("fleet", "pin-host-key", "fp-host")
    expected = subprocess.run(["ssh-keygen", "-lf", str(replay.root / "host_ed25519.pub")], capture_output=True,
                              text=True, check=True).stdout.split()[1]
    assert expected.startswith("SHA256:") and expected in capsys.readouterr().out


def test_a_booked_device_that_shows_another_card_is_flagged_and_kept(replay, ssh_settings, h100):
    replay.use("h100")
    host = _host(replay, h100, cards=1)
    Device.objects.filter(host=host).update(gpu_uuid="GPU-11111111-2222-3333-4444-555555555555")  # test value
    services.hold_place(product=h100, quantity=1, start=f.now_minute() + timedelta(hours=1), term_days=3,
                        reference="ORD-2")
    discovery.host_discover(host=host, actor="op")
    device = Device.objects.get(host=host)
    assert device.gpu_uuid == "GPU-11111111-2222-3333-4444-555555555555"
    assert f"gpu0 is booked and now shows another card ({H100_UUID})" in Host.objects.get(pk=host.pk).sale_block


def test_an_unbooked_card_found_in_another_slot_is_renumbered(replay, ssh_settings, h100):
    replay.use("h100")
    host = _host(replay, h100, cards=0)
    Device.objects.create(host=host, index=3, uid="old-row", gpu_uuid=H100_UUID)
    discovery.host_discover(host=host, actor="op")
    device = Device.objects.get(host=host)
    assert (device.index, device.uid) == (0, H100_UUID)
    assert Host.objects.get(pk=host.pk).sale_block == ""


def test_pairs_of_a_recorded_hgx_topology_are_written_and_the_lot_is_sold(h100):
    """The reconciliation step alone, on the recorded 8-card HGX H100 matrix. The card UUIDs are test values (no
    published 8-card query output was found); the name and memory are the recorded H100's."""
    from pathlib import Path

    from anchorgpu.fleet import inventory_parse

    lot = f.product("h100-lot", name="H100 lot 2 x 80 GB", memory=80, cards_per_unit=2)
    host = f.host(lot, cards=0)
    topo = (Path(__file__).parent / "fixtures" / "nvidia-smi-topo-hgx-h100-8x.txt").read_text()
    links = inventory_parse.parse_nvidia_topology(topo)
    cards = [{"index": i, "uuid": f"GPU-{i:08x}-0000-4000-8000-00000000test", "name": "NVIDIA H100 80GB HBM3",
              "pci_bus_id": "", "memory_mib": 81559, "driver_version": "590.48.01"} for i in range(8)]
    inv = {"vendor": "NVIDIA", "runtime": "podman", "cards": cards, "driver_version": "590.48.01", "images": [],
           "nvlink": [[a, b, n] for (a, b), n in sorted(links.items())]}
    result = discovery._apply(host_id=host.pk, inv=inv, read_problems=[], actor="op", now=f.now_minute())
    assert result.problems == []
    pairs = dict(Device.objects.filter(host=host).values_list("index", "nvlink_pair"))
    assert pairs == {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3}
    assert len(selectors.product_units(lot)) == 4


def test_a_record_that_cannot_be_reconciled_is_left_as_it_was_and_flagged(replay, ssh_settings, h100):
    """The card is recorded in slot 3; slot 0 holds a row the host no longer shows, with a past (released) booking:
    that row cannot be deleted, so the card cannot move to slot 0. Nothing about the devices changes."""
    replay.use("h100")
    host = _host(replay, h100, cards=0)
    old = Device.objects.create(host=host, index=0, uid="gone-card",
                                gpu_uuid="GPU-99999999-0000-0000-0000-0000000000aa")  # a test value
    booking = services.hold_place(product=h100, quantity=1, start=f.now_minute() + timedelta(hours=1), term_days=3)
    services.hold_release(booking=booking, actor="op")
    Device.objects.create(host=host, index=3, uid="the-card", gpu_uuid=H100_UUID)
    before = sorted(Device.objects.filter(host=host).values_list("index", "uid"))
    result = discovery.host_discover(host=host, actor="op")
    assert sorted(Device.objects.filter(host=host).values_list("index", "uid")) == before
    assert result.changes == {"created": [], "updated": {}, "deleted": []}
    block = Host.objects.get(pk=host.pk).sale_block
    assert f"{old} is no longer on the host but has past bookings" in block
    assert "could not be brought in line" in block
