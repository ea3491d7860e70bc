"""The operators' payment set-up (assets, deposit keys, rates, settings) and
the payment records, which are read-only here: transfers and refunds are
written only by the payment services, from the order's admin page."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from anchorgpu.admin_base import BoundedDatesAdmin, ReadOnlyModelAdmin
from anchorgpu.audit.services import audit_record
from anchorgpu.chains import tron_address
from anchorgpu.i18n import message

from .address_check import AddressCheckError, check_address
from .addresses import AddressError, Scheme, check_account_key
from .models import Asset, DepositKey, PaymentSettings, Quote, Rate, Refund, StrayTransfer, Transfer, WatchState
from .watch_config import check_url
from .watch_status import watch_networks, watch_row

# --- assets ------------------------------------------------------------------

# What a quote's amount and a transfer's identity mean depends on these; once
# an asset has been quoted they stay as they are (add a new asset instead).
_ASSET_IDENTITY = ("code", "network", "scheme", "chain_id", "decimals", "contract", "finality")
# TRON's solidified block is about 19 blocks below the tip (19 of its 27 super representatives have built on
# it): counting from the tip, a TRON asset waits at least that long.
TRON_DEPTH_MIN = 19


def scheme_problems(cleaned: dict) -> list[tuple[str, str]]:
    """What an asset's fields lack for its address scheme, as (field, message): an EVM network needs its chain id
    and a 0x contract (or none, for the network's own coin); TRON needs its chain id and a T… token contract
    (the shop takes TRC-20 tokens only); Bitcoin has neither; a finality tag is for EVM and TRON only."""
    scheme, chain_id = cleaned.get("scheme"), cleaned.get("chain_id")
    contract = (cleaned.get("contract") or "").strip()
    problems = []
    if scheme == Scheme.EVM.value:
        if chain_id is None:
            problems.append(("chain_id", _("An EVM network needs its chain id (e.g. 1 Ethereum, 137 Polygon, 8453 "
                                           "Base): the watcher checks the node answers with it.")))
        if contract:
            try:
                check_address(contract, Scheme.EVM)
            except AddressCheckError as exc:
                problems.append(("contract", _("An ERC-20 contract is an EVM address: %(why)s")
                                 % {"why": message(exc)}))
    elif scheme == Scheme.TRON.value:
        if chain_id is None:  # 0x2b6653dc on mainnet: TRON's JSON-RPC documentation, eth_chainId
            problems.append(("chain_id", _("TRON needs its chain id as its JSON-RPC reports it (eth_chainId; "
                                           "728126428 on mainnet).")))
        if not contract:
            problems.append(("contract", _("On TRON the shop takes TRC-20 tokens only: give the token's contract "
                                           "(T…).")))
        elif not tron_address.is_base58(contract):
            problems.append(("contract", _("A TRC-20 contract is a TRON address: “T” and 33 more characters, "
                                           "with a valid checksum.")))
        if cleaned.get("finality") == "safe":  # java-tron refuses the tag: TRON's JSON-RPC documentation
            problems.append(("finality", _("TRON has no “safe” block: use “finalized” (the solidified block) or a "
                                           "number of confirmations.")))
        elif cleaned.get("finality") in (None, "", "depth") and \
                (cleaned.get("confirmations_required") or 0) < TRON_DEPTH_MIN:
            problems.append(("finality", _("Counted from the tip, a TRON payment needs at least %(n)d "
                                           "confirmations, as many as TRON's solidified block is below the tip: "
                                           "choose “finalized” or raise the confirmations.")
                             % {"n": TRON_DEPTH_MIN}))
    elif scheme:
        if contract:
            problems.append(("contract", _("Bitcoin has no token contracts: leave it empty.")))
        if chain_id is not None:
            problems.append(("chain_id", _("A chain id is for EVM networks and TRON: leave it empty for "
                                           "Bitcoin.")))
    if scheme and scheme not in (Scheme.EVM.value, Scheme.TRON.value) and \
            cleaned.get("finality") not in (None, "", "depth"):
        problems.append(("finality", _("A “safe” or “finalized” block is for EVM networks and TRON; Bitcoin "
                                       "counts confirmations.")))
    return problems


class AssetForm(forms.ModelForm):
    class Meta:
        model = Asset
        fields = "__all__"

    def clean(self):
        cleaned = super().clean()
        places, decimals = cleaned.get("quote_decimals"), cleaned.get("decimals")
        if places is not None and decimals is not None and places > decimals:
            self.add_error("quote_decimals", _("At most the asset's decimal places (%(decimals)d).")
                           % {"decimals": decimals})
        for field, error in scheme_problems(cleaned):
            if field not in self.errors:
                self.add_error(field, error)
        return cleaned

    def clean_watch_url(self):
        url = (self.cleaned_data.get("watch_url") or "").strip()
        problem = check_url(url) if url else None
        if problem == "scheme":
            raise ValidationError(_("The URL must start with http:// or https://."))
        if problem == "spaces":
            raise ValidationError(_("The URL must not contain spaces."))
        return url


@admin.register(Asset)
class AssetAdmin(admin.ModelAdmin):
    list_display = ("code", "symbol", "network_name", "scheme", "chain_id", "decimals", "confirmations_required",
                    "finality", "watcher", "tolerance_bps", "position", "is_active")
    list_editable = ("position", "is_active")
    list_filter = ("is_active", "scheme", "network")
    search_fields = ("code", "symbol", "name", "contract")
    fields = ("code", "symbol", "name", "network", "network_name", "scheme", "chain_id", "decimals",
              "quote_decimals", "contract", "confirmations_required", "finality", "tolerance_bps", "watch_url",
              "position", "is_active")
    form = AssetForm
    change_list_template = "admin/payments/asset/change_list.html"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("watch_state")

    @admin.display(description=_("watcher"))
    def watcher(self, obj):
        """The asset's watcher in a few words, linked to the watchers' page."""
        row = watch_row(obj, getattr(obj, "watch_state", None))
        words = {"off": _("off: checked by hand"), "waiting": _("not polled yet"), "ok": _("ok"),
                 "failing": _("failing"), "stalled": _("stalled")}[row.status]
        extra = []
        if row.lag_blocks is not None:
            extra.append(_("%(lag)d blocks behind") % {"lag": row.lag_blocks})
        if row.other_chain_id is not None:
            extra.append(_("node on chain id %(found)d") % {"found": row.other_chain_id})
        return format_html('<a href="{}" class="watch-{}">{}</a>{}', reverse("admin:payments_asset_watch"),
                           row.status, words, format_html(" <small>({})</small>", ", ".join(str(e) for e in extra))
                           if extra else "")

    def get_urls(self):
        return [path("watch/", self.admin_site.admin_view(self.watch_view), name="payments_asset_watch"),
                *super().get_urls()]

    def watch_view(self, request):
        """The chain watchers' status: per asset, the last block seen, the lag, the errors."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {**self.admin_site.each_context(request), "opts": self.model._meta,
                   "title": _("Chain watchers"), "networks": watch_networks(), "now": timezone.now(),
                   "stall_seconds": settings.ANCHORGPU_WATCH_STALL_SECONDS}
        return TemplateResponse(request, "admin/payments/asset/watch_status.html", context)

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and Quote.objects.filter(asset=obj).exists():
            return _ASSET_IDENTITY
        return ()

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is not None and Quote.objects.filter(asset=obj).exists():
            fieldsets[0][1]["description"] = _(
                "The code, network, address scheme, chain id, decimal places and token contract are fixed: this "
                "asset has been quoted, and its quotes and transfers are read with them. To accept another token "
                "or network, add a new asset (and set this one's “accepted” off).")
        return fieldsets

    def has_delete_permission(self, request, obj=None):
        return False  # quotes and transfers refer to it; set "accepted" off instead

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if form.changed_data:
            audit_record(actor=request.user.get_username(), action="asset_change" if change else "asset_add",
                         obj=obj, data={"changed": form.changed_data})


