"""A host that failed under paid terms: the operator marks it faulty, later clears the fault, and the orders it
hit are credited by the service credit rule (``orders.credits``) without anyone doing the arithmetic.

Marking takes the host off sale (its ``sale_block`` starts with ``HostFault.FAULT_PREFIX``; only the fault's own
clear lifts it, putting back any block the host had before), records when the fault started, writes an audit
row ``host_fault`` on each order it hits (paid, preparing access or active, with a card on the host in the
fault's time; for a fault recorded as starting earlier, also the terms that completed or failed since) and
raises one operator event listing them. Clearing closes the fault's lost interval and credits those orders at
once; the worker's sweep (``fault_credits_due``) credits an order whose term ended, or that was
moved, while the fault was still open, and settles the fault once every order it hit is credited. A late delivery
of access is credited by the sweep ``late_access_credits_due``.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation.models import Booking, BookingDevice
from anchorgpu.audit.services import SYSTEM, audit_record
from anchorgpu.billing import credit_rule
from anchorgpu.fleet.models import Device, Host, HostFault

from . import operator_events
from .credits import FAULT_ACTION, intervals_closed, order_credit_issue
from .errors import InvalidOrder, NotAllowedNow
from .models import OperatorEvent, Order, ProvisioningStep
from .moves import move_offer
from .provisioning import Step
from .states import OrderState

log = logging.getLogger(__name__)
S = OrderState
HIT_STATES = (S.PAID, S.PROVISIONING, S.ACTIVE)
ENDED_STATES = (S.COMPLETED, S.FAILED)  # hit too when the fault started before they ended
PREFIX = HostFault.FAULT_PREFIX


def _reason(reason: str) -> str:
    reason = " ".join((reason or "").split())
    if not reason:
        raise InvalidOrder(_("Say what is wrong (or how it was fixed): the reason is recorded."), code="reason")
    return reason


def orders_hit(host: Host, *, since: datetime) -> list[Order]:
    """Orders paid, preparing access or active whose cards on ``host`` are booked at or after ``since``; for a
    fault recorded as starting in the past, also those that completed or failed on it since then."""
    bookings = (BookingDevice.objects.filter(device__host=host, ends_at__gt=since,
                                             booking__kind=Booking.Kind.CONFIRMED)
                .values_list("booking_id", flat=True))
    return list(Order.objects.filter(booking_id__in=set(bookings), ends_at__gt=since,
                                     state__in=[s.value for s in HIT_STATES + ENDED_STATES])
                .order_by("starts_at", "pk"))


def fault_move_offers(orders, *, now: datetime) -> dict[int, str]:
    """For each order a fault hits, where the shop would move its term now (``moves.move_offer``), in the
    operators' words: the proposed cards, or why there is no move (no other cards free, the term is over)."""
    offers = {}
    for order in orders:
        if order.order_state not in HIT_STATES:
            offers[order.pk] = "ended, nothing to move"
            continue
        offer = move_offer(order=order, now=now)
        if offer.possible:
            cards = ", ".join(Device.objects.filter(pk__in=offer.to_devices).order_by("host__name", "index")
                              .values_list("uid", flat=True))
            offers[order.pk] = f"move proposed to {cards} from {offer.at:%Y-%m-%d %H:%M} UTC"
        else:
            offers[order.pk] = f"no move: {offer.reason}"
    return offers


def host_mark_faulty(*, host: Host, actor: str, reason: str, at: datetime | None = None,
                     now: datetime | None = None) -> HostFault:
    """Mark ``host`` faulty since ``at`` (default now; never in the future): off sale, the orders it hits told and
    listed for the operators."""
    reason = _reason(reason)
    now = now or timezone.now()
    at = at or now
    if at > now:
        raise InvalidOrder(_("A fault cannot start in the future."), code="fault_future")
    with transaction.atomic():
        locked = Host.objects.select_for_update().get(pk=host.pk)
        if HostFault.objects.filter(host=locked, cleared_at__isnull=True).exists():
            raise NotAllowedNow(_("This host is already marked faulty; clear that fault first."), code="fault_open")
        hit = orders_hit(locked, since=at)
        previous = "" if locked.sale_block.startswith(PREFIX) else locked.sale_block
        try:
            with transaction.atomic():
                fault = HostFault.objects.create(host=locked, started_at=at, marked_at=now, marked_by=actor,
                                                 reason=reason, orders=[o.pk for o in hit], previous_block=previous)
        except IntegrityError:  # another operator marked it at the same moment
            raise NotAllowedNow(_("This host is already marked faulty; clear that fault first."),
                                code="fault_open") from None
        locked.sale_block = f"{PREFIX}{reason}"[:500]
        locked.save(update_fields=["sale_block"])
        audit_record(actor=actor, action="host_mark_faulty", obj=locked, reason=reason,
                     data={"fault": fault.pk, "started_at": at.isoformat(), "orders": [o.reference for o in hit],
                           "previous_block": previous})
        for order in hit:
            audit_record(actor=actor, action=FAULT_ACTION, obj=order, reason=reason,
                         data={"fault": fault.pk, "host": locked.name, "started_at": at.isoformat()})
        offers = fault_move_offers(hit, now=now)  # the host is off sale already: never its own target
        listed = ", ".join(f"{o.reference} ({o.state}, until {o.ends_at:%Y-%m-%d %H:%M} UTC; {offers[o.pk]})"
                           for o in hit)
        text = (f"Host {locked.name} was marked faulty by {actor} since {at:%Y-%m-%d %H:%M:%S} UTC: {reason}. "
                f"It is off sale until the fault is cleared. "
                + (f"Orders hit ({len(hit)}): {listed}. Move them to other cards (the order's Move to other "
                   "cards, or the fault's page), or clear the fault once fixed; their service credit is issued "
                   "when the fault is cleared, they are moved, or their term ends."
                   if hit else "No paid term is on it."))
        operator_events.operator_event_raise(
            order=None, host=locked, kind=OperatorEvent.Kind.HOST_REFUSED, key=f"fault:{fault.pk}", text=text,
            now=now, data={"fault": {"id": fault.pk, "started_at": at.isoformat(), "reason": reason,
                                     "orders": [o.reference for o in hit],
                                     "move_offers": {o.reference: offers[o.pk] for o in hit}}})
    host.sale_block = locked.sale_block
    return fault


