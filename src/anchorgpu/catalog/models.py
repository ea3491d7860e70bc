import re
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from .rules import TERM_DAYS, Stack

STACK_CHOICES = [
    (Stack.CUDA.value, _("CUDA")),
    (Stack.ROCM.value, _("ROCm")),
    (Stack.BLACKWELL.value, _("CUDA, Blackwell-ready build")),
]
def _term_label(days: int) -> str:
    return ngettext("%(days)d day", "%(days)d days", days) % {"days": days}


# Lazy, so each request shows the label in its own language.
TERM_CHOICES = [(days, lazy(_term_label, str)(days)) for days in TERM_DAYS]


class Product(models.Model):
    slug = models.SlugField(_("slug"), unique=True, help_text=_("Stable identifier used by the API."))
    name = models.CharField(_("name"), max_length=80)
    vendor = models.CharField(_("vendor"), max_length=40)
    memory_gb_per_card = models.PositiveIntegerField(_("memory per card (GB)"))
    cards_per_unit = models.PositiveSmallIntegerField(
        _("cards per unit"), default=1, validators=[MinValueValidator(1), MaxValueValidator(2)],
        help_text=_("2 for a lot sold as an NVLink pair on one host."))
    stack = models.CharField(_("software stack"), max_length=16, choices=STACK_CHOICES)
    summary = models.CharField(_("summary"), max_length=200, blank=True)
    position = models.PositiveSmallIntegerField(_("position"), default=0)
    is_active = models.BooleanField(_("on sale"), default=True)

    class Meta:
        ordering = ["position", "name"]
        verbose_name = _("product")
        verbose_name_plural = _("products")

    def __str__(self) -> str:
        return self.name


class Environment(models.Model):
    slug = models.SlugField(_("slug"), unique=True)
    name = models.CharField(_("name"), max_length=120)
    stack = models.CharField(_("built for"), max_length=16, choices=STACK_CHOICES)
    image = models.CharField(_("image reference"), max_length=200, blank=True,
                             help_text=_("The container image, as the host's runtime lists it (e.g. "
                                         "'registry.example.com/pytorch:2.5-cu124'). Fleet discovery checks that "
                                         "every host it would run on has it; a host without it is not sold."))
    cuda_version = models.CharField(
        _("CUDA version"), max_length=16, blank=True,
        help_text=_("The CUDA release the image is built with (e.g. 12.4), for a CUDA image: fleet discovery stops "
                    "selling a host whose NVIDIA driver is too old for it."))
    rocm_version = models.CharField(
        _("ROCm version"), max_length=16, blank=True,
        help_text=_("The ROCm release the image is built with (e.g. 6.3), for a ROCm image. Recorded for the "
                    "operator; the shop does not judge an AMD driver against it."))
    description = models.TextField(_("description"), blank=True)
    position = models.PositiveSmallIntegerField(_("position"), default=0)
    is_active = models.BooleanField(_("offered"), default=True)

    class Meta:
        ordering = ["position", "name"]
        verbose_name = _("software environment")
        verbose_name_plural = _("software environments")

    def __str__(self) -> str:
        return self.name

    def clean(self):
        for field in ("cuda_version", "rocm_version"):
            value = (getattr(self, field) or "").strip()
            setattr(self, field, value)
            if value and not re.fullmatch(r"\d+(\.\d+){0,2}", value):
                raise ValidationError({field: _("Write a release number such as 12.4.")})
        if self.cuda_version and self.stack == "rocm":
            raise ValidationError({"cuda_version": _("A ROCm environment has no CUDA version.")})
        if self.rocm_version and self.stack != "rocm":
            raise ValidationError({"rocm_version": _("Only a ROCm environment has a ROCm version.")})


class Option(models.Model):
    slug = models.SlugField(_("slug"), unique=True)
    name = models.CharField(_("name"), max_length=120)
    description = models.TextField(_("description"), blank=True)
    per_unit = models.BooleanField(_("priced per unit"), default=False,
                                   help_text=_("Charged once per card or lot, else once per order."))
    position = models.PositiveSmallIntegerField(_("position"), default=0)
    is_active = models.BooleanField(_("offered"), default=True)

    class Meta:
        ordering = ["position", "name"]
        verbose_name = _("option")
        verbose_name_plural = _("options")

    def __str__(self) -> str:
        return self.name


class PriceList(models.Model):
    """Prices the operator edits. The active list with the latest start applies."""

    name = models.CharField(_("name"), max_length=80)
    currency = models.CharField(_("currency"), max_length=3, default="USD",
                                help_text=_("ISO 4217 code, e.g. USD or EUR."))
    valid_from = models.DateTimeField(_("valid from"))
    is_active = models.BooleanField(_("active"), default=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["-valid_from", "-id"]
        verbose_name = _("price list")
        verbose_name_plural = _("price lists")

    def __str__(self) -> str:
        return f"{self.name} ({self.currency})"

    def clean(self):
        if self.currency and (len(self.currency) != 3 or not self.currency.isalpha()):
            raise ValidationError({"currency": _("Use a three-letter ISO 4217 code.")})
        self.currency = (self.currency or "").upper()


_money = dict(max_digits=12, decimal_places=4, validators=[MinValueValidator(Decimal("0"))])


class ProductRate(models.Model):
    price_list = models.ForeignKey(PriceList, on_delete=models.CASCADE, related_name="rates")
    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="+")
    rate_per_card_hour = models.DecimalField(_("rate per card-hour"), **_money)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["price_list", "product"], name="one_rate_per_product")]
        verbose_name = _("rate")

    def __str__(self) -> str:
        return _("%(product)s: %(rate)s per card-hour") % {"product": self.product, "rate": self.rate_per_card_hour}


class TermDiscount(models.Model):
    price_list = models.ForeignKey(PriceList, on_delete=models.CASCADE, related_name="discounts")
    term_days = models.PositiveSmallIntegerField(_("term"), choices=TERM_CHOICES)
    percent = models.DecimalField(_("discount %"), max_digits=5, decimal_places=2,
                                  validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("90"))])

    class Meta:
        constraints = [models.UniqueConstraint(fields=["price_list", "term_days"], name="one_discount_per_term")]
        verbose_name = _("term discount")

    def __str__(self) -> str:
        return _("%(term)s: %(percent)s %% off") % {"term": _term_label(self.term_days), "percent": self.percent}


class OptionPrice(models.Model):
    price_list = models.ForeignKey(PriceList, on_delete=models.CASCADE, related_name="option_prices")
    option = models.ForeignKey(Option, on_delete=models.PROTECT, related_name="+")
    term_days = models.PositiveSmallIntegerField(_("term"), choices=TERM_CHOICES)
    price = models.DecimalField(_("price for the term"), **_money)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["price_list", "option", "term_days"], name="one_option_price_per_term")
        ]
        verbose_name = _("option price")

    def __str__(self) -> str:
        return _("%(option)s, %(term)s: %(price)s") % {"option": self.option, "term": _term_label(self.term_days),
                                                        "price": self.price}
