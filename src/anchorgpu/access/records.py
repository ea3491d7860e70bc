"""What the real provisioner needs from the database, read at the start of a step in plain reads and copied into
frozen values, so that no ORM object (and no transaction) is held while the step talks to a host."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from anchorgpu.allocation.selectors import current_slots
from anchorgpu.fleet.models import Device
from anchorgpu.fleet.ssh import Target
from anchorgpu.orders.provisioner import HostRefused, ProvisioningError

from .containers import Card

# Space on /workspace sold with each card, and with each unit of the extra NVMe option.
WORKSPACE_GIB_PER_CARD = 50
EXTRA_NVME_OPTION = "extra-nvme-4tb"
EXTRA_NVME_GIB = 4000


@dataclass(frozen=True)
class HostPart:
    """The order's cards on one host."""

    name: str
    target: Target
    runtime: str
    cards: tuple[Card, ...]
    card_count: int  # the host's cards in the fleet record
    other_indices: tuple[int, ...]  # the host's cards not in this order
    pci_bus_ids: tuple[str, ...]


@dataclass(frozen=True)
class OrderWork:
    pk: int
    reference: str
    vendor: str  # nvidia | amd
    image: str
    keys: tuple[str, ...]  # OpenSSH public key lines
    fingerprints: tuple[str, ...]
    sold_gib: float
    parts: tuple[HostPart, ...]

    def sold_on(self, part: HostPart) -> float:
        cards = sum(len(p.cards) for p in self.parts) or 1
        return round(self.sold_gib * len(part.cards) / cards, 2)


def workspace_gib_per_card() -> float:
    return float(getattr(settings, "ANCHORGPU_WORKSPACE_GIB_PER_CARD", WORKSPACE_GIB_PER_CARD))


def order_work(order, device_ids=None) -> OrderWork:
    """The order's booking, cards, hosts, image and keys, as plain values. Its cards are those it holds now (the
    slots that run to its booking's end: not the cards a move left); ``device_ids`` names others of its slots
    instead (the cards a move left, for their wipe)."""
    ref = order.reference
    if order.booking_id is None:
        raise ProvisioningError(f"order {ref} has no booking")
    if device_ids is None:
        cards = [slot.device for slot in current_slots(order.booking_id).select_related("device__host__product")
                 .order_by("device__host__name", "device__index")]
    else:
        cards = list(Device.objects.filter(pk__in=list(device_ids)).select_related("host__product")
                     .order_by("host__name", "index"))
    if not cards:
        raise ProvisioningError(f"order {ref}: booking #{order.booking_id} holds no devices")
    by_host: dict[int, list[Device]] = {}
    for device in cards:
        by_host.setdefault(device.host_id, []).append(device)
    product = cards[0].host.product
    vendor = "amd" if (product.stack == "rocm" or "amd" in product.vendor.lower()) else "nvidia"
    parts = []
    for devices in by_host.values():
        host = devices[0].host
        if not host.ssh_address:
            raise HostRefused(f"order {ref}: host {host.name} has no SSH address in the fleet record", host=host.name)
        unnamed = [d.index for d in devices if not d.gpu_uuid]
        if unnamed:
            raise HostRefused(f"order {ref}: host {host.name} card(s) {unnamed} have no GPU UUID in the fleet "
                              "record (fleet discovery has not read the host)", host=host.name)
        indices = list(Device.objects.filter(host=host).order_by("index").values_list("index", flat=True))
        booked = {d.index for d in devices}
        parts.append(HostPart(name=host.name, target=Target.of(host), runtime=host.runtime or "podman",
                              cards=tuple(Card(index=d.index, uuid=d.gpu_uuid) for d in devices),
                              card_count=len(indices), other_indices=tuple(i for i in indices if i not in booked),
                              pci_bus_ids=tuple(d.pci_bus_id for d in devices)))
    env = order.environment
    image = (env.image or "").strip()
    if not image:
        raise HostRefused(f"order {ref}: environment {env.slug} has no image reference")
    keys = list(order.ssh_keys.order_by("pk").values_list("public_key", "fingerprint"))
    if not keys:
        raise ProvisioningError(f"order {ref} has no SSH key to install")
    extra = sum(1 for s in (order.option_slugs or []) if s == EXTRA_NVME_OPTION) * order.quantity * EXTRA_NVME_GIB
    return OrderWork(pk=order.pk, reference=ref, vendor=vendor, image=image,
                     keys=tuple(k.strip() for k, _ in keys), fingerprints=tuple(f for _, f in keys),
                     sold_gib=len(cards) * workspace_gib_per_card() + extra, parts=tuple(parts))
