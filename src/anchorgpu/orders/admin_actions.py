"""The operators' payment tools on an order: record a transfer, update its
confirmations, mark paid or invalid, re-check capacity, record a refund.

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

from anchorgpu.allocation.errors import AllocationError
from anchorgpu.payments import services as payments
from anchorgpu.payments.models import Refund, Transfer

from . import admin_forms as f
from . import alert_tool
from .admin_panels import payment_summary
from .errors import OrderError
from .fulfilment import order_retry_provisioning
from .models import Order

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
             _l("Record one transfer to this order's deposit address, as the block explorer shows it. The order is "
                "evaluated again at once. A transfer (network, transaction id, index) can be recorded once, for one "
                "order.")),
    ToolPage("update_confirmations", _l("Update confirmations"), f.ConfirmationsForm, _l("Update"),
             _l("Give the transfer's confirmations as they stand now; the order is evaluated again.")),
    ToolPage("mark_paid", _l("Mark paid"), f.ReasonForm, _l("Accept the payment"),
             _l("Accept the payment as it stands, e.g. when an exchange kept a fee. The cards are secured and the "
                "invoice issued; if the cards are gone, the order waits for a refund instead.")),
    ToolPage("mark_invalid", _l("Mark invalid"), f.ReasonForm, _l("Mark the claim invalid"),
             _l("The customer's “I've paid” does not hold up. The order goes back to awaiting payment while its "
                "quote runs, or expires (and frees its cards) when the quote has run out.")),
    ToolPage("recheck_capacity", _l("Re-check capacity"), f.ConfirmForm, _l("Re-check now"),
             _l("This order was paid after its quote expired. If the cards for its term (or from now on) are free, "
                "they are booked and the order is paid; otherwise it stays here for a refund.")),
    ToolPage("retry_provisioning", _l("Retry access preparation"), f.ReasonForm, _l("Retry"),
             _l("Send this failed order back to access preparation with a fresh count of attempts, once the cause "
                "is fixed. Steps already finished are not repeated.")),
    ToolPage("record_refund", _l("Record a refund"), f.RefundForm, _l("Record the refund"),
             _l("Record a refund you have already sent to the customer's refund address.")),
    ToolPage(alert_tool.NAME, alert_tool.TITLE, f.ReasonForm, alert_tool.BUTTON, alert_tool.INTRO),
)}


def _apply_transfer(order, data, actor, transfer):
    payments.transfer_record(order=order, actor=actor, transfer=payments.TransferInput(
        txid=data["txid"], index=data["index"], amount=data["amount"], confirmations=data["confirmations"],
        seen_at=data["seen_at"], sender=data["sender"], note=data["note"]))
    return _("The transfer is recorded.")


def _apply_confirmations(order, data, actor, transfer):
    payments.transfer_confirmations_update(transfer=transfer, confirmations=data["confirmations"], actor=actor)
    return _("The confirmations are updated.")


def _apply_mark_paid(order, data, actor, transfer):
    payments.payment_mark_paid(order=order, actor=actor, reason=data["reason"])
    return _("The payment is accepted.")


def _apply_mark_invalid(order, data, actor, transfer):
    payments.payment_mark_invalid(order=order, actor=actor, reason=data["reason"])
    return _("The claim is marked invalid.")


def _apply_recheck(order, data, actor, transfer):
    payments.payment_recheck_capacity(order=order, actor=actor)
    return _("Capacity re-checked.")


def _apply_retry(order, data, actor, transfer):
    order_retry_provisioning(order=order, actor=actor, reason=data["reason"])
    return _("The order is back in access preparation.")


def _apply_refund(order, data, actor, transfer):
    rate = data["rate"] if data["rate_choice"] == Refund.RateChoice.CURRENT else None
    payments.refund_record(order=order, actor=actor, refund=payments.RefundInput(
        address=data["address"], amount=data["amount"], rate_choice=data["rate_choice"], txid=data["txid"],
        reason=data["reason"], whole_order=data["scope"] == f.RefundForm.SCOPE_WHOLE, rate=rate,
        network_fee=data.get("network_fee") or 0))
    return _("The refund is recorded.")


APPLY: dict[str, Callable] = {
    "record_transfer": _apply_transfer, "update_confirmations": _apply_confirmations,
    "mark_paid": _apply_mark_paid, "mark_invalid": _apply_mark_invalid, "recheck_capacity": _apply_recheck,
    "record_refund": _apply_refund, "retry_provisioning": _apply_retry,
    alert_tool.NAME: alert_tool.apply_clear,
}


def _refund_initial(order: Order) -> dict:
    summary = payment_summary(order)
    if summary.received is None:
        return {}
    open_units = max(summary.received.units - summary.refunded.units, 0)
    address = {"address": order.refund_address, "network_fee": 0}
    if order.refund_due and summary.excess.units:
        return {**address, "scope": f.RefundForm.SCOPE_EXCESS,
                "amount": min(summary.excess.units, open_units) or ""}
    return {**address, "scope": f.RefundForm.SCOPE_WHOLE, "amount": open_units or ""}


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
        urls = [path("<path:object_id>/transfers/<int:transfer_id>/confirmations/",
                     wrap(self.tool_view), {"tool": "update_confirmations"},
                     name=f"{prefix}_update_confirmations")]
        urls += [path(f"<path:object_id>/{name.replace('_', '-')}/", wrap(self.tool_view), {"tool": name},
                      name=f"{prefix}_{name}") for name in TOOLS if name != "update_confirmations"]
        return [*urls, *super().get_urls()]

    def _back(self, request, order: Order) -> str:
        if request.GET.get("back") == BACK_TO_QUEUE:
            from .queue import PaymentQueueEntry

            opts = PaymentQueueEntry._meta
            return reverse(f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_changelist")
        return reverse(self.tool_url_name("change"), args=[order.pk])

    def tool_view(self, request, object_id, tool, transfer_id=None):
        if not self.may_operate(request):
            raise PermissionDenied
        order = Order.objects.filter(pk=object_id).select_related("quote__asset").first() \
            if str(object_id).isascii() and str(object_id).isdigit() else None
        if order is None:
            return self._get_obj_does_not_exist_redirect(request, Order._meta, object_id)
        if getattr(order, "quote", None) is None:
            self.message_user(request, _("This order has no quote, so there is no payment to act on."),
                              messages.WARNING)
            return HttpResponseRedirect(reverse(self.tool_url_name("change"), args=[order.pk]))
        spec = TOOLS[tool]
        transfer = None
        if transfer_id is not None:
            transfer = Transfer.objects.filter(pk=transfer_id, order=order).first()
            if transfer is None:
                self.message_user(request, _("That transfer is not recorded for this order."), messages.WARNING)
                return HttpResponseRedirect(self._back(request, order))
        initial = _refund_initial(order) if tool == "record_refund" else {}
        if transfer is not None:
            initial["confirmations"] = transfer.confirmations
        form = spec.form(request.POST if request.method == "POST" else None, order=order, initial=initial)
        if form.is_bound and form.is_valid():
            try:
                done = APPLY[tool](order, form.cleaned_data, request.user.get_username(), transfer)
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
            "transfer": transfer,
            "summary": summary,
            "form": form,
            "back_url": self._back(request, order),
            "media": self.media + form.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/orders/order/tool.html", context)
