"""Moving a live term to other cards of the same product (issue 25): the shop's proposal, and the move.

A booking's slots each carry their own period. A move at ``at`` (now, or the booking's start if that is later)
ends the slots of the cards it leaves at ``at`` and gives the booking slots ``[at, end)`` on the new cards; a term
that has not started yet simply changes cards. The slots that run to the booking's end are its cards
(``selectors.current_slots``); the trimmed ones stay as history.

The move runs in the product's turn (``services._take_turn``), in one transaction, and checks the new cards
with the same availability read as a new order (``selectors.units_free``); the exclusion constraint (triggers on
SQLite) is the backstop, and a conflict is refused with ``NoLongerAvailable``. A maintenance window of the cards
left behind gets their freed part at once, so the window is honoured for them.

The proposal follows the placement policy (``placement.place``): same product, free for the whole rest of the
term, hosts active, on sale and not in maintenance; one host for a multi-card order when one has room, else the
fewest hosts; lots as whole NVLink pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.audit.services import audit_record
from anchorgpu.fleet.models import Device, Host

from . import placement, selectors
from .errors import BookingOfLiveOrder, InvalidBookingState, InvalidRequest, NoLongerAvailable
from .models import Booking, BookingDevice
from .periods import Period
from .services import _expire_stale_holds, _order_counting_on, _retrying, _take_turn
from .units import Unit

MOVABLE_KINDS = (Booking.Kind.HOLD, Booking.Kind.CONFIRMED)


@dataclass(frozen=True)
class MoveProposal:
    """Where the shop would move a booking from ``at`` to ``end``: ``to_devices`` (ids), or None with ``reason``."""

    booking_id: int
    at: datetime
    end: datetime
    from_devices: tuple[int, ...]
    to_devices: tuple[int, ...] | None
    reason: str = ""

    @property
    def possible(self) -> bool:
        return self.to_devices is not None


@dataclass(frozen=True)
class Moved:
    booking: Booking
    at: datetime
    from_devices: tuple[int, ...]
    to_devices: tuple[int, ...]
    swapped: bool  # the term had not started: the old slots were replaced, not trimmed
    windows_filled: tuple[int, ...]  # maintenance bookings that got the freed part of their window


def _moment(booking: Booking, now: datetime) -> datetime:
    return max(now.replace(microsecond=0), booking.starts_at)


def _problem(booking: Booking, at: datetime, now: datetime) -> str:
    if booking.state != Booking.State.LIVE or booking.kind not in MOVABLE_KINDS:
        return _("Booking #%(id)s is a %(kind)s booking in state “%(state)s”; only a live term or hold can be "
                 "moved.") % {"id": booking.pk, "kind": booking.kind, "state": booking.state}
    if booking.kind == Booking.Kind.HOLD and booking.expires_at is not None and booking.expires_at <= now:
        return _("Hold #%(id)s has expired; there is nothing to move.") % {"id": booking.pk}
    if at >= booking.ends_at:
        return _("Booking #%(id)s has ended; there is nothing left to move.") % {"id": booking.pk}
    if booking.product_id is None:
        return _("Booking #%(id)s has no product; it cannot be moved.") % {"id": booking.pk}
    return ""


def _none_free(booking: Booking, at: datetime, free: int) -> str:
    return _("No other cards are free for this term: %(free)d of the %(wanted)d unit(s) of %(product)s it needs "
             "are free from %(start)s to %(end)s UTC on hosts that are on sale and not in maintenance.") % {
        "free": free, "wanted": booking.quantity, "product": booking.product.name,
        "start": f"{at:%Y-%m-%d %H:%M}", "end": f"{booking.ends_at:%Y-%m-%d %H:%M}"}


def _current_devices(booking: Booking) -> tuple[int, ...]:
    return tuple(sorted(selectors.current_slots(booking.pk).values_list("device_id", flat=True)))


def move_proposal(booking: Booking, *, now: datetime | None = None) -> MoveProposal:
    """The best fit for ``booking`` on other cards from now (or its start) to its end, or None and why. A read:
    the move itself checks again, in the product's turn."""
    now = now or timezone.now()
    at = _moment(booking, now)
    current = _current_devices(booking)
    problem = _problem(booking, at, now)
    if problem:
        return MoveProposal(booking.pk, at, booking.ends_at, current, None, problem)
    free = selectors.units_free(booking.product, Period(at, booking.ends_at), now=now)
    try:
        chosen = placement.place(free, booking.quantity)
    except placement.NotEnoughUnits as exc:
        return MoveProposal(booking.pk, at, booking.ends_at, current, None, _none_free(booking, at, exc.free))
    return MoveProposal(booking.pk, at, booking.ends_at, current,
                        tuple(sorted(d for unit in chosen for d in unit.devices)))


