"""Forms of the operators' payment tools on an order. They check what can be
checked before the service runs (formats, amounts, times); the payment
services decide the rest and their refusals come back as form errors."""

from __future__ import annotations

import re

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from anchorgpu.billing.models import CustomerReason
from anchorgpu.fleet.admin import UTCSplitDateTimeField
from anchorgpu.payments.address_check import AddressCheckError, check_address
from anchorgpu.payments.fields import MAX_DIGITS
from anchorgpu.payments.models import Refund
from anchorgpu.payments.transfers import SEEN_AT_SLACK
from anchorgpu.payments.txids import TxIdError, normalise_txid

from .models import Order

DB_INT_MAX = 2**31 - 1  # a PositiveIntegerField on PostgreSQL
_DIGITS = re.compile(r"[0-9]+")
# The transfer services allow a little clock difference; the form says the same.


def _reason_field() -> forms.CharField:
    return forms.CharField(label=_("Reason"), max_length=2000, help_text=_("Written to the audit log with your name."),
                           widget=forms.Textarea(attrs={"rows": 3, "cols": 60}))


class BaseUnitsInput(forms.CharField):
    """A positive whole number of base units, typed as digits only (no
    decimal point, no exponent: wei amounts are far beyond a float's precision)."""

    default_error_messages = {
        "invalid": _("Digits only: a whole number of base units (e.g. 150000 for 0.0015 BTC)."),
        "positive": _("The amount must be above zero."),
        "too_long": _("That is more digits than any amount can have."),
    }

    def __init__(self, *, allow_zero: bool = False, **kwargs):
        kwargs.setdefault("label", _("Amount (base units)"))
        self.allow_zero = allow_zero
        super().__init__(**kwargs)
        self.widget.attrs.update({"inputmode": "numeric", "size": 40, "autocomplete": "off"})

    def to_python(self, value):
        text = super().to_python(value)
        if text in self.empty_values:
            return None
        if not _DIGITS.fullmatch(text):
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        if len(text.lstrip("0")) > MAX_DIGITS:
            raise ValidationError(self.error_messages["too_long"], code="too_long")
        amount = int(text)
        if amount <= 0 and not (self.allow_zero and amount == 0):
            raise ValidationError(self.error_messages["positive"], code="positive")
        return amount


class TxidField(forms.CharField):
    def __init__(self, **kwargs):
        kwargs.setdefault("label", _("Transaction id"))
        kwargs.setdefault("max_length", 80)
        super().__init__(**kwargs)
        self.widget.attrs.update({"size": 70, "autocomplete": "off", "spellcheck": "false"})


class OrderForm(forms.Form):
    """A form about one order; knows its quote's asset for format checks."""

    def __init__(self, *args, order: Order, **kwargs):
        super().__init__(*args, **kwargs)
        self.order = order
        self.quote = getattr(order, "quote", None)

    def _txid(self, value: str) -> str:
        if self.quote is None:
            raise ValidationError(_("This order has no quote, so there is nothing to pay."))
        try:
            return normalise_txid(value, chain=self.quote.asset.chain)
        except TxIdError as exc:
            raise ValidationError(str(exc)) from None


