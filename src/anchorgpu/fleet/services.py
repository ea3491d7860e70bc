"""Fleet use cases: an operator's edit of a host and its devices.

An edit that could strand a hold or a paid term (another product, the host leaving sale, a device removed or
re-paired over NVLink) is checked and written in one transaction that holds the row lock of the host's product
(and of the new product), the lock every placement of that product takes its turn on
(``allocation.services._take_turn``): no booking can land on the host between the check and the write.
Maintenance windows are ``allocation.services.host_enter_maintenance``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation import selectors as allocation_selectors
from anchorgpu.audit.services import audit_record
from anchorgpu.catalog.models import Product

from .models import Device, Host, validate_topology

# The host fields an operator edits (how the shop reaches it, and the sale block, included).
HOST_FIELDS = ("name", "site", "product", "status", "notes", "ssh_address", "ssh_port", "ssh_user", "host_key",
               "runtime", "sale_block")


class HostUpdateRefused(Exception):
    """The edit is refused; ``message`` says why (for the operator), ``bookings`` lists what it would strand."""

    def __init__(self, message: str, bookings: Sequence = ()):
        super().__init__(message)
        self.message = message
        self.bookings = list(bookings)


@dataclass(frozen=True)
class DeviceEdit:
    """One device row as the operator leaves it: ``device_id`` None for a new device; ``delete`` to remove it."""

    device_id: int | None
    index: int | None = None
    uid: str = ""
    nvlink_pair: int | None = None
    delete: bool = False


@dataclass(frozen=True)
class HostUpdate:
    host: Host
    changed: list[str] = field(default_factory=list)  # host fields changed
    devices: dict = field(default_factory=dict)  # what happened to the devices: added, changed, removed (uids)


def stranded_message(bookings) -> str:
    refs = ", ".join(f"#{b.pk}{f' ({b.reference})' if b.reference else ''}" for b in bookings[:10])
    return _("%(count)d live booking(s) would be stranded: %(refs)s. End, refund or cancel their orders first (each "
             "order's admin page has the tools); for a planned window, use “Schedule maintenance”.") % {
        "count": len(bookings), "refs": refs}


def _lock_products(*product_ids: int | None) -> None:
    """The products' rows, in one order (two edits of hosts of two products cannot wait on each other)."""
    for pk in sorted({pk for pk in product_ids if pk is not None}):
        Product.objects.select_for_update(no_key=True).only("pk").filter(pk=pk).first()


def _leaves_sale(before: str, after: str) -> bool:
    return before == Host.Status.ACTIVE and after != Host.Status.ACTIVE