def _picked(booking: Booking, device_ids, free: list[Unit], at: datetime) -> list[int]:
    """The operator's cards, checked: the product's, as many as the booking holds, whole units, each free."""
    ids = sorted(set(int(d) for d in device_ids))
    product = booking.product
    wanted = booking.quantity * product.cards_per_unit
    if len(ids) != wanted:
        raise InvalidRequest(_("Pick %(wanted)d card(s) for this booking; %(got)d were given.")
                             % {"wanted": wanted, "got": len(ids)})
    devices = {d.pk: d for d in Device.objects.filter(pk__in=ids).select_related("host")}
    unknown = [i for i in ids if i not in devices or devices[i].host.product_id != product.pk]
    if unknown:
        raise InvalidRequest(_("Card(s) %(ids)s are not %(product)s cards.")
                             % {"ids": ", ".join(map(str, unknown)), "product": product.name})
    unit_of = {d: unit for unit in free for d in unit.devices}
    for i in ids:
        device = devices[i]
        if i not in unit_of:
            host = device.host
            if host.status != Host.Status.ACTIVE or host.sale_block:
                why = _("its host %(host)s is not on sale") % {"host": host.name}
            else:
                why = _("it is booked, or its host %(host)s is in maintenance, for part of that time") % {
                    "host": host.name}
            raise NoLongerAvailable(_("Card %(card)s is not free from %(start)s to %(end)s UTC: %(why)s. Pick "
                                      "other cards, or take the shop's proposal.") % {
                "card": device.uid, "start": f"{at:%Y-%m-%d %H:%M}", "end": f"{booking.ends_at:%Y-%m-%d %H:%M}",
                "why": why})
        missing = [d for d in unit_of[i].devices if d not in ids]
        if missing:
            raise InvalidRequest(_("A unit of %(product)s is an NVLink pair on one host: pick both cards of the "
                                   "pair of %(card)s.") % {"product": product.name, "card": device.uid})
    return ids


def _fill_windows(device_ids, *, start: datetime, end: datetime, now: datetime) -> tuple[int, ...]:
    """The maintenance windows of these cards' hosts get the part of ``[start, end)`` (``start``: the move, not
    before now) the cards are free in."""
    hosts = set(Device.objects.filter(pk__in=device_ids).values_list("host_id", flat=True))
    windows = Booking.objects.filter(kind=Booking.Kind.MAINTENANCE, state=Booking.State.LIVE, host_id__in=hosts,
                                     starts_at__lt=end, ends_at__gt=start)
    filled = []
    for window in windows:
        span = Period(window.starts_at, window.ends_at).intersection(Period(start, end))
        if span is None:
            continue
        mine = list(Device.objects.filter(pk__in=device_ids, host_id=window.host_id).values_list("id", flat=True))
        busy: dict[int, list[Period]] = {d: [] for d in mine}
        for slot in selectors.live_slots_overlapping(mine, span, now=now):
            busy[slot.device_id].append(Period(slot.starts_at, slot.ends_at))
        rows = [BookingDevice(booking=window, device_id=d, starts_at=piece.start, ends_at=piece.end)
                for d in sorted(mine) for piece in span.minus(busy[d])]
        if rows:
            BookingDevice.objects.bulk_create(rows)
            filled.append(window.pk)
    return tuple(filled)


def booking_move(*, booking: Booking, devices=None, actor: str, reason: str, now: datetime | None = None,
                 for_order: bool = False) -> Moved:
    """Give ``booking`` other cards of its product from now (or its start) to its end, in one transaction: the
    operator's ``devices`` (ids), or the shop's best fit when None. The cards left behind keep their slots up to
    the move (none, for a term not started) and their hosts' maintenance windows get the rest.

    The booking of an order that counts on it is moved only by the order service (``orders.moves.order_move``,
    ``for_order=True``), which moves the order's access with it (DESIGN §4)."""
    now = now or timezone.now()
    if not (reason or "").strip():
        raise InvalidRequest(_("Say why the booking is moved."))

    def attempt(retry: bool) -> Moved:
        _take_turn(booking.product_id)
        if retry:
            _expire_stale_holds(now)
        locked = Booking.objects.select_for_update(of=("self",)).select_related("product").get(pk=booking.pk)
        at = _moment(locked, now)
        problem = _problem(locked, at, now)
        if problem:
            raise InvalidBookingState(problem)
        order = None if for_order else _order_counting_on(locked)
        if order is not None:
            raise BookingOfLiveOrder(_("Booking #%(id)s holds the cards of order %(ref)s: move the order (its admin "
                                       "page, or the maintenance window's page), so its access moves with it.")
                                     % {"id": locked.pk, "ref": order.reference})
        old = list(selectors.current_slots(locked.pk))
        free = selectors.units_free(locked.product, Period(at, locked.ends_at), now=now)
        if devices is None:
            try:
                chosen = placement.place(free, locked.quantity)
            except placement.NotEnoughUnits as exc:
                raise NoLongerAvailable(_none_free(locked, at, exc.free)) from None
            to_ids = sorted(d for unit in chosen for d in unit.devices)
        else:
            to_ids = _picked(locked, devices, free, at)
        from_ids = sorted(slot.device_id for slot in old)
        for slot in old:
            if slot.starts_at >= at:
                slot.delete()
            else:
                slot.ends_at = at
                slot.save(update_fields=["ends_at"])
        BookingDevice.objects.bulk_create([
            BookingDevice(booking=locked, device_id=d, starts_at=at, ends_at=locked.ends_at,
                          expires_at=locked.expires_at) for d in to_ids])
        filled = _fill_windows(from_ids, start=at, end=locked.ends_at, now=now)
        swapped = all(slot.starts_at >= at for slot in old)
        audit_record(actor=actor, action="booking_move", obj=locked, reason=reason,
                     data={"at": at.isoformat(), "end": locked.ends_at.isoformat(), "from": from_ids, "to": to_ids,
                           "swapped": swapped, "windows_filled": list(filled)})
        return Moved(locked, at, tuple(from_ids), tuple(to_ids), swapped, filled)

    return _retrying(attempt)