class TransferForm(OrderForm):
    txid = TxidField()
    index = forms.IntegerField(label=_("Output or log index"), min_value=0, max_value=DB_INT_MAX, initial=0,
                               help_text=_("Bitcoin: the output (vout) paying the deposit address. Ethereum: 0 for "
                                           "a plain ether transfer, the log index for a token transfer."))
    amount = BaseUnitsInput(help_text=_("Exactly as received, in base units (satoshi, wei, a token's smallest "
                                        "unit)."))
    confirmations = forms.IntegerField(label=_("Confirmations"), min_value=0, max_value=DB_INT_MAX)
    seen_at = UTCSplitDateTimeField(label=_("First seen (UTC)"),
                                    help_text=_("The block time, or when it first appeared unconfirmed."))
    sender = forms.CharField(label=_("Sender address"), max_length=100, required=False,
                             help_text=_("Optional. A refund is never sent back there."))
    note = forms.CharField(label=_("Note"), required=False, max_length=2000,
                           widget=forms.Textarea(attrs={"rows": 2, "cols": 60}))
    shared_statement = forms.CharField(
        label=_("Statement, only if this one transaction pays several orders"), required=False, max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text=_("Leave empty. A transaction already credited to an order is refused; fill this in only when "
                    "the explorer shows it paying several of our deposit addresses: which output pays which order. "
                    "It is kept with the transfer and in the audit log."))

    def clean_txid(self):
        return self._txid(self.cleaned_data["txid"])

    def clean_seen_at(self):
        seen = self.cleaned_data["seen_at"]
        if seen and seen > timezone.now() + SEEN_AT_SLACK:
            raise ValidationError(_("A transfer cannot have been seen in the future (times are UTC)."))
        return seen

    def clean_sender(self):
        sender = self.cleaned_data["sender"]
        if not sender or self.quote is None:
            return sender
        try:
            return check_address(sender, self.quote.scheme)
        except AddressCheckError as exc:
            raise ValidationError(str(exc)) from None


class ChainTransferForm(OrderForm):
    """For an asset watched on chain: the transaction id only; the rest is read from the chain."""

    txid = TxidField(help_text=_("The amount, the recipient, the token contract and the confirmations are read "
                                 "from the chain."))
    note = forms.CharField(label=_("Note"), required=False, max_length=2000,
                           widget=forms.Textarea(attrs={"rows": 2, "cols": 60}))

    def clean_txid(self):
        return self._txid(self.cleaned_data["txid"])


class ReassignForm(OrderForm):
    to_reference = forms.CharField(label=_("Order it was meant for"), max_length=16,
                                   help_text=_("Its reference, e.g. AG-7K3M9Q2P. It must be quoted in the same "
                                               "asset."))
    reason = _reason_field()

    def clean_to_reference(self):
        reference = self.cleaned_data["to_reference"].strip().upper()
        target = Order.objects.filter(reference=reference).select_related("quote__asset").first()
        if target is None:
            raise ValidationError(_("No order has that reference."))
        self.cleaned_data["to_order"] = target
        return reference


class ConfirmationsForm(OrderForm):
    confirmations = forms.IntegerField(label=_("Confirmations"), min_value=0, max_value=DB_INT_MAX,
                                       help_text=_("As the block explorer shows them now. They only grow."))


class ReasonForm(OrderForm):
    reason = _reason_field()


class MarkInvalidForm(ReasonForm):
    customer_reason = forms.CharField(
        label=_("What to tell the customer"), max_length=1000, widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text=_("Sent to the customer in the e-mail about this decision and shown on their order page, as you "
                    "write it (in their language if you can), e.g. “No transfer with this transaction id reaches "
                    "your order's address on the Ethereum network.” The reason above stays with the operators."))


class ConfirmForm(OrderForm):
    """Nothing to fill in: the button is the confirmation."""


