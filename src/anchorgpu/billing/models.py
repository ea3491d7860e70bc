from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django_countries.fields import CountryField

from anchorgpu.payments.fields import BaseUnitsField

from .tax import Treatment

TREATMENT_CHOICES = [(Treatment.STANDARD.value, _("VAT charged")),
                     (Treatment.REVERSE_CHARGE.value, _("reverse charge")),
                     (Treatment.OUTSIDE_EU.value, _("outside the EU")),
                     (Treatment.NOT_REGISTERED.value, _("seller not registered for VAT"))]


class VatRate(models.Model):
    """The operator's VAT rate for customers in one country (``billing.tax`` says when it applies). Changing
    a rate changes no invoice already issued: each keeps the rate it was issued with."""

    country = CountryField(_("country"), unique=True)
    rate = models.DecimalField(_("VAT rate (%)"), max_digits=5, decimal_places=2,
                               validators=[MinValueValidator(0), MaxValueValidator(Decimal("99.99"))])
    note = models.CharField(_("note"), max_length=200, blank=True,
                            help_text=_("Where the rate comes from and since when, for the next person who checks "
                                        "it."))
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        ordering = ["country"]
        verbose_name = _("VAT rate")
        verbose_name_plural = _("VAT rates")

    def __str__(self) -> str:
        return f"{self.country.name}: {self.rate} %"


class DocumentSequence(models.Model):
    """The last number given per document kind and year. Taken under a row
    lock in the transaction that creates the document, so numbers have no gaps."""

    class Kind(models.TextChoices):
        INVOICE = "invoice", _("invoice")
        CREDIT_NOTE = "credit_note", _("credit note")

    kind = models.CharField(max_length=16, choices=Kind.choices)
    year = models.PositiveSmallIntegerField()
    last = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "year"], name="sequence_per_kind_year")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.year}: {self.last}"


class Invoice(models.Model):
    order = models.OneToOneField("orders.Order", on_delete=models.PROTECT, related_name="invoice")
    number = models.CharField(_("number"), max_length=20, unique=True)
    year = models.PositiveSmallIntegerField(_("year"))
    sequence = models.PositiveIntegerField(_("number in the year"))
    issued_at = models.DateTimeField(_("issued"))
    currency = models.CharField(_("currency"), max_length=3)
    total = models.DecimalField(_("total"), max_digits=14, decimal_places=2)
    # Who is billed, as given at checkout.
    name = models.CharField(_("name"), max_length=120)
    company = models.CharField(_("company"), max_length=120, blank=True)
    email = models.EmailField(_("email"))
    country = CountryField(_("country"))
    billing_address = models.TextField(_("billing address"), blank=True)
    vat_id = models.CharField(_("VAT id"), max_length=20, blank=True)
    business = models.BooleanField(_("business customer"), default=False)
    # The seller as the settings named it when the invoice was issued (``billing.seller``).
    seller = models.JSONField(_("seller"), default=dict, blank=True)
    # The VAT, decided at checkout (``billing.tax``) and computed once here; blank treatment: an invoice issued
    # before VAT was stated (its total is all there is).
    tax_treatment = models.CharField(_("VAT treatment"), max_length=16, blank=True,
                                     choices=TREATMENT_CHOICES)
    tax_rate = models.DecimalField(_("VAT rate (%)"), max_digits=5, decimal_places=2, default=0)
    tax_country = CountryField(_("VAT country"), blank=True)
    net_total = models.DecimalField(_("total excluding VAT"), max_digits=14, decimal_places=2, null=True,
                                    blank=True)
    tax_amount = models.DecimalField(_("VAT"), max_digits=14, decimal_places=2, default=0)
    # How it was settled.
    asset_symbol = models.CharField(_("asset"), max_length=12)
    network_name = models.CharField(_("network"), max_length=80)
    decimals = models.PositiveSmallIntegerField(_("decimal places"))
    crypto_amount = BaseUnitsField(_("amount received (base units)"))
    rate = models.DecimalField(_("rate"), max_digits=24, decimal_places=8)
    rate_source = models.CharField(_("rate source"), max_length=120)
    rate_at = models.DateTimeField(_("rate observed at"))

    class Meta:
        ordering = ["-year", "-sequence"]
        constraints = [models.UniqueConstraint(fields=["year", "sequence"], name="invoice_number_once")]
        verbose_name = _("invoice")
        verbose_name_plural = _("invoices")

    def __str__(self) -> str:
        return self.number