def host_update_check(*, host: Host, changes: dict, devices: Sequence[DeviceEdit] = (),
                      now: datetime | None = None) -> Host | None:
    """Check an edit of ``host`` (``changes``: host field -> new value; ``devices``: the device rows added,
    changed or removed) without writing it; raises ``HostUpdateRefused``. Inside a transaction (the caller's,
    e.g. the admin's save, or ``host_update``'s), it takes the products' and the host's row locks, which then
    hold until that transaction ends. Returns the locked row as it is now (None for a host not saved yet)."""
    unknown = set(changes) - set(HOST_FIELDS)
    if unknown:
        raise HostUpdateRefused(_("These host fields cannot be edited here: %(fields)s.")
                                % {"fields": ", ".join(sorted(unknown))})
    new_product = changes.get("product")
    new_product_id = getattr(new_product, "pk", new_product)
    locked = None
    if host.pk is not None:
        current = Host.objects.filter(pk=host.pk).values_list("product_id", flat=True).first()
        if current is None:
            raise HostUpdateRefused(_("This host no longer exists."))
        _lock_products(current, new_product_id)
        locked = Host.objects.select_for_update().get(pk=host.pk)
    if (locked is not None and "sale_block" in changes and changes["sale_block"] != locked.sale_block
            and locked.faults.filter(cleared_at__isnull=True).exists()):
        raise HostUpdateRefused(_("This host is off sale for a fault; clear the fault (its own page) instead of "
                                  "editing the sale block."))
    product_id = new_product_id or (locked.product_id if locked else None)
    product = Product.objects.filter(pk=product_id).first() if product_id else None
    existing = {d.pk: d for d in locked.devices.all()} if locked else {}
    for edit in devices:
        if edit.device_id is not None and edit.device_id not in existing:
            raise HostUpdateRefused(_("Device #%(id)s is not on this host.") % {"id": edit.device_id})
    if locked is not None:
        whole_host = ("product" in changes and new_product_id != locked.product_id) or (
            "status" in changes and _leaves_sale(locked.status, changes["status"]))
        touched = [e.device_id for e in devices if e.device_id is not None
                   and (e.delete or e.nvlink_pair != existing[e.device_id].nvlink_pair)]
        bookings = []
        if whole_host:
            bookings = list(allocation_selectors.live_customer_bookings(host_id=locked.pk, now=now))
        elif touched:
            bookings = list(allocation_selectors.live_customer_bookings(device_ids=touched, now=now))
        if bookings:
            raise HostUpdateRefused(stranded_message(bookings), bookings)
    edited = {e.device_id: e for e in devices if e.device_id is not None}
    pairs = [edited[pk].nvlink_pair if pk in edited else d.nvlink_pair
             for pk, d in existing.items() if not (pk in edited and edited[pk].delete)]
    pairs += [e.nvlink_pair for e in devices if e.device_id is None and not e.delete]
    try:
        validate_topology(pairs, cards_per_unit=product.cards_per_unit if product else 1)
    except ValidationError as exc:
        raise HostUpdateRefused(" ".join(exc.messages)) from None
    return locked


def host_update(*, host: Host, actor: str, changes: dict, devices: Sequence[DeviceEdit] = (), reason: str = "",
                now: datetime | None = None) -> HostUpdate:
    """Apply an operator's edit of an existing host and its devices, checked under the product's lock
    (``host_update_check``), with one ``host_change`` audit row saying what changed."""
    if host.pk is None:
        raise HostUpdateRefused(_("This host is not saved yet."))
    now = now or timezone.now()
    with transaction.atomic():
        locked = host_update_check(host=host, changes=changes, devices=devices, now=now)
        before = locked.status
        changed = []
        for name, value in changes.items():
            if getattr(locked, name if name not in ("site", "product") else f"{name}_id") != getattr(value, "pk",
                                                                                                  value):
                setattr(locked, name, value)
                changed.append(name)
        if changed:
            locked.save(update_fields=changed)
        done = {"added": [], "changed": [], "removed": []}
        try:
            for edit in devices:
                if edit.delete:
                    if edit.device_id is not None:
                        device = locked.devices.get(pk=edit.device_id)
                        device.delete()
                        done["removed"].append(device.uid)
                    continue
                device = locked.devices.get(pk=edit.device_id) if edit.device_id is not None else Device(host=locked)
                values = {"index": edit.index, "uid": edit.uid, "nvlink_pair": edit.nvlink_pair}
                if device.pk is not None and all(getattr(device, k) == v for k, v in values.items()):
                    continue
                for k, v in values.items():
                    setattr(device, k, v)
                device.save()
                done["changed" if edit.device_id is not None else "added"].append(device.uid)
        except ProtectedError:
            raise HostUpdateRefused(_("A device with bookings on record cannot be removed; leave it unpaired on a "
                                      "retired host instead.")) from None
        devices_done = {k: v for k, v in done.items() if v}
        if changed or devices_done:
            data = {"changed": changed}
            if devices_done:
                data["devices"] = devices_done
            audit_record(actor=actor, action="host_change", obj=locked, from_state=before, to_state=locked.status,
                         reason=reason, data=data)
    for name in changed:  # the caller's object shows what was saved
        setattr(host, name, getattr(locked, name))
    return HostUpdate(host=locked, changed=changed, devices=devices_done)
