"""The order page's timeline: what happened to an order, in the customer's
words, from the audit trail (every state change is there) and the
provisioning steps. Operators' internal reasons are not shown."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from anchorgpu.audit.models import AuditEntry
from anchorgpu.formats.display import crypto, moment
from anchorgpu.orders import rules
from anchorgpu.orders.models import STATE_LABELS, STEP_LABELS, Order
from anchorgpu.orders.provisioning import Step
from anchorgpu.orders.states import OrderState


@dataclass(frozen=True)
class Event:
    at: datetime
    text: str
    kind: str  # "state", "payment", "step", "document", "info"


def _text(entry: AuditEntry, order: Order, state: OrderState | None = None) -> tuple[str, str] | None:
    """``state``: the order's state when the entry was written (the last state change before it)."""
    data = entry.data or {}
    asset = order.quote.asset if hasattr(order, "quote") else None
    decimals, places = (asset.decimals, asset.quoted_places) if asset else (0, 0)
    symbol = asset.symbol if asset else ""

    def coins(key: str) -> str:  # exact, in the reader's language, at the asset's quoted precision
        return crypto(int(data.get(key, 0)), decimals, places)

    def refund_coins() -> str:  # a refund is in the base units of the network it was sent on (its audit data)
        return crypto(int(data.get("amount", 0)), int(data.get("decimals", decimals)),
                      int(data.get("places", places)))

    # Network names are the operator's words, translated like the catalog's (``gettext_noop`` in the demo).
    named = data.get("network") or (asset.network_name if asset else "")
    network = _(named) if named else ""  # never gettext(""): that is the catalog's header

    match entry.action:
        case "order_place":
            return "info", _("Order placed; the cards are held for you while the quote runs.")
        case "quote_create":
            return "payment", _("Quote issued: %(amount)s %(symbol)s at a locked rate.") % {
                "amount": coins("amount"), "symbol": symbol}
        case "order_state" if data.get("customer_reason"):  # a claim marked invalid: what the operator told them
            return "state", _("Status: %(state)s. We could not accept the payment you told us about: %(reason)s") % {
                "state": STATE_LABELS[OrderState(entry.to_state)], "reason": data["customer_reason"]}
        case "order_state" if entry.to_state == OrderState.COMPLETED.value and data.get("extends"):
            return "state", _("Status: added to order %(reference)s.") % {"reference": data["extends"]}
        case "order_state":
            return "state", _("Status: %(state)s.") % {"state": STATE_LABELS[OrderState(entry.to_state)]}
        case "payment_claim_txid":
            return "payment", _("Transaction id added to your payment notice.")
        case "transfer_record":
            confirmations = int(data.get("confirmations", 0))
            return "payment", ngettext("Transfer received: %(amount)s %(symbol)s, %(confirmations)d confirmation.",
                                       "Transfer received: %(amount)s %(symbol)s, %(confirmations)d confirmations.",
                                       confirmations) % {
                "amount": coins("amount"), "symbol": symbol,
                "confirmations": confirmations}
        case "transfer_confirmations":
            confirmations = int(data.get("confirmations", 0))
            return "payment", ngettext("Transfer now has %(confirmations)d confirmation.",
                                       "Transfer now has %(confirmations)d confirmations.", confirmations) % {
                "confirmations": confirmations}
        case "payment_overpaid" if data.get("service_credit"):
            return "payment", _("%(amount)s %(symbol)s is owed back to you for a service credit.") % {
                "amount": coins("excess_units"), "symbol": symbol}
        case "payment_overpaid" if state is OrderState.PAID_LATE:
            # Late, and the cards are gone: nothing is kept, the whole payment goes back.
            return "payment", _("Your payment of %(amount)s %(symbol)s arrived after the quote expired, when the "
                                "cards were no longer free: all of it will be refunded to you.") % {
                "amount": coins("excess_units"), "symbol": symbol}
        case "payment_overpaid" if state is not None and not rules.keeps_payment(state):
            return "payment", _("%(amount)s %(symbol)s arrived after the order had ended: it will be refunded to "
                                "you.") % {"amount": coins("excess_units"), "symbol": symbol}
        case "payment_overpaid":
            return "payment", _("More than the quote arrived: %(amount)s %(symbol)s is owed back to you.") % {
                "amount": coins("excess_units"), "symbol": symbol}
        case "capacity_gone":
            return "info", _("The cards were taken after the quote expired; your payment will be refunded. "
                             "Give a refund address below.")
        case "order_rebook":
            return "info", _("The cards were booked again for your term.")
        case "invoice_issue":
            return "document", _("Invoice %(number)s issued.") % {"number": data.get("invoice", "")}
        case "credit_note_issue":
            return "document", _("Credit note %(number)s issued.") % {"number": data.get("credit_note", "")}
        case "refund_address_set" if data.get("network"):
            return "info", _("Refund address saved: refunds go to it on %(network)s.") % {"network": data["network"]}
        case "refund_address_set":
            return "info", _("Refund address saved.")
        case "refund_record" if data.get("verify") == "pending":
            # Watched on chain: "sent" once the chain shows it (refund_verified).
            return "payment", _("Refund of %(amount)s %(symbol)s on %(network)s on its way to your refund "
                                "address; shown as sent once the network has it.") % {
                "amount": refund_coins(), "symbol": symbol, "network": network}
        case "refund_record" | "refund_verified":
            return "payment", _("Refund sent: %(amount)s %(symbol)s on %(network)s.") % {
                "amount": refund_coins(), "symbol": symbol, "network": network}
        case "transfer_reassign" if data.get("to") == order.reference:
            return "payment", _("A transfer sent to another order's address was meant for this order and now "
                                "counts for it.")
        case "transfer_reassign":
            return "payment", _("A transfer to this order's address was meant for another order and was moved "
                                "there.")
        case "host_fault":
            return "info", _("The host of your cards was marked faulty. The time you lose is credited to you by our "
                             "service credit rule, without asking.")
        case "service_credit":
            notes = ", ".join(n.get("number", "") for n in data.get("notes", []))
            return "document", _("Service credit for time lost through our fault: %(notes)s.") % {"notes": notes}
        case "term_warning" if data.get("hours_before") == 1:
            return "info", _("Reminder sent: the term ends within the hour.")
        case "term_warning":
            return "info", _("Reminder sent: the term ends within 24 hours.")
        case "order_extend":
            return "info", _("Extension of order %(reference)s placed; the same cards are held for it while the "
                             "quote runs.") % {"reference": data.get("extends", "")}
        case "extension_held":
            return "info", _("Extension %(reference)s placed: %(days)s days, the cards held while its quote runs.") % {
                "reference": data.get("extension", ""), "days": data.get("days", "")}
        case "order_extended":
            return "info", _("Extended by %(days)s days (%(reference)s): the term now ends at %(end)s.") % {
                "days": data.get("days", ""), "reference": data.get("extension", ""),
                "end": moment(datetime.fromisoformat(data["to"])) if data.get("to") else ""}
    return None


def for_order(order: Order) -> list[Event]:
    events = []
    entries = AuditEntry.objects.filter(object_type="orders.order", object_id=str(order.pk)).order_by("at", "id")
    state = None
    for entry in entries:
        if entry.action == "order_state" and entry.to_state in OrderState._value2member_map_:
            state = OrderState(entry.to_state)
        described = _text(entry, order, state)
        if described:
            events.append(Event(entry.at, described[1], described[0]))
    for step in order.steps.all():
        label = STEP_LABELS.get(Step(step.step)) if step.step in Step._value2member_map_ else _("Disks wiped")
        events.append(Event(step.finished_at, _("%(step)s: done.") % {"step": label}, "step"))
    return sorted(events, key=lambda e: e.at)
