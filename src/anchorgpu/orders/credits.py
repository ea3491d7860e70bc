"""Service credits of an order, computed from its audit trail; the rule itself is ``billing.credit_rule``.

The time lost through the shop's fault is read from what the order's record already holds:

* **host faults**: each audit row ``host_fault`` on the order (written by ``orders.faults.host_mark_faulty``)
  names a ``fleet.HostFault``; the order lost the time from the fault's start until the fault was cleared, the
  order was moved to other cards (its first ``order_move`` row after the start), or now while neither happened;
* **moves**: each ``order_move`` row (``orders.moves``; its ``at`` is when it took effect) of an order whose
  access had been delivered, until access is delivered again on the new cards (the next ``provisioning_step``
  row of ``deliver_access``), or now while it is not;
* **late access**: the first delivery of access (the ``deliver_access`` step, ``ProvisioningStep``; after a move,
  which starts the steps again, the first ``provisioning_step`` row of it), against the term's start (or the
  payment, when that came later) plus the rule's grace; while access is not delivered, until now.

The paid parts of the term come from ``paid_segments``. What the rule gives, less what it credited before (the
order's service credit notes: ``billing.selectors.service_credited``), is issued by ``order_credit_issue`` as a
credit note against each part's invoice; the money is then owed back to the customer and paid through the refund
flow (``payments.services.owed_back`` counts it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from anchorgpu.audit.models import AuditEntry
from anchorgpu.audit.services import audit_record
from anchorgpu.billing import credit_rule as rule
from anchorgpu.billing.models import CreditNote, CustomerReason, Invoice
from anchorgpu.billing.selectors import invoice_open_amount, service_credited
from anchorgpu.billing.services import credit_note_issue
from anchorgpu.fleet.models import HostFault
from anchorgpu.payments.services import note_excess

from . import notify
from .extensions import paid_segments as extension_segments
from .models import Order, ProvisioningStep
from .provisioning import Step
from .states import OrderState
from .transitions import order_lock

S = OrderState
FAULT_ACTION = "host_fault"
MOVE_ACTION = "order_move"
STEP_ACTION = "provisioning_step"  # written by orders.fulfilment when a step finishes
CREDIT_ACTION = "service_credit"
# Orders that had (or should have had) their term: late access counts for them.
_HAD_A_TERM = frozenset({S.PAID, S.PROVISIONING, S.ACTIVE, S.COMPLETED, S.FAILED, S.REFUNDED})


def paid_segments(order: Order) -> list[tuple[datetime, datetime, Invoice | None]]:
    """The paid parts of the order's term, each [start, end) with the invoice that paid it: the term, then each
    applied extension (``extensions.paid_segments``)."""
    return extension_segments(order)


def _rows(order: Order, *actions: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(object_type=order._meta.label_lower, object_id=str(order.pk),
                                          action__in=actions).order_by("at", "id"))


def _when(row: AuditEntry, key: str) -> datetime:
    """The moment a row records in ``data[key]`` (ISO), else when it was written."""
    value = (row.data or {}).get(key)
    try:
        return datetime.fromisoformat(value) if value else row.at
    except (TypeError, ValueError):
        return row.at


@dataclass(frozen=True)
class _Record:
    faults: list[HostFault]
    moves: list[datetime]  # when each move took effect
    deliveries: list[datetime]  # each time access was delivered (again, after a move), in order


def _record(order: Order) -> _Record:
    rows = _rows(order, FAULT_ACTION, MOVE_ACTION, STEP_ACTION)
    fault_ids = [r.data.get("fault") for r in rows if r.action == FAULT_ACTION]
    faults = list(HostFault.objects.filter(pk__in=[f for f in fault_ids if f]).order_by("started_at", "pk"))
    moves = sorted(_when(r, "at") for r in rows if r.action == MOVE_ACTION)
    current = (ProvisioningStep.objects.filter(order=order, step=Step.DELIVER_ACCESS.value)
               .values_list("finished_at", flat=True).first())
    if not moves:  # the step row is the record of the one delivery
        deliveries = [current] if current is not None else []
    else:  # a move starts access preparation again: each delivery is in the audit trail
        deliveries = sorted({_when(r, "finished_at") for r in rows if r.action == STEP_ACTION
                             and r.data.get("step") == Step.DELIVER_ACCESS.value} | ({current} if current else set()))
    return _Record(faults, moves, deliveries)


def lost_intervals(order: Order, *, now: datetime) -> list[rule.Lost]:
    """Every interval the order lost through the shop's fault, as its record shows them (not joined)."""
    record = _record(order)
    lost: list[rule.Lost] = []
    for fault in record.faults:
        ends = [fault.cleared_at or now] + [m for m in record.moves if m > fault.started_at]
        lost.append(rule.Lost(fault.started_at, min(ends), rule.FAULT))
    for moved in record.moves:
        if not any(d <= moved for d in record.deliveries):
            continue  # access was not delivered yet: the wait is late access, below
        back = next((d for d in record.deliveries if d > moved), None)
        lost.append(rule.Lost(moved, back or now, rule.MOVE))
    if order.order_state in _HAD_A_TERM:
        first = record.deliveries[0] if record.deliveries else None
        if first is not None or order.order_state in (S.PAID, S.PROVISIONING):
            clock = max(order.starts_at, order.paid_at or order.starts_at)
            late = rule.late_access(clock, first, now=now)
            if late is not None:
                lost.append(late)
    return lost


@dataclass(frozen=True)
class PartDue:
    part: rule.SegmentCredit
    invoice: Invoice
    credited: Decimal  # by the rule before
    open_amount: Decimal  # what the invoice still holds (its total less every credit note)
    due: Decimal  # to credit now


