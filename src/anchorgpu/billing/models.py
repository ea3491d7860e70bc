from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django_countries.fields import CountryField

from anchorgpu.payments.fields import BaseUnitsField


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

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["invoice", "position"], name="invoice_line_position")]

    def __str__(self) -> str:
        return f"{self.invoice} · {self.position}: {self.description}"


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
    reason = models.TextField(_("reason"))

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

    @property
    def shown_to_customer(self) -> bool:
        """A credit note for a refund is the customer's once the refund counts as sent (found on chain where
        the asset is watched)."""
        return self.refund is None or self.refund.shown_as_sent