# --- deposit keys ------------------------------------------------------------


class DepositKeyForm(forms.ModelForm):
    class Meta:
        model = DepositKey
        fields = ("scheme", "extended_public_key", "label")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        issued = self.instance.next_index if self.instance.pk else 0
        if issued and "extended_public_key" in self.fields:
            self.fields["extended_public_key"].help_text = _(
                "%(count)d deposit address(es) have been issued from this key. You may replace it: orders already "
                "quoted keep their addresses (watch them with the old key's wallet), and new orders take addresses "
                "from the new key, continuing at index %(count)d. Make sure the new key is the right account before "
                "saving.") % {"count": issued}

    def clean(self):
        cleaned = super().clean()
        key = cleaned.get("extended_public_key")
        scheme = cleaned.get("scheme") or self.instance.scheme
        if key and scheme:
            try:
                check_account_key(key, scheme)
            except AddressError as exc:
                self._forget_pasted_key()  # it may be a private key: never show it again
                self.add_error("extended_public_key", str(exc))
        return cleaned

    def _forget_pasted_key(self) -> None:
        """A refused key is not sent back to the browser in the re-rendered form."""
        data = self.data.copy()
        data[self.add_prefix("extended_public_key")] = ""
        self.data = data


@admin.register(DepositKey)
class DepositKeyAdmin(admin.ModelAdmin):
    form = DepositKeyForm
    list_display = ("scheme", "label", "key_start", "next_index")
    fields = ("scheme", "extended_public_key", "label", "next_index")

    def get_readonly_fields(self, request, obj=None):
        # The index only grows (the quote service takes it); the scheme is what the index counts for.
        return ("scheme", "next_index") if obj is not None else ("next_index",)

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        fieldsets[0][1]["description"] = _(
            "The next address index is not edited here: each checkout takes the next one, and going back would "
            "hand out an address already given to a customer. The scheme is fixed once the key exists, since the "
            "index counts for it.")
        return fieldsets

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one key at a time, on its page: an issuing key offers none
        return actions

    def has_delete_permission(self, request, obj=None):
        # A new row would start again at index 0 and hand out addresses already given to customers.
        return obj is None or obj.next_index == 0

    @admin.display(description=_("extended public key"))
    def key_start(self, obj):
        return f"{obj.extended_public_key[:16]}…"

    def save_model(self, request, obj, form, change):
        if change:
            # Never write next_index from the form's copy: checkouts advance it concurrently.
            obj.save(update_fields=[name for name in ("extended_public_key", "label") if name in form.changed_data]
                     or ["label"])
        else:
            super().save_model(request, obj, form, change)
        if form.changed_data:
            audit_record(actor=request.user.get_username(), action="deposit_key_change" if change else
                         "deposit_key_add", obj=obj, data={"changed": form.changed_data, "scheme": obj.scheme,
                                                            "key_start": obj.extended_public_key[:16],
                                                            "next_index": obj.next_index})


