"""A host's maintenance window and the terms it hits (issue 25): each hit is offered a move, and a window that
cannot be honoured for a term says so.

``maintenance_enter`` books the window (``allocation.services.host_enter_maintenance``: the parts the hit
terms leave free) and, in the same transaction, raises an operator event for every hit term that no other
cards are free for. ``maintenance_hits`` lists the hits with the shop's proposal; ``maintenance_move`` moves
one (``moves.order_move``, or ``booking_move`` for a booking of no order), and the move gives the freed part of
the window to the maintenance booking.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ObjectDoesNotExist
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation import selectors
from anchorgpu.allocation import services as allocation
from anchorgpu.allocation.errors import AllocationError, InvalidRequest
from anchorgpu.allocation.models import Booking
from anchorgpu.allocation.moves import MoveProposal, booking_move, move_proposal
from anchorgpu.allocation.periods import Period
from anchorgpu.allocation.services import MaintenanceResult
from anchorgpu.fleet.models import Host

from . import operator_events
from .errors import OrderError
from .models import OperatorEvent, Order
from .moves import order_move
from .transitions import order_lock


@dataclass(frozen=True)
class MaintenanceHit:
    booking: Booking
    order: Order | None
    proposal: MoveProposal

    @property
    def text(self) -> str:
        """For the operator: the proposal, or that the window cannot be honoured for this booking."""
        if self.proposal.possible:
            return ""
        return _("No other cards are free for this term: the window cannot be honoured for this booking. %(why)s"
                 ) % {"why": self.proposal.reason}


def _order_of(booking: Booking) -> Order | None:
    try:
        return booking.order
    except ObjectDoesNotExist:
        return None


def maintenance_hits(*, window: Booking, now: datetime | None = None) -> list[MaintenanceHit]:
    """The live holds and terms on the window's host inside what is left of it, each with the shop's proposal."""
    now = now or timezone.now()
    if window.kind != Booking.Kind.MAINTENANCE or window.state != Booking.State.LIVE or window.host_id is None:
        return []
    if window.ends_at <= now:
        return []
    span = Period(max(window.starts_at, now), window.ends_at)
    devices = list(window.host.devices.values_list("id", flat=True))
    hits: dict[int, Booking] = {}
    for slot in selectors.live_slots_overlapping(devices, span, now=now):
        if slot.booking.kind != Booking.Kind.MAINTENANCE:
            hits[slot.booking_id] = slot.booking
    found = []
    for booking in sorted(hits.values(), key=lambda b: (b.starts_at, b.pk)):
        found.append(MaintenanceHit(booking, _order_of(booking), move_proposal(booking, now=now)))
    return found


def _not_honoured(window: Booking, hit: MaintenanceHit) -> None:
    order = order_lock(hit.order)
    operator_events.operator_event_raise(
        order=order, kind=OperatorEvent.Kind.MAINTENANCE_CONFLICT, key=f"window:{window.pk}",
        text=f"The maintenance window of host {window.host.name} from {window.starts_at:%Y-%m-%d %H:%M} to "
             f"{window.ends_at:%Y-%m-%d %H:%M} UTC cannot be honoured for this term: {hit.proposal.reason} The "
             f"window stays cut around the term; move it by hand when cards free up, or shorten the window.",
        data={"window": window.pk, "host": window.host.name, "booking": hit.booking.pk})


def maintenance_enter(*, host: Host, start: datetime, end: datetime, actor: str, reason: str,
                      now: datetime | None = None) -> tuple[MaintenanceResult, list[MaintenanceHit]]:
    """Book the window and list the terms it hits with their proposed moves, in one transaction; the terms no
    other cards are free for are told to the operators (an ``order.maintenance_conflict`` event each)."""
    now = now or timezone.now()
    with transaction.atomic():
        result = allocation.host_enter_maintenance(host=host, start=start, end=end, actor=actor, reason=reason, now=now)
        hits = maintenance_hits(window=result.booking, now=now)
        for hit in hits:
            if not hit.proposal.possible and hit.order is not None:
                _not_honoured(result.booking, hit)
    return result, hits


def maintenance_move(*, window: Booking, booking: Booking, devices=None, actor: str, reason: str = "",
                     now: datetime | None = None):
    """Move one booking ``window`` hits (its order's term through ``order_move``), to ``devices`` or the shop's
    proposal; the window then gets the part the move freed. Returns the ``Move`` (or ``Moved`` for a booking
    of no order)."""
    window = Booking.objects.select_related("host").get(pk=window.pk)
    if window.kind != Booking.Kind.MAINTENANCE or window.host_id is None:
        raise InvalidRequest(_("Booking #%(id)s is not a maintenance window.") % {"id": window.pk})
    why = (reason or "").strip() or (f"maintenance of host {window.host.name} from {window.starts_at:%Y-%m-%d %H:%M} "
                                     f"to {window.ends_at:%Y-%m-%d %H:%M} UTC")
    order = _order_of(booking)
    if order is None:
        return booking_move(booking=booking, devices=devices, actor=actor, reason=why, now=now)
    return order_move(order=order, devices=devices, actor=actor, reason=why, now=now)


@dataclass(frozen=True)
class MoveOutcome:
    booking: Booking
    moved: object | None  # a Move (or Moved), or None
    error: str = ""


def maintenance_move_all(*, window: Booking, actor: str, reason: str = "",
                         now: datetime | None = None) -> list[MoveOutcome]:
    """Move every booking the window hits to the shop's proposal, one transaction each; a booking that cannot be
    moved keeps its cards and says why."""
    outcomes = []
    for hit in maintenance_hits(window=window, now=now):
        try:
            moved = maintenance_move(window=window, booking=hit.booking, actor=actor, reason=reason, now=now)
        except (OrderError, AllocationError) as exc:
            outcomes.append(MoveOutcome(hit.booking, None, str(exc)))
        else:
            outcomes.append(MoveOutcome(hit.booking, moved))
    return outcomes