class InvoiceLine(models.Model):
    invoice = models.ForeignKey(Invoice, on_delete=models.CASCADE, related_name="lines")
    position = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=16)
    description = models.CharField(_("description"), max_length=200)
    quantity = models.PositiveIntegerField(_("quantity"))
    unit_price = models.DecimalField(_("unit price"), max_digits=20, decimal_places=8)
    amount = models.DecimalField(_("amount"), max_digits=20, decimal_places=8)
    net_amount = models.DecimalField(_("amount excluding VAT"), max_digits=20, decimal_places=2, null=True,
                                     blank=True)
    period_start = models.DateTimeField(_("from"), null=True, blank=True)
    period_end = models.DateTimeField(_("until"), null=True, blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["invoice", "position"], name="invoice_line_position")]

    def __str__(self) -> str:
        return f"{self.invoice} · {self.position}: {self.description}"


class CustomerReason(models.TextChoices):
    """What a credit note tells the customer, translated into their language when it is printed."""
    REFUND = "refund", _("Order refunded")
    CANCELLED = "cancelled", _("Order cancelled before the term")
    NOT_DELIVERED = "not_delivered", _("Service not delivered as ordered")
    FAULT = "fault", _("Credit for a fault during the term")
    GOODWILL = "goodwill", _("Goodwill credit")
    OTHER = "other", _("Other (in words below)")


class CreditNote(models.Model):
    """Money given back against an invoice: a refund or a cancellation."""

    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="credit_notes")
    refund = models.OneToOneField("payments.Refund", on_delete=models.PROTECT, null=True, blank=True,
                                  related_name="credit_note")
    number = models.CharField(_("number"), max_length=20, unique=True)
    year = models.PositiveSmallIntegerField(_("year"))
    sequence = models.PositiveIntegerField(_("number in the year"))
    issued_at = models.DateTimeField(_("issued"))
    currency = models.CharField(_("currency"), max_length=3)
    amount = models.DecimalField(_("amount credited"), max_digits=14, decimal_places=2)
    net_amount = models.DecimalField(_("credited excluding VAT"), max_digits=14, decimal_places=2, null=True,
                                     blank=True)
    tax_amount = models.DecimalField(_("VAT credited"), max_digits=14, decimal_places=2, default=0)
    # The operator's own note (audit, admin); never printed. The customer reads ``customer_reason``.
    reason = models.TextField(_("internal note"))
    customer_reason = models.CharField(_("reason for the customer"), max_length=24, blank=True,
                                       choices=CustomerReason.choices)
    customer_reason_text = models.CharField(_("reason for the customer, in words"), max_length=300, blank=True)

    class Meta:
        ordering = ["-year", "-sequence"]
        constraints = [
            models.UniqueConstraint(fields=["year", "sequence"], name="credit_note_number_once"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="credit_note_positive"),
        ]
        verbose_name = _("credit note")
        verbose_name_plural = _("credit notes")

    def __str__(self) -> str:
        return self.number

    def reason_for_customer(self) -> str:
        """The reason printed for the customer, in the active language: the fixed reason (translated), with the
        operator's words for the customer after it where given; blank for a note issued before there was one."""
        words = self.customer_reason_text.strip()
        if not self.customer_reason:
            return words
        if self.customer_reason == CustomerReason.OTHER:
            return words
        label = str(CustomerReason(self.customer_reason).label)
        return f"{label}: {words}" if words else label

    @property
    def shown_to_customer(self) -> bool:
        """A credit note for a refund is the customer's once the refund counts as sent (found on chain where
        the asset is watched)."""
        return self.refund is None or self.refund.shown_as_sent
