"""What the shop sells and at what price; the operator edits prices on the price list's page."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import BooleanField, ExpressionWrapper, Q, Subquery
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from anchorgpu.admin_base import BoundedDatesAdmin

from . import rules, selectors
from .models import Environment, Option, OptionPrice, PriceList, Product, ProductRate, TermDiscount


class StableSlugMixin:
    """A slug is an identifier others keep (the API, orders): set once, on creation."""

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields + ("slug",) if obj is not None else fields

    def get_prepopulated_fields(self, request, obj=None):
        return {} if obj is not None else {"slug": ("name",)}


@admin.register(Product)
class ProductAdmin(StableSlugMixin, admin.ModelAdmin):
    list_display = ("name", "slug", "vendor", "memory_gb_per_card", "cards_per_unit", "stack", "position", "is_active")
    list_editable = ("position", "is_active")
    list_filter = ("is_active", "stack", "vendor")
    search_fields = ("name", "slug")
    fields = ("name", "slug", "vendor", "memory_gb_per_card", "cards_per_unit", "stack", "summary", "position",
              "is_active")


@admin.register(Environment)
class EnvironmentAdmin(StableSlugMixin, admin.ModelAdmin):
    list_display = ("name", "slug", "stack", "image", "cuda_version", "rocm_version", "position", "is_active")
    list_editable = ("position", "is_active")
    list_filter = ("is_active", "stack")
    search_fields = ("name", "slug", "image")
    fields = ("name", "slug", "stack", "image", "cuda_version", "rocm_version", "description", "position",
              "is_active")


@admin.register(Option)
class OptionAdmin(StableSlugMixin, admin.ModelAdmin):
    list_display = ("name", "slug", "per_unit", "position", "is_active")
    list_editable = ("position", "is_active")
    list_filter = ("is_active", "per_unit")
    search_fields = ("name", "slug")
    fields = ("name", "slug", "description", "per_unit", "position", "is_active")


class ProductRateInline(admin.TabularInline):
    model = ProductRate
    fields = ("product", "rate_per_card_hour")
    extra = 0
    verbose_name_plural = _("rates per card-hour")


class TermDiscountInline(admin.TabularInline):
    model = TermDiscount
    fields = ("term_days", "percent")
    ordering = ("term_days",)
    extra = 0
    verbose_name_plural = _("term discounts")


class OptionPriceInline(admin.TabularInline):
    model = OptionPrice
    fields = ("option", "term_days", "price")
    ordering = ("option__position", "option__name", "term_days")
    extra = 0
    verbose_name_plural = _("option prices")


class PriceListForm(forms.ModelForm):
    class Meta:
        model = PriceList
        fields = ("name", "currency", "valid_from", "is_active")

    def clean_valid_from(self):
        start = self.cleaned_data["valid_from"]
        if start and start > timezone.now() + rules.PRICE_LIST_AHEAD:
            raise ValidationError(_("A price list starts at most %(days)d days from now.")
                                  % {"days": rules.PRICE_LIST_AHEAD.days})
        return start


@admin.register(PriceList)
class PriceListAdmin(BoundedDatesAdmin):
    form = PriceListForm
    list_display = ("name", "currency", "valid_from", "is_active", "in_effect", "created_at")
    list_filter = ("is_active", "currency")
    search_fields = ("name",)
    date_hierarchy = "valid_from"
    fields = ("name", "currency", "valid_from", "is_active", "created_at")
    readonly_fields = ("created_at",)
    inlines = [ProductRateInline, TermDiscountInline, OptionPriceInline]
    save_as = True  # "save as new": start next season's list from this one

    def get_queryset(self, request):
        # The list that applies now: the active one with the latest start (as catalog.selectors reads it).
        current = (PriceList.objects.filter(is_active=True, valid_from__lte=timezone.now())
                   .order_by("-valid_from", "-id").values("pk")[:1])
        return super().get_queryset(request).annotate(
            _in_effect=ExpressionWrapper(Q(pk=Subquery(current)), output_field=BooleanField()))

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one list at a time, on its page: the one in effect is not offered
        return actions

    def has_delete_permission(self, request, obj=None):
        # The list in effect is what every quote is priced from: deleting it would leave the shop without
        # prices, or silently put an older list back. Start a new list (save as new) and let it take over.
        if obj is not None and obj.pk == selectors.price_list_current_pk():
            return False
        return super().has_delete_permission(request, obj)

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and obj.pk == selectors.price_list_current_pk():
            context["subtitle"] = _("In effect now, so it cannot be deleted: to change prices from a date, save "
                                    "it as new with that date.")
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)

    @admin.display(description=_("in effect now"), boolean=True)
    def in_effect(self, obj):
        return bool(getattr(obj, "_in_effect", False))