# --- rates -------------------------------------------------------------------


class RateForm(forms.ModelForm):
    class Meta:
        model = Rate
        fields = ("asset", "currency", "price", "source", "observed_at")
        help_texts = {"observed_at": _("When the price was seen (not in the future)."),
                      "currency": _("Three letters, e.g. USD or EUR: the currency of the price list.")}

    def clean_currency(self):
        currency = self.cleaned_data["currency"].strip().upper()
        if len(currency) != 3 or not currency.isalpha() or not currency.isascii():
            raise ValidationError(_("Give a three-letter currency code, e.g. USD."))
        return currency

    def clean_price(self):
        price = self.cleaned_data["price"]
        if price is not None and price <= 0:
            raise ValidationError(_("A price must be above zero."))
        return price

    def clean_observed_at(self):
        observed = self.cleaned_data["observed_at"]
        if observed and observed > timezone.now():
            raise ValidationError(_("A rate cannot have been observed in the future."))
        return observed


@admin.register(Rate)
class RateAdmin(BoundedDatesAdmin):
    """Rates are added, never edited: a wrong figure is corrected by adding a newer one."""

    form = RateForm
    list_display = ("asset", "currency", "price", "source", "observed_at", "entered_by", "created_at")
    list_filter = ("asset", "currency", "entered_by")
    list_select_related = ("asset",)
    search_fields = ("source", "entered_by")
    date_hierarchy = "observed_at"
    ordering = ("-observed_at", "-id")
    fields = ("asset", "currency", "price", "source", "observed_at", "entered_by", "created_at")
    readonly_fields = ("entered_by", "created_at")

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        obj.entered_by = request.user.get_username()
        super().save_model(request, obj, form, change)
        audit_record(actor=obj.entered_by, action="rate_add", obj=obj,
                     data={"asset": obj.asset.code, "currency": obj.currency, "price": str(obj.price),
                           "observed_at": obj.observed_at.isoformat(), "source": obj.source})


