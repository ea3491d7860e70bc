"""Provisioners: what each step of access preparation (DESIGN §6) does.

A provisioner has one method per ``Step`` plus ``wipe`` for the term's end.
Every method takes the order, must be idempotent (the worker may call it
again after a crash before the step was recorded) and returns a small
JSON-able dict, stored as the step's ``detail`` (the wipe's is its proof).
A method that cannot do its step raises ``ProvisioningError`` (or
``HostUnavailable``, ``HostRefused``); the worker records the failure and
retries after a back-off, up to a limit (see ``retry``, ``step_failures``).

Methods run with no transaction open and no row locked: the worker holds
a lease on the order's step meanwhile (``step_lease``), so a method may take
minutes (SSH, containers). They may read the database but must not write to
it: the worker records the result, and only while its lease holds. A method
may be called again for the same step after a crash (the lease taken over),
so it finds what an earlier try made (a container named by the order) and
carries on.

The deployment picks one with the ``ANCHORGPU_PROVISIONER`` setting (a
dotted path); ``get_provisioner()`` loads it.
"""

from __future__ import annotations

from django.conf import settings
from django.utils.module_loading import import_string

from anchorgpu.allocation.models import Booking, BookingDevice
from anchorgpu.allocation.selectors import current_slots
from anchorgpu.fleet.models import Device, Host

from .provisioning import WIPE, Step

DEFAULT = "anchorgpu.orders.provisioner.SimulatedProvisioner"


class ProvisioningError(Exception):
    """A step could not be done now. The message is kept on the order
    (``last_error``) for the operator, so say what is wrong and where.
    The step is retried later, with back-off, up to a limit."""

    host: str = ""  # the host concerned, where there is one


class HostUnavailable(ProvisioningError):
    """The host did not answer (no route, refused, timed out, connection lost mid-step). Retried with
    back-off; a host that stays unreachable sends the order to the operator's queue with this reason."""

    def __init__(self, message: str, *, host: str = ""):
        super().__init__(message)
        self.host = host


class HostRefused(ProvisioningError):
    """The host must not be used until an operator looks at it: its SSH host key is not the pinned one, or
    what it runs contradicts the fleet record (other cards, a missing image, a driver too old). Not retried:
    the order goes to the operator's queue at once and the operators are alerted."""

    def __init__(self, message: str, *, host: str = "", block_host: bool = False):
        super().__init__(message)
        self.host = host
        self.block_host = block_host  # the host itself is taken off sale (``Host.sale_block``)


class Provisioner:
    """The interface. ``name`` is stored on the order (at most 40 characters)."""

    name = "abstract"

    def allocate_devices(self, order) -> dict:
        raise NotImplementedError

    def prepare_environment(self, order) -> dict:
        raise NotImplementedError

    def install_ssh_keys(self, order) -> dict:
        raise NotImplementedError

    def health_check(self, order) -> dict:
        raise NotImplementedError

    def deliver_access(self, order) -> dict:
        """Must return at least ``host``, ``port`` and ``user``: the customer's SSH login."""
        raise NotImplementedError

    def wipe(self, order) -> dict:
        """The term has ended and the booking is released: erase the customer's data."""
        raise NotImplementedError

    def wipe_cards(self, order, device_ids) -> dict:
        """The order's term moved to other cards (``orders.moves``): erase what it had on the cards
        ``device_ids`` it left, and only there. Returns the proof, like ``wipe``."""
        raise NotImplementedError

    def run(self, step: Step | str, order) -> dict:
        """Do ``step`` (a ``Step`` or ``"wipe"``) for ``order``."""
        name = WIPE if step == WIPE else Step(step).value
        return getattr(self, name)(order)


def _slots(order) -> list[BookingDevice]:
    """The order's cards now: the slots that run to its booking's end, not those a move left."""
    booking = order.booking
    if booking is None:
        raise ProvisioningError(f"order {order.reference} has no booking")
    return list(current_slots(booking.pk).select_related("device__host__site")
                .order_by("device__host__name", "device__index"))