class RefundForm(OrderForm):
    SCOPE_EXCESS, SCOPE_WHOLE, SCOPE_PRICE = "excess", "whole", "price"

    scope = forms.ChoiceField(label=_("What is refunded"), widget=forms.RadioSelect, choices=[
        (SCOPE_EXCESS, _("Only money received beyond the quote: the order stands")),
        (SCOPE_PRICE, _("Part of the price: the order stands, and a credit note of the refund's value is issued")),
        (SCOPE_WHOLE, _("The whole order: it ends as refunded, its access is removed, its cards are released and "
                        "its invoice is credited")),
    ])
    network = forms.ChoiceField(
        label=_("Network it was sent on"), required=False,
        help_text=_("The same coin as the payment, on the network the customer asked for (chosen here) or "
                    "another the shop has for it. The amount and network fee below are in that network's base "
                    "units."))
    address = forms.CharField(label=_("Sent to"), max_length=100,
                              help_text=_("The address you sent the refund to: the customer's refund address shown "
                                          "above, or one they asked for in writing."))
    customer_request = forms.CharField(
        label=_("The customer's written request"), required=False, max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text=_("Needed when the address is not the one on the order page: where and when the customer asked "
                    "for it (e.g. their email of 2026-12-01 from the order's e-mail address)."))
    amount = BaseUnitsInput(help_text=_("What you sent back, in base units."))
    network_fee = BaseUnitsInput(label=_("Network fee"), required=False, allow_zero=True,
                                 help_text=_("Base units the network took out of the customer's money, if the fee "
                                             "was paid from it (0 when the shop paid it)."))
    rate_choice = forms.ChoiceField(label=_("Rate for the fiat value"), widget=forms.RadioSelect,
                                    choices=Refund.RateChoice.choices, initial=Refund.RateChoice.QUOTE)
    rate = forms.DecimalField(label=_("Rate of the day"), required=False, max_digits=24, decimal_places=8,
                              help_text=_("Price of one whole coin in the order's currency; needed only with the "
                                          "rate of the day."))
    txid = TxidField(help_text=_("Of the refund you sent."))
    reason = _reason_field()
    customer_reason = forms.ChoiceField(
        label=_("Reason on the credit note"), required=False, choices=[("", "—"), *CustomerReason.choices],
        help_text=_("What the customer reads on the credit note (whole order or part of the price), in their "
                    "language. The reason above is your own note and is not printed."))
    customer_reason_text = forms.CharField(
        label=_("Words for the customer"), required=False, max_length=300,
        help_text=_("Printed after the reason as written; needed with “other”."))

    def __init__(self, *args, order: Order, **kwargs):
        super().__init__(*args, order=order, **kwargs)
        from anchorgpu.payments.refund_networks import customer_network, refund_networks

        self.networks = {a.code: a for a in refund_networks(self.quote)} if self.quote is not None else {}
        self.fields["network"].choices = [
            (code, _("%(symbol)s on %(network)s (%(decimals)d decimal places)")
             % {"symbol": a.symbol, "network": a.network_name, "decimals": a.decimals})
            for code, a in self.networks.items()]
        if self.quote is not None and not self.is_bound:
            self.fields["network"].initial = customer_network(order).code

    def _network(self, code: str):
        """The network chosen; none chosen: the customer's (the quote's unless they chose another)."""
        from anchorgpu.payments.refund_networks import customer_network

        if not code and self.quote is not None:
            return customer_network(self.order)
        return self.networks.get(code)

    def clean_network(self):
        network = self._network(self.cleaned_data.get("network") or "")
        if network is None:
            raise ValidationError(_("Choose one of the networks listed."))
        return network

    def clean_txid(self):
        value = self.cleaned_data["txid"]
        network = self._network(self.data.get(self.add_prefix("network"), ""))
        if network is None:
            return self._txid(value)
        try:
            return normalise_txid(value, chain=network.chain)
        except TxIdError as exc:
            raise ValidationError(str(exc)) from None

    def clean(self):
        cleaned = super().clean()
        rate = cleaned.get("rate")
        if cleaned.get("rate_choice") == Refund.RateChoice.CURRENT:
            if rate is None:
                self.add_error("rate", _("Give the day's rate, or choose the quote's rate."))
            elif rate <= 0:
                self.add_error("rate", _("A rate must be above zero."))
        if cleaned.get("scope") in (self.SCOPE_WHOLE, self.SCOPE_PRICE):
            if not cleaned.get("customer_reason"):
                self.add_error("customer_reason", _("Choose the reason the credit note gives the customer."))
            elif cleaned["customer_reason"] == CustomerReason.OTHER and not cleaned.get("customer_reason_text"):
                self.add_error("customer_reason_text", _("Say in words, for the customer, why the invoice is "
                                                         "credited."))
        return cleaned