# --- settings ----------------------------------------------------------------


@admin.register(PaymentSettings)
class PaymentSettingsAdmin(admin.ModelAdmin):
    """One row: the list goes straight to it."""

    fieldsets = (
        (_("Quotes and payments"), {"fields": ("quote_minutes", "monitor_hours", "claim_grace_minutes",
                                               "pending_hold_hours", "rate_max_age_minutes"),
                                    "description": _("A quote already given keeps its expiry and watch window; the "
                                                     "other settings apply from the next payment checked.")}),
        (_("How customers reach us"), {"fields": ("contact_email", "contact_other", "contact_hours")}),
    )

    def has_add_permission(self, request):
        return not PaymentSettings.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        row = PaymentSettings.objects.order_by("pk").first()
        if row is not None:
            opts = self.opts
            return HttpResponseRedirect(reverse(f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_change",
                                                args=[row.pk]))
        return super().changelist_view(request, extra_context)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.pk = 1  # the row PaymentSettings.current() reads
        super().save_model(request, obj, form, change)
        if form.changed_data:
            audit_record(actor=request.user.get_username(), action="payment_settings_change", obj=obj,
                         data={name: form.cleaned_data[name] for name in form.changed_data})


# --- records -------------------------------------------------------------------


@admin.register(Transfer)
class TransferAdmin(ReadOnlyModelAdmin):
    list_display = ("txid", "index", "order", "asset", "amount", "confirmations", "seen_at", "source",
                    "recorded_by")
    list_filter = ("source", "asset", "chain")
    list_select_related = ("order", "asset")
    search_fields = ("txid", "order__reference", "sender")
    search_help_text = _("Search by transaction id, order reference or sender address.")
    date_hierarchy = "seen_at"
    ordering = ("-seen_at", "-id")


@admin.register(StrayTransfer)
class StrayTransferAdmin(ReadOnlyModelAdmin):
    """Money that reached an order's deposit address on another EVM network than the one quoted: ours to move
    and return, never credited (``payments.strays``)."""

    list_display = ("txid", "index", "network", "order", "asset", "amount", "address", "seen_at")
    list_filter = ("network", "asset")
    list_select_related = ("order", "asset")
    search_fields = ("txid", "order__reference", "address", "sender")
    search_help_text = _("Search by transaction id, order reference, deposit or sender address.")
    date_hierarchy = "seen_at"
    ordering = ("-seen_at", "-id")


@admin.register(Refund)
class RefundAdmin(ReadOnlyModelAdmin):
    list_display = ("txid", "order", "asset", "amount", "fiat_amount", "currency", "rate_choice", "address",
                    "recorded_by", "created_at")
    list_filter = ("rate_choice", "asset")
    list_select_related = ("order", "asset")
    search_fields = ("txid", "order__reference", "address")
    search_help_text = _("Search by transaction id, order reference or refund address.")
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")


@admin.register(WatchState)
class WatchStateAdmin(admin.ModelAdmin):
    """Written by the watcher; an operator may only move where the next scan starts (to scan blocks again)."""

    list_display = ("asset", "tip", "next_block", "last_success_at", "errors_in_row", "watched")
    fields = ("asset", "next_block", "tip", "tip_hash", "tip_time", "last_poll_at", "last_success_at", "last_error",
              "last_error_at", "errors_in_row", "watched", "found", "calls", "round_trips", "duration_ms")
    readonly_fields = tuple(f for f in fields if f != "next_block")

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        fieldsets[0][1]["description"] = _(
            "Written by the chain watcher at each poll, so only where the next scan starts is yours to change: "
            "lower it to scan earlier blocks again.")
        return fieldsets

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if form.changed_data:
            audit_record(actor=request.user.get_username(), action="watch_rescan", obj=obj.asset,
                         data={"next_block": obj.next_block})
