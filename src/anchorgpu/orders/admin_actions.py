"""The operators' tools on an order: record a transfer (read from the chain
where the asset is watched), update its confirmations, reassign it to the
order it was meant for, mark paid or invalid, re-check capacity, retry access
preparation, retry a step, re-check health, end the term now, wipe now, record a refund and check it on chain,
issue the service credit the published rule gives.

Each tool is a page with a form; sending it is the confirmation. The page
calls one payment service with the operator's user name as the actor; a
refusal (``OrderError``) comes back as a form error, never a server error.
Done, it goes back to the order's page, or to the queue it came from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _l
from django.utils.translation import ngettext

from anchorgpu.admin_base import missing_object_redirect
from anchorgpu.allocation.errors import AllocationError
from anchorgpu.payments import refunds, transfers
from anchorgpu.payments import services as payments
from anchorgpu.payments.models import Refund, Transfer
from anchorgpu.payments.refund_networks import customer_network
from anchorgpu.payments.refund_units import from_quote_units

from . import admin_forms as f
from . import alert_tool
from .access_checks import order_health_recheck
from .admin_moves import MoveTermForm, apply_move_term
from .admin_panels import payment_summary
from .credits import order_credit_issue
from .errors import OrderError
from .fulfilment import order_retry_provisioning, order_step_retry
from .lifecycle import order_end_now
from .models import Order
from .wipes import order_wipe_now

BACK_TO_QUEUE = "queue"


@dataclass(frozen=True)
class ToolPage:
    name: str
    title: str
    form: type[f.OrderForm]
    button: str
    intro: str


TOOLS = {page.name: page for page in (
    ToolPage("record_transfer", _l("Record a transfer"), f.TransferForm, _l("Record the transfer"),
             _l("Record a transfer to this order's deposit address. Where the asset is watched on chain, give the "
                "transaction id and the transfer is read from the chain; otherwise type it as the block explorer "
                "shows it. The order is evaluated again at once. One transaction credits one order, once.")),
    ToolPage("update_confirmations", _l("Update confirmations"), f.ConfirmationsForm, _l("Update"),
             _l("Give the transfer's confirmations as they stand now; the order is evaluated again.")),
    ToolPage("reassign_transfer", _l("Reassign the transfer"), f.ReassignForm, _l("Move the transfer"),
             _l("One customer paid another's quote: move this transfer to the order it was meant for. Both orders "
                "are evaluated again and both audit trails record the move. An order that counts the transfer "
                "towards its own payment keeps it.")),
    ToolPage("mark_paid", _l("Mark paid"), f.ReasonForm, _l("Accept the payment"),
             _l("Accept the payment as it stands, e.g. when an exchange kept a fee. The cards are secured and the "
                "invoice issued; if the cards are gone, the order waits for a refund instead.")),
    ToolPage("mark_invalid", _l("Mark invalid"), f.MarkInvalidForm, _l("Mark the claim invalid"),
             _l("The customer's “I've paid” does not hold up. The order goes back to awaiting payment while its "
                "quote runs, or expires (and frees its cards) when the quote has run out. The customer is e-mailed "
                "what you write for them.")),
    ToolPage("recheck_capacity", _l("Re-check capacity"), f.ConfirmForm, _l("Re-check now"),
             _l("This order was paid after its quote expired. If the cards for its term (or from now on) are free, "
                "they are booked and the order is paid; otherwise it stays here for a refund.")),
    ToolPage("retry_provisioning", _l("Retry access preparation"), f.ReasonForm, _l("Retry"),
             _l("Send this failed order back to access preparation with a fresh count of attempts, once the cause "
                "is fixed. Steps already finished are not repeated.")),
    ToolPage("end_term", _l("End the term now"), f.ReasonForm, _l("End the term"),
             _l("End this active term at once: the order is completed and its cards are released with it; the "
                "worker then wipes the machine (no new term starts on these cards before the wipe is recorded). "
                "Nothing is refunded by this; record a refund of part of the price afterwards if one is owed.")),
    ToolPage("retry_step", _l("Retry the step"), f.ReasonForm, _l("Retry now"),
             _l("Let the worker try this order's next step (or its wipe) again on its next sweep: the wait after a "
                "failure is cleared, and so is the claim of a worker you judge stuck. A worker still running under "
                "that claim finds it gone and drops its result; the step is made to be repeated safely.")),
    ToolPage("health_recheck", _l("Re-check health"), f.ReasonForm, _l("Re-check now"),
             _l("Run the machine's health check again now and record what it says on the order. Nothing else "
                "changes; a host found with another SSH host key is taken off sale and the operators alerted.")),
    ToolPage("wipe_now", _l("Wipe now"), f.ReasonForm, _l("Wipe the machine"),
             _l("Wipe this ended order's machine now: its container and volume are removed and the proof is "
                "recorded with the wipe. A wipe that fails is counted and tried again later; the next term on "
                "these cards waits for it.")),
    ToolPage("record_refund", _l("Record a refund"), f.RefundForm, _l("Record the refund"),
             _l("Record a refund you have already sent, to the customer's refund address or to one they asked "
                "for in writing. A whole-order refund ends the order: access removed, cards released, invoice "
                "credited. Where the asset is watched, the refund is checked on chain before the customer is told "
                "it was sent.")),
    ToolPage("verify_refund", _l("Check the refund on chain"), f.ConfirmForm, _l("Check now"),
             _l("Look the refund's transaction up on the chain now: it counts as sent once it pays the refund "
                "address at least the amount recorded.")),
    ToolPage("issue_credit", _l("Issue the service credit"), f.ConfirmForm, _l("Issue the credit"),
             _l("Issue what the published service credit rule gives this order for the time it lost through the "
                "shop's fault, less what it credited before: a credit note per paid part, with the breakdown for "
                "the customer. The amount is then owed back to the customer: record it as a refund of money owed "
                "back once sent.")),
    ToolPage(alert_tool.NAME, alert_tool.TITLE, f.ReasonForm, alert_tool.BUTTON, alert_tool.INTRO),
    ToolPage("move_term", _l("Move to other cards"), MoveTermForm, _l("Move the term"),
             _l("Give this term other cards of the same product from now (or its start) to its end: the shop's "
                "proposal, or the cards you name. The customer is told by email and on the order page. If access "
                "was prepared, it is prepared again on the new cards and the old ones are wiped; nothing on the old "
                "machine's disks is copied.")),
)}
# Tools about one transfer or one refund of the order (their URLs carry its id).
PER_TRANSFER = ("update_confirmations", "reassign_transfer")
PER_REFUND = ("verify_refund",)


def _apply_transfer(order, data, actor, item):
    if "index" not in data:  # the asset is watched: read from the chain
        rows = transfers.transfer_record_from_chain(order=order, txid=data["txid"], actor=actor, note=data["note"])
        return ngettext("%(count)d transfer read from the chain is recorded.",
                        "%(count)d transfers read from the chain are recorded.", len(rows)) % {"count": len(rows)}
    transfers.transfer_record(order=order, actor=actor, transfer=transfers.TransferInput(
        txid=data["txid"], index=data["index"], amount=data["amount"], confirmations=data["confirmations"],
        seen_at=data["seen_at"], sender=data["sender"], note=data["note"],
        shared_statement=data.get("shared_statement") or ""))
    return _("The transfer is recorded.")


def _apply_confirmations(order, data, actor, item):
    transfers.transfer_confirmations_update(transfer=item, confirmations=data["confirmations"], actor=actor)
    return _("The confirmations are updated.")


def _apply_reassign(order, data, actor, item):
    target = data["to_order"]
    transfers.transfer_reassign(transfer=item, to_order=target, actor=actor, reason=data["reason"])
    return _("The transfer now credits order %(ref)s.") % {"ref": target.reference}


def _apply_end_term(order, data, actor, item):
    order_end_now(order=order, actor=actor, reason=data["reason"])
    return _("The term has ended.")


def _apply_retry_step(order, data, actor, item):
    order_step_retry(order=order, actor=actor, reason=data["reason"])
    return _("The worker tries the step again on its next sweep.")


def _apply_health_recheck(order, data, actor, item):
    entry = order_health_recheck(order=order, actor=actor, reason=data["reason"])
    if entry.data.get("ok"):
        return _("The health check passed.")
    raise OrderError(_("The health check failed: %(error)s (recorded on the order).")
                     % {"error": entry.data.get("error", "?")})


def _apply_wipe_now(order, data, actor, item):
    wiped, error = order_wipe_now(order=order, actor=actor, reason=data["reason"])
    if not wiped:
        raise OrderError(_("The machine could not be wiped (%(error)s). The attempt is recorded and the wipe is "
                           "tried again later.") % {"error": error or "?"})
    return _("The machine is wiped and the proof recorded.")


def _apply_verify_refund(order, data, actor, item):
    row = refunds.refund_verify(refund=item, actor=actor)
    if row.verified_at is None:
        raise OrderError(_("The chain does not show this refund paying the address yet (%(status)s).")
                         % {"status": row.verification.get("status", "?")})
    return _("The refund is found on chain.")


def _apply_mark_paid(order, data, actor, transfer):
    payments.payment_mark_paid(order=order, actor=actor, reason=data["reason"])
    return _("The payment is accepted.")


def _apply_mark_invalid(order, data, actor, transfer):
    payments.payment_mark_invalid(order=order, actor=actor, reason=data["reason"],
                                  customer_reason=data["customer_reason"])
    return _("The claim is marked invalid.")


def _apply_recheck(order, data, actor, transfer):
    payments.payment_recheck_capacity(order=order, actor=actor)
    return _("Capacity re-checked.")


def _apply_retry(order, data, actor, transfer):
    order_retry_provisioning(order=order, actor=actor, reason=data["reason"])
    return _("The order is back in access preparation.")


def _apply_refund(order, data, actor, item):
    rate = data["rate"] if data["rate_choice"] == Refund.RateChoice.CURRENT else None
    row = refunds.refund_record(order=order, actor=actor, refund=refunds.RefundInput(
        address=data["address"], amount=data["amount"], rate_choice=data["rate_choice"], txid=data["txid"],
        reason=data["reason"], whole_order=data["scope"] == f.RefundForm.SCOPE_WHOLE, rate=rate,
        network_fee=data.get("network_fee") or 0, of_price=data["scope"] == f.RefundForm.SCOPE_PRICE,
        customer_request=data.get("customer_request") or "", customer_reason=data.get("customer_reason") or "",
        customer_reason_text=data.get("customer_reason_text") or "", asset=data.get("network")))
    if row.verification.get("status") == "not_watched" or row.verified_at is not None:
        return _("The refund is recorded.")
    return _("The refund is recorded; the customer sees it as sent once the chain shows it.")


def _apply_issue_credit(order, data, actor, item):
    notes = order_credit_issue(order=order, actor=actor)
    if not notes:
        return _("Nothing is due: the rule's credit was issued before, or the invoice holds nothing more.")
    return ngettext("Credit note %(numbers)s is issued.", "Credit notes %(numbers)s are issued.", len(notes)) % {
        "numbers": ", ".join(f"{n.number} ({n.amount} {n.currency})" for n in notes)}


APPLY: dict[str, Callable] = {
    "record_transfer": _apply_transfer, "update_confirmations": _apply_confirmations,
    "reassign_transfer": _apply_reassign, "mark_paid": _apply_mark_paid, "mark_invalid": _apply_mark_invalid,
    "recheck_capacity": _apply_recheck, "record_refund": _apply_refund, "retry_provisioning": _apply_retry,
    "end_term": _apply_end_term, "verify_refund": _apply_verify_refund, "retry_step": _apply_retry_step,
    "health_recheck": _apply_health_recheck, "wipe_now": _apply_wipe_now, "issue_credit": _apply_issue_credit,
    "move_term": apply_move_term,
    alert_tool.NAME: alert_tool.apply_clear,
}


def _refund_initial(order: Order) -> dict:
    summary = payment_summary(order)
    if summary.received is None:
        return {}
    open_units = max(summary.received.units - summary.refunded.units, 0)
    # Proposed on the customer's network, in its base units (its decimals may differ from the quote's).
    network = customer_network(order)

    def sent(units: int) -> int:
        return from_quote_units(units, quote_decimals=order.quote.asset.decimals, sent_decimals=network.decimals)

    address = {"address": order.refund_address, "network_fee": 0, "network": network.code}
    if order.refund_due and summary.excess.units:
        return {**address, "scope": f.RefundForm.SCOPE_EXCESS,
                "amount": sent(min(summary.excess.units, open_units)) or ""}
    return {**address, "scope": f.RefundForm.SCOPE_WHOLE, "amount": sent(open_units) or ""}


class OrderToolsMixin:
    """For the order's ModelAdmin: the tools' URLs and pages."""

    def may_operate(self, request) -> bool:
        opts = Order._meta
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    def tool_url_name(self, name: str) -> str:
        return f"{self.admin_site.name}:{Order._meta.app_label}_{Order._meta.model_name}_{name}"

    def get_urls(self):
        prefix = f"{Order._meta.app_label}_{Order._meta.model_name}"
        wrap = self.admin_site.admin_view
        slug = {"update_confirmations": "confirmations"}
        urls = [path(f"<path:object_id>/transfers/<int:item_id>/{slug.get(name, name.replace('_', '-'))}/",
                     wrap(self.tool_view), {"tool": name}, name=f"{prefix}_{name}") for name in PER_TRANSFER]
        urls += [path(f"<path:object_id>/refunds/<int:item_id>/{name.replace('_', '-')}/", wrap(self.tool_view),
                      {"tool": name}, name=f"{prefix}_{name}") for name in PER_REFUND]
        urls += [path(f"<path:object_id>/{name.replace('_', '-')}/", wrap(self.tool_view), {"tool": name},
                      name=f"{prefix}_{name}") for name in TOOLS if name not in PER_TRANSFER + PER_REFUND]
        return [*urls, *super().get_urls()]

    def _back(self, request, order: Order) -> str:
        if request.GET.get("back") == BACK_TO_QUEUE:
            from .queue import PaymentQueueEntry

            opts = PaymentQueueEntry._meta
            return reverse(f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_changelist")
        return reverse(self.tool_url_name("change"), args=[order.pk])

    def _item(self, tool: str, order: Order, item_id):
        """The transfer or refund a per-item tool is about (None when it is not the order's)."""
        model = Transfer if tool in PER_TRANSFER else Refund
        return model.objects.filter(pk=item_id, order=order).first()

    def _form_class(self, tool: str, order: Order):
        if tool == "record_transfer" and transfers.is_watched(order.quote.asset):
            return f.ChainTransferForm
        return TOOLS[tool].form

    def tool_view(self, request, object_id, tool, item_id=None):
        if not self.may_operate(request):
            raise PermissionDenied
        order = Order.objects.filter(pk=object_id).select_related("quote__asset").first() \
            if str(object_id).isascii() and str(object_id).isdigit() else None
        if order is None:
            return missing_object_redirect(self, request, Order._meta, object_id)
        if getattr(order, "quote", None) is None:
            self.message_user(request, _("This order has no quote, so there is no payment to act on."),
                              messages.WARNING)
            return HttpResponseRedirect(reverse(self.tool_url_name("change"), args=[order.pk]))
        spec = TOOLS[tool]
        item = None
        if item_id is not None:
            item = self._item(tool, order, item_id)
            if item is None:
                self.message_user(request, _("That transfer or refund is not recorded for this order."),
                                  messages.WARNING)
                return HttpResponseRedirect(self._back(request, order))
        initial = _refund_initial(order) if tool == "record_refund" else {}
        if tool == "update_confirmations":
            initial["confirmations"] = item.confirmations
        form = self._form_class(tool, order)(request.POST if request.method == "POST" else None, order=order,
                                              initial=initial)
        if form.is_bound and form.is_valid():
            try:
                done = APPLY[tool](order, form.cleaned_data, request.user.get_username(), item)
            except (OrderError, AllocationError) as exc:
                form.add_error(None, getattr(exc, "message", None) or str(exc))
            else:
                order.refresh_from_db()
                self.message_user(request, _("%(ref)s: %(done)s The order is now %(state)s.") % {
                    "ref": order.reference, "done": done, "state": order.state_label}, messages.SUCCESS)
                return HttpResponseRedirect(self._back(request, order))
        summary = payment_summary(order)
        context = {
            **self.admin_site.each_context(request),
            "title": f"{spec.title}: {order.reference}",
            "subtitle": None,
            "opts": Order._meta,
            "original": order,
            "order": order,
            "object": order,  # for the breadcrumbs of admin/anchorgpu/object_tool.html
            "tool": spec,
            "transfer": item if tool in PER_TRANSFER else None,
            "refund": item if tool in PER_REFUND else None,
            "summary": summary,
            "form": form,
            "back_url": self._back(request, order),
            "media": self.media + form.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/orders/order/tool.html", context)