def _hosts(slots: list[BookingDevice]) -> list[Host]:
    seen: dict[int, Host] = {}
    for slot in slots:
        seen.setdefault(slot.device.host_id, slot.device.host)
    return list(seen.values())


class SimulatedProvisioner(Provisioner):
    """Simulates the fleet locally, from what the database says.

    It does NOT connect to any machine: no SSH, no containers or images
    pulled, no keys written to any ``authorized_keys``, no disks erased.
    Each step only reads the order, its booking and the fleet records and
    returns what a real provisioner would have done. The access it
    "delivers" is a made-up name under ``sim.anchorgpu.example`` that does
    not resolve. The order page says that access is simulated.
    """

    name = "simulated"
    DOMAIN = "sim.anchorgpu.example"
    USER = "anchor"
    BASE_PORT = 22000

    def allocate_devices(self, order) -> dict:
        """Read which cards the confirmed booking holds (nothing is reserved here:
        the booking already did that)."""
        slots = _slots(order)
        if not slots:
            raise ProvisioningError(f"booking #{order.booking_id} holds no devices")
        return {"devices": [s.device.uid for s in slots], "hosts": [h.name for h in _hosts(slots)],
                "simulated": True}

    def prepare_environment(self, order) -> dict:
        """Record the software image the customer chose (no image is pulled)."""
        env = order.environment
        return {"environment": env.slug, "image": env.image or env.slug, "simulated": True}

    def install_ssh_keys(self, order) -> dict:
        """Record the fingerprints of the order's keys (no key is written anywhere)."""
        fingerprints = list(order.ssh_keys.values_list("fingerprint", flat=True))
        if not fingerprints:
            raise ProvisioningError(f"order {order.reference} has no SSH key to install")
        return {"fingerprints": fingerprints, "user": self.USER, "simulated": True}

    def health_check(self, order) -> dict:
        """Check the records: the booking is a live confirmed one and every
        host of its cards is active. No card is actually tested."""
        booking: Booking | None = order.booking
        if booking is None:
            raise ProvisioningError(f"order {order.reference} has no booking")
        booking.refresh_from_db(fields=["kind", "state"])
        if booking.kind != Booking.Kind.CONFIRMED or booking.state != Booking.State.LIVE:
            raise ProvisioningError(f"booking #{booking.pk} is a {booking.kind} booking in state {booking.state}; "
                                    "a live confirmed booking is needed")
        slots = _slots(order)
        down = sorted({h.name for h in _hosts(slots) if h.status != Host.Status.ACTIVE})
        if down:
            raise ProvisioningError(f"host(s) not active: {', '.join(down)}")
        return {"devices": len(slots), "hosts_active": len(_hosts(slots)), "simulated": True}

    def deliver_access(self, order) -> dict:
        """Work out a login: the first host of the booking under the simulated
        domain, a port fixed by the order's id, user ``anchor``. Nothing listens there."""
        hosts = _hosts(_slots(order))
        if not hosts:
            raise ProvisioningError(f"booking #{order.booking_id} holds no devices")
        names = [f"{h.name}.{h.site.code}.{self.DOMAIN}" for h in hosts]
        return {"host": names[0], "port": self.BASE_PORT + order.pk % 10000, "user": self.USER,
                "hosts": names, "simulated": True}

    def wipe(self, order) -> dict:
        """Record which cards would be wiped. No disk is touched."""
        slots = _slots(order)
        return {"devices": [s.device.uid for s in slots], "simulated": True}

    def wipe_cards(self, order, device_ids) -> dict:
        """Record which cards a move left and would wipe. No disk is touched."""
        devices = list(Device.objects.filter(pk__in=list(device_ids)).select_related("host")
                       .order_by("host__name", "index"))
        if not devices:
            raise ProvisioningError(f"order {order.reference}: no card among {list(device_ids)} to wipe")
        return {"devices": [d.uid for d in devices], "hosts": sorted({d.host.name for d in devices}),
                "simulated": True}


def get_provisioner() -> Provisioner:
    """A fresh instance of the provisioner the settings name."""
    path = getattr(settings, "ANCHORGPU_PROVISIONER", "") or DEFAULT
    return import_string(path)()
