"""The small forms of the order page."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from anchorgpu.payments.txids import TxIdError, normalise_txid


class ClaimForm(forms.Form):
    txid = forms.CharField(label=_("Transaction id (optional)"), max_length=100, required=False,
                           help_text=_("Paste it if your wallet shows one; it helps us find the transfer."))

    def __init__(self, *args, chain: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.chain = chain
        if chain == "evm":
            self.fields["txid"].widget.attrs["placeholder"] = "0x…"

    def clean_txid(self):
        value = self.cleaned_data.get("txid", "").strip()
        if not value:
            return ""
        try:
            return normalise_txid(value, chain=self.chain)
        except TxIdError:
            if self.chain == "tron":
                raise forms.ValidationError(_("A TRON transaction id is 64 hexadecimal characters, as TRONSCAN "
                                              "shows it.")) from None
            if self.chain == "evm":
                raise forms.ValidationError(_("An Ethereum transaction hash is “0x” followed by 64 hexadecimal "
                                              "characters.")) from None
            raise forms.ValidationError(_("A Bitcoin transaction id is 64 hexadecimal characters, without "
                                          "“0x”.")) from None


class RefundAddressForm(forms.Form):
    """Where the customer wants a refund: an address, and the network it is on (the coin they paid, on one of the
    networks the shop has for it; the quote's unless they choose another)."""

    network = forms.ChoiceField(label=_("Network"), required=False,
                                help_text=_("The same coin you paid with, on the network where you want it back. "
                                            "Make sure your wallet or exchange accepts this coin on that network."))
    address = forms.CharField(label=_("Refund address"), max_length=100,
                              help_text=_("An address you control on the network chosen above. We never refund to "
                                          "the address a payment came from."))

    def __init__(self, *args, networks=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.networks = {a.code: a for a in networks}
        self.fields["network"].choices = [(code, _("%(symbol)s on %(network)s")
                                           % {"symbol": a.symbol, "network": gettext(a.network_name)})
                                          for code, a in self.networks.items()]
        if len(self.networks) <= 1:  # one network only: nothing to choose
            self.fields["network"].widget = forms.HiddenInput()

    def clean_network(self):
        code = self.cleaned_data.get("network") or ""
        if not code:
            return None  # the quote's
        if code not in self.networks:
            raise forms.ValidationError(_("Choose one of the networks listed."))
        return self.networks[code]