def host_fault_clear(*, fault: HostFault, actor: str, reason: str, at: datetime | None = None,
                     now: datetime | None = None) -> HostFault:
    """The fault is fixed (since ``at``, default now): the host is back on sale (unless something else blocks
    it) and the orders it hit are credited."""
    reason = _reason(reason)
    now = now or timezone.now()
    at = at or now
    with transaction.atomic():
        locked = HostFault.objects.select_for_update().select_related("host").get(pk=fault.pk)
        if locked.cleared_at is not None:
            raise NotAllowedNow(_("This fault was already cleared."), code="fault_cleared")
        if at < locked.started_at or at > now:
            raise InvalidOrder(_("A fault is cleared after it started and not in the future."), code="fault_time")
        host = Host.objects.select_for_update().get(pk=locked.host_id)
        locked.cleared_at, locked.cleared_by, locked.clear_reason = at, actor, reason
        locked.save(update_fields=["cleared_at", "cleared_by", "clear_reason"])
        if host.sale_block.startswith(PREFIX):  # its own block only; another cause keeps the host off sale
            host.sale_block = locked.previous_block
            host.save(update_fields=["sale_block"])
        audit_record(actor=actor, action="host_fault_clear", obj=host, reason=reason,
                     data={"fault": locked.pk, "cleared_at": at.isoformat(), "sale_block": host.sale_block})
    fault.cleared_at = locked.cleared_at
    fault_credit(fault=locked, actor=actor, now=now)
    return locked


def fault_credit(*, fault: HostFault, actor: str, now: datetime | None = None) -> int:
    """Credit each order the fault hit whose lost time has ended (one transaction each); the fault is settled
    once all are. Returns the number of credit notes issued."""
    now = now or timezone.now()
    issued = 0
    waiting = False
    for order in Order.objects.filter(pk__in=fault.orders or []).order_by("pk"):
        if not intervals_closed(order, now=now):
            waiting = True
            continue
        try:
            issued += len(order_credit_issue(order=order, actor=actor, now=now))
        except Exception:  # noqa: BLE001 - one order's failure must not stop the others' credits
            log.exception("service credit of order %s (fault %s) failed", order.reference, fault.pk)
            waiting = True
    if fault.cleared_at is not None and not waiting:
        HostFault.objects.filter(pk=fault.pk, settled_at__isnull=True).update(settled_at=now)
    return issued


def fault_credits_due(*, now: datetime | None = None, limit: int = 20) -> int:
    """The worker's sweep: faults not settled yet, oldest first, a bounded batch; each order credited in its own
    transaction (``order_credit_issue`` is idempotent: an order credited before gets only what grew since)."""
    now = now or timezone.now()
    done = 0
    for fault in HostFault.objects.filter(settled_at__isnull=True).order_by("started_at", "pk")[:limit]:
        done += fault_credit(fault=fault, actor=SYSTEM, now=now)
    return done


def late_access_credits_due(*, now: datetime | None = None, window: timedelta = timedelta(days=2),
                            limit: int = 50) -> int:
    """The worker's sweep: orders whose access was delivered later than the rule's grace in the last ``window``
    get their credit (an order credited before gets nothing again)."""
    now = now or timezone.now()
    late = (ProvisioningStep.objects.filter(step=Step.DELIVER_ACCESS.value, finished_at__gte=now - window,
                                            finished_at__gt=F("order__starts_at") + credit_rule.LATE_ACCESS_GRACE)
            .values_list("order_id", flat=True).order_by("finished_at")[:limit])
    done = 0
    for order in Order.objects.filter(pk__in=list(late)):
        try:
            done += len(order_credit_issue(order=order, actor=SYSTEM, now=now))
        except Exception:  # noqa: BLE001
            log.exception("late-access credit of order %s failed", order.reference)
    return done