@dataclass(frozen=True)
class OrderCredit:
    lost: tuple[rule.Lost, ...]
    credit: rule.Credit
    parts: tuple[PartDue, ...]

    @property
    def due(self) -> Decimal:
        return sum((p.due for p in self.parts), Decimal(0))

    @property
    def owed(self) -> Decimal:
        return self.credit.total

    @property
    def credited(self) -> Decimal:
        return sum((p.credited for p in self.parts), Decimal(0))


def order_credit(order: Order, *, now: datetime | None = None) -> OrderCredit:
    """What the rule gives the order now, what it credited before, and what is due (a read)."""
    now = now or timezone.now()
    segments = [rule.Segment(start, end, invoice.total, key=invoice) for start, end, invoice in paid_segments(order)
                if invoice is not None]  # a part not invoiced yet has paid nothing to credit
    lost = lost_intervals(order, now=now)
    currency = segments[0].key.currency if segments else order.currency
    credit = rule.credit(segments, lost, currency=currency)
    parts = []
    for part in credit.parts:
        invoice = part.segment.key
        credited = service_credited(invoice)
        open_amount = invoice_open_amount(invoice)
        parts.append(PartDue(part, invoice, credited, open_amount,
                             rule.due(part.amount, credited=credited, open_amount=open_amount)))
    return OrderCredit(tuple(lost), credit, tuple(parts))


def _duration(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    bits = ([_("%(n)d d") % {"n": days}] if days else []) + ([_("%(n)d h") % {"n": hours}] if hours else [])
    return " ".join(bits + [_("%(n)d min") % {"n": mins}])


def _cause_label(cause: str) -> str:
    return {rule.FAULT: _("host fault"), rule.MOVE: _("move to other cards"),
            rule.LATE_ACCESS: _("late access")}[cause]


def breakdown(computed: OrderCredit) -> str:
    """The credit in words for the customer (in the active language): what was lost, between when, the rule."""
    causes = ", ".join(_cause_label(c) for c in rule.CAUSES if any(lost.cause == c for lost in computed.lost))
    shown = computed.credit.intervals[:3]  # the note holds 300 characters: the first three, and how many more
    spans = "; ".join(f"{s.astimezone(UTC):%Y-%m-%d %H:%M}–{e.astimezone(UTC):%Y-%m-%d %H:%M} UTC" for s, e in shown)
    if len(computed.credit.intervals) > len(shown):
        spans += " " + _("(and %(n)d more)") % {"n": len(computed.credit.intervals) - len(shown)}
    return (_("%(lost)s lost (%(causes)s): %(spans)s. Credited at %(multiplier)d× the price of the time lost, "
              "up to the price paid.")
            % {"lost": _duration(computed.credit.lost), "causes": causes, "spans": spans,
               "multiplier": rule.MULTIPLIER})


def order_credit_issue(*, order: Order, actor: str, now: datetime | None = None) -> list[CreditNote]:
    """Issue what the rule owes the order and has not credited yet: one credit note per paid part with
    something due, against that part's invoice; nothing when nothing is due (a second call issues nothing).
    The credited money is owed back to the customer (``payments.services.owed_back``), and the operators told."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = order_lock(order)
        computed = order_credit(locked, now=now)
        due = [p for p in computed.parts if p.due > 0]
        if not due:
            return []
        with translation.override(locked.language):
            words = breakdown(computed)[:300]
        intervals = [[s.isoformat(), e.isoformat()] for s, e in computed.credit.intervals]
        reason = (f"Service credit (rule: {rule.MULTIPLIER}x the price of the time lost, grace "
                  f"{rule.published()['grace_minutes']} min): lost {computed.credit.lost} in {intervals}")
        notes = [credit_note_issue(invoice=p.invoice, amount=p.due, reason=reason, actor=actor,
                                   customer_reason=CustomerReason.FAULT, customer_reason_text=words, now=now)
                 for p in due]
        notify.service_credit(locked.pk, notes=[n.number for n in notes])
        audit_record(actor=actor, action=CREDIT_ACTION, obj=locked, reason=reason,
                     data={"intervals": intervals, "causes": sorted({lost.cause for lost in computed.lost}),
                           "lost_seconds": computed.credit.lost.total_seconds(), "owed": str(computed.owed),
                           "credited_before": str(computed.credited),
                           "notes": [{"number": n.number, "invoice": n.invoice.number, "amount": str(n.amount)}
                                     for n in notes]})
        why = (f"A service credit of {sum(n.amount for n in notes)} {notes[0].currency} was issued "
               f"({', '.join(n.number for n in notes)}): pay it back to the customer's refund address (a refund of "
               "money owed back).")
        note_excess(locked, actor, why=why, service_credit=True)
        for payer in sorted({n.invoice.order_id for n in notes} - {locked.pk}):  # an extension paid by its own order
            note_excess(order_lock(payer), actor, why=why, service_credit=True)
    return notes


def intervals_closed(order: Order, *, now: datetime) -> bool:
    """True when every lost interval of the order has ended before ``now`` (nothing more will be lost): the
    worker credits an order once this holds, so a credit note is not issued for every sweep of a running fault."""
    if order.ends_at <= now:
        return True
    record = _record(order)
    for fault in record.faults:
        if fault.cleared_at is None and not any(m > fault.started_at for m in record.moves):
            return False
    if record.moves and not any(d > record.moves[-1] for d in record.deliveries):
        return False  # moved, and access not ready again on the new cards yet
    if order.order_state in (S.PAID, S.PROVISIONING) and not record.deliveries:
        return False
    return True
