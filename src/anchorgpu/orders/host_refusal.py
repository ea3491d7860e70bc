"""A host the provisioner refused to use (``HostRefused``): its SSH host key is not the pinned one, or what it
runs contradicts the fleet record. The order concerned goes to the operator's queue at once (``fulfilment``,
``wipes``); here, the host itself: taken off sale when the provisioner says so, and the operators alerted."""

from __future__ import annotations

from django.db import transaction

from anchorgpu.allocation.models import BookingDevice
from anchorgpu.audit.services import audit_record
from anchorgpu.fleet.models import Host

from .models import Order


def refused_host(order: Order | None, name: str) -> Host | None:
    """The fleet record of the host an exception names (by name, else SSH address); failing that, the order's
    only host."""
    name = (name or "").strip()
    if name:
        found = Host.objects.filter(name=name).first() or Host.objects.filter(ssh_address=name).first()
        if found is not None:
            return found
    if order is not None and order.booking_id:
        ids = set(BookingDevice.objects.filter(booking_id=order.booking_id).values_list("device__host_id", flat=True))
        if len(ids) == 1:
            return Host.objects.filter(pk=ids.pop()).first()
    return None


def host_sale_block(*, host: Host, why: str, actor: str) -> bool:
    """Take ``host`` off sale (in the caller's transaction): it takes no new bookings while ``sale_block`` is
    set. True when it was set here; a host already blocked keeps its first reason."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("a host is taken off sale inside the transaction of the finding")
    locked = Host.objects.select_for_update().get(pk=host.pk)
    if locked.sale_block:
        return False
    locked.sale_block = why[:500]
    locked.save(update_fields=["sale_block"])
    audit_record(actor=actor, action="host_sale_block", obj=locked, reason=why[:2000], data={"host": locked.name})
    host.sale_block = locked.sale_block
    return True
