"""The checkout form: what to rent, who is buying, SSH keys, how to pay."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django_countries import countries

from anchorgpu.accounts.models import SavedKey
from anchorgpu.accounts.saved_keys import public_keys, saved_keys_of
from anchorgpu.billing import tax
from anchorgpu.catalog.models import TERM_CHOICES, Environment, Option, Product
from anchorgpu.catalog.rules import MAX_QUANTITY, Stack, environment_fits
from anchorgpu.i18n import message
from anchorgpu.orders.models import PURPOSE_CHOICES
from anchorgpu.orders.services import Checkout
from anchorgpu.orders.ssh_keys import MAX_KEYS, SSHKeyError, parse_keys
from anchorgpu.payments.selectors import assets_accepted
from anchorgpu.planner_pages.run_plans import run_plan_for_order

from . import checkout_asset
from .forms import checked_start

MAX_KEYS_TEXT = 40_000

START_CHOICES = [("asap", _("As soon as possible")), ("date", _("At a date and time I choose"))]


class CheckoutForm(forms.Form):
    quantity = forms.IntegerField(
        label=_("Cards"), min_value=1, max_value=MAX_QUANTITY, initial=1,
        error_messages={"invalid": _("Quantity must be a whole number."),
                        "min_value": _("Quantity must be at least %(limit_value)s."),
                        "max_value": _("Quantity must be at most %(limit_value)s.")})
    term = forms.TypedChoiceField(label=_("Term"), choices=TERM_CHOICES, coerce=int, initial=7,
                                  error_messages={"invalid_choice": _("Terms are 3, 7 or 30 days.")})
    start_mode = forms.ChoiceField(label=_("Start"), choices=START_CHOICES, initial="asap",
                                   widget=forms.RadioSelect)
    start = forms.DateTimeField(
        label=_("Start date and time (UTC)"), required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        error_messages={"invalid": _("Give the start as a date and time, e.g. 2026-12-01 09:00.")})
    environment = forms.ModelChoiceField(label=_("Software environment"), queryset=Environment.objects.none(),
                                         empty_label=None, to_field_name="slug",
                                         error_messages={"invalid_choice": _("Choose one of the environments "
                                                                             "listed for this card.")})
    options = forms.ModelMultipleChoiceField(
        label=_("Options"), required=False, queryset=Option.objects.none(), to_field_name="slug",
        widget=forms.CheckboxSelectMultiple,
        error_messages={"invalid_choice": _("Unknown option “%(value)s”."),
                        "invalid_pk_value": _("Unknown option “%(pk)s”.")})
    name = forms.CharField(label=_("Full name"), max_length=120)
    email = forms.EmailField(label=_("Email"), max_length=254,
                             help_text=_("Payment details, access and invoices are sent here."))
    company = forms.CharField(label=_("Company (optional)"), max_length=120, required=False)
    country = forms.ChoiceField(label=_("Country"), choices=[])
    billing_address = forms.CharField(label=_("Billing address (optional)"), max_length=500, required=False,
                                      widget=forms.Textarea(attrs={"rows": 3}))
    business = forms.BooleanField(label=_("I am buying for a business"), required=False,
                                  help_text=_("Then give the business's name above. With an EU VAT id from another "
                                              "EU country than ours, the invoice is made out without VAT (reverse "
                                              "charge)."))
    vat_id = forms.CharField(label=_("VAT id (optional)"), max_length=20, required=False,
                             help_text=_("With its country prefix, e.g. PT123456789. We check its form, not the EU's "
                                         "VIES register."))
    ssh_keys = forms.CharField(
        label=_("SSH public keys"), max_length=MAX_KEYS_TEXT, required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text=_("One per line, as in a .pub file (“ssh-ed25519 AAAA… you@laptop”). Never paste a private key."))
    # The customer's saved keys (``SavedKey``), ticked by fingerprint; the order copies them when it is placed.
    saved_keys = forms.ModelMultipleChoiceField(
        label=_("Your saved SSH keys"), required=False, queryset=SavedKey.objects.none(), to_field_name="fingerprint",
        widget=forms.CheckboxSelectMultiple,
        error_messages={"invalid_choice": _("“%(value)s” is not one of your saved keys."),
                        "invalid_pk_value": _("“%(pk)s” is not one of your saved keys.")})
    save_keys = forms.BooleanField(label=_("Save the keys pasted above to my account"), required=False)
    # How the customer pays: the coin, then its network (``checkout_asset``). ``asset`` is the network's row,
    # what the order takes (and all the JSON API sends); ``coin`` alone will do for a coin on one network.
    coin = forms.ChoiceField(label=_("Pay with"), required=False, choices=[], widget=forms.RadioSelect,
                             error_messages={"invalid_choice": checkout_asset.UNKNOWN_COIN})
    asset = forms.ModelChoiceField(label=_("Pay with"), queryset=assets_accepted(), empty_label=None,
                                   to_field_name="code", required=False, widget=forms.RadioSelect,
                                   error_messages={"invalid_choice": checkout_asset.UNKNOWN_NETWORK})
    # Made when the page is shown: pressing "Place the order" twice places one order.
    submission = forms.CharField(widget=forms.HiddenInput, required=False, max_length=64)
    # What the rental is for (kept on the order), and the planner's run plan the customer came with (signed).
    purpose = forms.ChoiceField(label=_("What the rental is for (optional)"), required=False,
                                choices=[("", _("Not said"))] + PURPOSE_CHOICES,
                                error_messages={"invalid_choice": _("Choose one of the purposes listed.")})
    plan = forms.CharField(widget=forms.HiddenInput, required=False, max_length=8000)
    accept = forms.BooleanField(
        label=_("I understand that the term is fixed, that the machine’s disks are wiped when it ends, and that "
                "local disks are not a backup."),
        error_messages={"required": _("Please confirm that you have read this.")})

    def __init__(self, *args, product: Product, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.product = product
        self.fields["saved_keys"].queryset = saved_keys_of(user)
        self.fields["saved_keys"].label_from_instance = lambda key: f"{key.label} · {key.key_type} {key.fingerprint}"
        self.fields["environment"].queryset = Environment.objects.filter(
            is_active=True, stack__in=[stack.value for stack in Stack if environment_fits(product.stack, stack)])
        self.fields["options"].queryset = Option.objects.filter(is_active=True)
        # Catalog names in the reader's language where the catalogs carry them.
        self.fields["environment"].label_from_instance = lambda env: gettext(env.name)
        self.fields["options"].label_from_instance = lambda option: gettext(option.name)
        self.fields["asset"].label_from_instance = checkout_asset.network_label
        self.accepted_assets = list(self.fields["asset"].queryset)
        self.fields["coin"].choices = checkout_asset.coin_choices(self.accepted_assets)
        if self.fields["coin"].choices and not self.initial.get("coin"):
            self.initial["coin"] = self.fields["coin"].choices[0][0]
        self.fields["country"].choices = [("", _("Choose…"))] + list(countries)
        if product.cards_per_unit > 1:
            self.fields["quantity"].label = _("Lots")
            self.fields["quantity"].help_text = _("Each lot is %(n)d cards joined by NVLink on one host.") % {
                "n": product.cards_per_unit}
        self.parsed_keys, self.pasted_keys = [], []

    def clean_start(self):
        start = checked_start(self.cleaned_data.get("start"),
                              past=_("That start is in the past; choose a later one or “as soon as possible”."))
        return start.replace(second=0, microsecond=0) if start else None

    def clean_vat_id(self):
        return tax.normalise_vat_id(self.cleaned_data.get("vat_id", ""))

    def clean_name(self):
        value = " ".join(self.cleaned_data.get("name", "").split())
        if not value:
            raise forms.ValidationError(_("Give your name."))
        return value

    def clean_ssh_keys(self):
        text = self.cleaned_data.get("ssh_keys", "")
        if not text.strip():
            return ""  # none pasted: saved keys may be ticked instead (``clean`` checks there is one)
        try:
            self.pasted_keys = parse_keys(text)
        except SSHKeyError as exc:
            if exc.leaked:
                self.data = self.data.copy()  # never echo a private key back into the page
                self.data[self.add_prefix("ssh_keys")] = ""
                raise forms.ValidationError(
                    _("This is a PRIVATE key. Treat it as leaked: delete it, make a new key pair and paste only the "
                      "public key (the .pub file). It has not been saved."), code="private_key") from None
            where = _("Line %(n)d: ") % {"n": exc.line} if exc.line else ""
            raise forms.ValidationError(_("%(where)sThis is not an SSH public key we can use: %(reason)s")
                                        % {"where": where, "reason": message(exc)}, code="bad_key") from None
        return "\n".join(key.line for key in self.pasted_keys)

    def clean(self):
        cleaned = super().clean()
        if "country" not in self.errors and "vat_id" not in self.errors:
            problem = tax.customer_problem(country=cleaned.get("country") or "", business=cleaned.get("business"),
                                           company=cleaned.get("company") or "", vat_id=cleaned.get("vat_id") or "")
            if problem is not None:
                self.add_error(problem[0], message(problem[1]))
        if cleaned.get("start_mode") == "date" and not cleaned.get("start") and "start" not in self.errors:
            self.add_error("start", _("Give the start date and time, or choose “as soon as possible”."))
        if "ssh_keys" not in self.errors and "saved_keys" not in self.errors:
            self._join_saved_keys(list(cleaned.get("saved_keys") or []))
        if "coin" not in self.errors and "asset" not in self.errors:
            asset, where, problem = checkout_asset.chosen_asset(coin=cleaned.get("coin") or "",
                                                                asset=cleaned.get("asset"), assets=self.accepted_assets)
            if problem:
                self.add_error(where, problem)
            else:
                cleaned["asset"], cleaned["coin"] = asset, asset.symbol
        return cleaned

    def payment_groups(self) -> list[checkout_asset.CoinGroup]:
        """Each coin with its networks, for the page."""
        return checkout_asset.groups(self["coin"], self["asset"], self.accepted_assets)

    def _join_saved_keys(self, saved) -> None:
        """The pasted keys, then the ticked saved ones not pasted too; checked as pasted keys are."""
        try:
            ticked = public_keys(saved)
        except SSHKeyError as exc:
            self.add_error("saved_keys", _("A saved key is no longer accepted: %(reason)s")
                           % {"reason": message(exc)})
            return
        pasted = {key.fingerprint for key in self.pasted_keys}
        self.parsed_keys = self.pasted_keys + [key for key in ticked if key.fingerprint not in pasted]
        if not self.parsed_keys:
            self.add_error("ssh_keys", _("Give at least one SSH public key, or tick one of your saved keys."))
        elif len(self.parsed_keys) > MAX_KEYS:
            self.add_error("ssh_keys", _("At most %(most)d keys per order.") % {"most": MAX_KEYS})

    def keys_to_save(self) -> list:
        """The pasted keys, when the customer asked to save them to their account."""
        return list(self.pasted_keys) if self.cleaned_data.get("save_keys") else []

    def checkout(self, *, language: str) -> Checkout:
        data = self.cleaned_data
        return Checkout(product=self.product, quantity=data["quantity"], term_days=data["term"],
                        start=data["start"] if data["start_mode"] == "date" else None,
                        environment=data["environment"], asset=data["asset"], name=data["name"],
                        email=data["email"], country=data["country"], ssh_keys=self.parsed_keys,
                        options=[o.slug for o in data["options"]], company=data["company"].strip(),
                        billing_address=data["billing_address"].strip(), vat_id=data["vat_id"],
                        business=bool(data.get("business")), language=language,
                        idempotency_key=data["submission"], purpose=data.get("purpose") or "",
                        run_plan=run_plan_for_order(data.get("plan") or "", slug=self.product.slug,
                                                    quantity=data["quantity"]))
