import secrets
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy
from django_countries.fields import CountryField

from anchorgpu.allocation.models import Booking
from anchorgpu.catalog.models import Environment, Product

from . import webhook_urls
from .provisioning import Step
from .states import OrderState

STATE_LABELS = {
    OrderState.AWAITING_PAYMENT: pgettext_lazy("order state", "awaiting payment"),
    OrderState.PAYMENT_CLAIMED: pgettext_lazy("order state", "payment being checked"),
    OrderState.PAID: pgettext_lazy("order state", "paid"),
    OrderState.PROVISIONING: pgettext_lazy("order state", "preparing access"),
    OrderState.ACTIVE: pgettext_lazy("order state", "active"),
    OrderState.COMPLETED: pgettext_lazy("order state", "completed"),
    OrderState.EXPIRED: pgettext_lazy("order state", "expired"),
    OrderState.CANCELLED: pgettext_lazy("order state", "cancelled"),
    OrderState.UNDERPAID: pgettext_lazy("order state", "underpaid"),
    OrderState.PAID_LATE: pgettext_lazy("order state", "paid after expiry"),
    OrderState.REFUNDED: pgettext_lazy("order state", "refunded"),
    OrderState.FAILED: pgettext_lazy("order state", "failed"),
}
STATE_CHOICES = [(state.value, STATE_LABELS[state]) for state in OrderState]

# No 0/O or 1/I/L: references are read out over the phone and typed by hand.
_REFERENCE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"

PURPOSE_CHOICES = [("larger_batch", _("a larger global batch")), ("shorter_step", _("a shorter step time")),
                   ("make_possible", _("making the run possible at all")),
                   ("independent_experiments", _("several independent experiments"))]


def new_reference() -> str:
    return "AG-" + "".join(secrets.choice(_REFERENCE_ALPHABET) for _ in range(8))


class Order(models.Model):
    reference = models.CharField(_("reference"), max_length=16, unique=True, default=new_reference)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="orders")
    state = models.CharField(_("state"), max_length=20, choices=STATE_CHOICES,
                             default=OrderState.AWAITING_PAYMENT.value, db_index=True)
    language = models.CharField(_("language"), max_length=8, default="en")
    idempotency_key = models.CharField(_("idempotency key"), max_length=64, blank=True,
                                       help_text=_("Sent with the checkout; a repeated request returns this order."))

    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="+")
    quantity = models.PositiveIntegerField(_("units"))
    term_days = models.PositiveSmallIntegerField(_("term (days)"))
    start_asap = models.BooleanField(_("as soon as possible"), default=False)
    starts_at = models.DateTimeField(_("term starts"))
    ends_at = models.DateTimeField(_("term ends"))
    environment = models.ForeignKey(Environment, on_delete=models.PROTECT, related_name="+")
    option_slugs = models.JSONField(_("options"), default=list, blank=True)
    booking = models.OneToOneField(Booking, on_delete=models.PROTECT, null=True, blank=True, related_name="order")
    # An extension is an order of its own (its price, quote, payment and invoice) that lengthens the order it
    # ``extends`` on the same cards (``orders.extensions``); once paid, its days are added to that order's term.
    extends = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="extensions",
                                verbose_name=_("extends order"))
    extended_days = models.PositiveSmallIntegerField(_("days added by extensions"), default=0,
                                                     help_text=_("The term runs for its days plus these."))

    currency = models.CharField(_("currency"), max_length=3)
    lines = models.JSONField(_("price lines"), default=list)
    fiat_total = models.DecimalField(_("total"), max_digits=14, decimal_places=2)

    # What the customer rents for (the planner's purposes), and the run plan the checkout showed, as it was then.
    purpose = models.CharField(_("purpose"), max_length=32, blank=True, choices=PURPOSE_CHOICES)
    run_plan = models.JSONField(_("run plan at checkout"), default=dict, blank=True)
    name = models.CharField(_("name"), max_length=120)
    email = models.EmailField(_("email"))
    company = models.CharField(_("company"), max_length=120, blank=True)
    country = CountryField(_("country"))
    billing_address = models.TextField(_("billing address"), max_length=500, blank=True)
    vat_id = models.CharField(_("VAT id"), max_length=20, blank=True)
    business = models.BooleanField(_("business customer"), default=False)
    # The VAT treatment decided at checkout under the operator's rules (``billing.tax.Decision.as_data``); the
    # invoice computes its VAT from it. Empty: an order placed before VAT was decided at checkout.
    tax = models.JSONField(_("VAT treatment"), default=dict, blank=True)

    claimed_txid = models.CharField(_("transaction id given by the customer"), max_length=80, blank=True)
    claimed_at = models.DateTimeField(_("“I've paid” pressed"), null=True, blank=True)
    paid_at = models.DateTimeField(_("paid"), null=True, blank=True)
    excess = models.JSONField(_("owed back"), default=dict, blank=True,
                              help_text=_("Base units received that the order does not keep, to be refunded."))
    refund_due = models.BooleanField(_("refund due"), default=False)
    refund_address = models.CharField(_("refund address given by the customer"), max_length=100, blank=True)
    refund_asset = models.ForeignKey(
        "payments.Asset", on_delete=models.PROTECT, null=True, blank=True, related_name="+",
        verbose_name=_("refund network chosen by the customer"),
        help_text=_("The same coin as the quote on the network the customer wants the refund on; empty: the "
                    "quote's network."))

    provisioner = models.CharField(_("provisioner"), max_length=40, blank=True)
    access_host = models.CharField(_("SSH host"), max_length=200, blank=True)
    access_port = models.PositiveIntegerField(_("SSH port"), null=True, blank=True)
    access_user = models.CharField(_("SSH user"), max_length=64, blank=True)
    provisioning_attempts = models.PositiveSmallIntegerField(_("failed provisioning attempts"), default=0)
    last_error = models.TextField(_("last provisioning error"), blank=True)
    # The two reminders before the term ends (24 hours and 1 hour before; ``lifecycle.terms_warn_due``), each sent
    # once per end: an extension moves the end and clears them.
    end_warned_at = models.DateTimeField(_("end-of-term warning sent"), null=True, blank=True)
    end_warned_hour_at = models.DateTimeField(_("last-hour warning sent"), null=True, blank=True)
    # The worker's claim on the one step (or wipe) under way for this order (``orders.step_lease``): who holds it,
    # which step, since when and until when. The step's remote work runs with no transaction open; the lease is
    # what keeps a second worker off it meanwhile.
    lease_owner = models.CharField(_("step held by"), max_length=120, blank=True,
                                   help_text=_("The worker running a step now: host name, process id, token."))
    lease_step = models.CharField(_("step under way"), max_length=32, blank=True)
    lease_started_at = models.DateTimeField(_("step started"), null=True, blank=True)
    lease_until = models.DateTimeField(_("step held until"), null=True, blank=True)
    retry_at = models.DateTimeField(_("next attempt not before"), null=True, blank=True,
                                    help_text=_("After a failed step or wipe, the back-off before the next try."))
    unreachable_attempts = models.PositiveSmallIntegerField(_("attempts that found the host unreachable"),
                                                            default=0)
    # Set when the term ends (or the order ends early): the machine is wiped by the worker after that
    # (``orders.wipes``), outside the term-end transaction; the ``wipe`` step row records it, with its proof.
    wipe_due_at = models.DateTimeField(_("wipe due"), null=True, blank=True)
    wipe_attempts = models.PositiveSmallIntegerField(_("failed wipe attempts"), default=0)
    # Set by the chain watcher when money it credited is no longer on chain (a reorganisation deeper than the
    # confirmations, or the deposit address holding less than was credited); cleared by an operator's decision.
    chain_alert = models.TextField(_("chain alert"), blank=True,
                                   help_text=_("What the chain watcher found wrong with a payment it had credited."))
    chain_alert_at = models.DateTimeField(_("chain alert raised"), null=True, blank=True)

    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["state", "created_at"], name="order_state_age"),
            models.Index(fields=["user", "-created_at"], name="order_by_user"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(ends_at__gt=models.F("starts_at")), name="order_term_not_empty"),
            models.CheckConstraint(condition=Q(quantity__gte=1), name="order_quantity_positive"),
            models.UniqueConstraint(fields=["user", "idempotency_key"], condition=~Q(idempotency_key=""),
                                    name="order_idempotency_key_once"),
        ]
        verbose_name = _("order")
        verbose_name_plural = _("orders")

    def __str__(self) -> str:
        return self.reference

    @property
    def order_state(self) -> OrderState:
        return OrderState(self.state)

    @property
    def state_label(self) -> str:
        if self.extends_id and self.order_state is OrderState.COMPLETED:
            return _("added to order %(reference)s") % {"reference": self.extends.reference}
        return STATE_LABELS[self.order_state]

    @property
    def cards(self) -> int:
        return self.quantity * self.product.cards_per_unit

    @property
    def total_days(self) -> int:
        """The term's length in days: as bought, plus the days of the extensions applied to it."""
        return self.term_days + self.extended_days

    @property
    def is_extension(self) -> bool:
        return self.extends_id is not None


class OrderKey(models.Model):
    """An SSH public key to install for the order, as parsed at checkout."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="ssh_keys")
    key_type = models.CharField(_("type"), max_length=64)
    fingerprint = models.CharField(_("fingerprint"), max_length=80)
    comment = models.CharField(_("comment"), max_length=200, blank=True)
    public_key = models.TextField(_("public key"))

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["order", "fingerprint"], name="order_key_once")]
        verbose_name = _("SSH key")
        verbose_name_plural = _("SSH keys")

    def __str__(self) -> str:
        return f"{self.key_type} {self.fingerprint}"


STEP_LABELS = {
    Step.ALLOCATE_DEVICES: _("Allocate the cards"),
    Step.PREPARE_ENVIRONMENT: _("Prepare the software environment"),
    Step.INSTALL_SSH_KEYS: _("Install your SSH keys"),
    Step.HEALTH_CHECK: _("Health check"),
    Step.DELIVER_ACCESS: _("Deliver access"),
}
STEP_CHOICES = [(step.value, STEP_LABELS[step]) for step in Step] + [("wipe", _("Wipe the disks"))]


class ProvisioningStep(models.Model):
    """A finished step of access preparation (or the wipe at the term's end).
    One row per order and step: a step is recorded once, when it finished."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="steps")
    step = models.CharField(_("step"), max_length=32, choices=STEP_CHOICES)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"))
    detail = models.JSONField(_("detail"), default=dict, blank=True)

    class Meta:
        ordering = ["finished_at", "id"]
        constraints = [models.UniqueConstraint(fields=["order", "step"], name="provisioning_step_once")]
        verbose_name = _("provisioning step")
        verbose_name_plural = _("provisioning steps")

    def __str__(self) -> str:
        return f"{self.order} · {self.step}"


class OrderEmail(models.Model):
    """An email to the customer about their order: written in the transaction that caused it (so it is never
    sent for a change that was rolled back, nor lost for one that committed) and sent by the worker
    (``notify.emails_send_due``), which tries again later when the mail server fails."""

    class Kind(models.TextChoices):
        ORDER_PLACED = "order_placed", _("payment details")
        STATE_CHANGED = "state_changed", _("order state changed")
        TERM_ENDING = "term_ending", _("term ending")
        TERM_ENDING_HOUR = "term_ending_hour", _("term ending within the hour")
        OPERATOR_ALERT = "operator_alert", _("alert to the operators")
        REFUND_SENT = "refund_sent", _("refund found on chain")
        MOVED = "moved", _("term moved to other cards")
        SERVICE_CREDIT = "service_credit", _("service credit issued")

    # None only for an alert to the operators about a host rather than an order (``operator_events``).
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="emails", null=True, blank=True)
    kind = models.CharField(_("kind"), max_length=20, choices=Kind.choices)
    event = models.ForeignKey("OperatorEvent", on_delete=models.CASCADE, null=True, blank=True,
                              related_name="emails", help_text=_("The event an alert to the operators is about."))
    state = models.CharField(_("state"), max_length=20, choices=STATE_CHOICES, blank=True,
                             help_text=_("The state the order moved to (state changes only)."))
    note = models.TextField(_("note"), blank=True,
                            help_text=_("What an alert to the operators is about, or what an operator tells the "
                                        "customer about a state change (why a claim was marked invalid)."))
    created_at = models.DateTimeField(_("queued"), auto_now_add=True)
    due_at = models.DateTimeField(_("next attempt"))
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    sent_at = models.DateTimeField(_("sent"), null=True, blank=True)
    failed_at = models.DateTimeField(_("given up"), null=True, blank=True)
    last_error = models.CharField(_("last error"), max_length=300, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["due_at"], name="order_email_due",
                                condition=Q(sent_at__isnull=True, failed_at__isnull=True))]
        verbose_name = _("customer email")
        verbose_name_plural = _("customer emails")

    def __str__(self) -> str:
        return f"{self.order or (self.event.subject if self.event_id else '?')} · {self.kind}"


class OperatorEvent(models.Model):
    """Something about an order that needs an operator (``orders.operator_events``): raised once per event
    (unique on order, kind and key) in the transaction of the change, and told by email and by the
    configured webhooks (``orders.webhooks``)."""

    class Kind(models.TextChoices):
        UNDERPAID = "order.underpaid", _("underpaid")
        PAID_LATE = "order.paid_late", _("paid after expiry, cards taken")
        WRONG_ASSET = "order.wrong_asset", _("paid in another coin, token or network")
        REORGED = "order.reorged", _("payment no longer on chain")
        REORG_RESOLVED = "order.reorg_resolved", _("payment back on chain")
        PROVISIONING_FAILED = "order.provisioning_failed", _("access preparation failed")
        REFUND_DUE = "order.refund_due", _("refund due")
        WIPE_FAILED = "order.wipe_failed", _("machine could not be wiped")
        HOST_REFUSED = "host.refused", _("host refused: taken off sale or needs a look")
        MAINTENANCE_CONFLICT = "order.maintenance_conflict", _("maintenance window cannot be honoured")

    uid = models.UUIDField(_("event id"), default=uuid.uuid4, unique=True, editable=False)
    # About an order, or (a host refused with no order concerned, e.g. found by fleet discovery) about a host only.
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="operator_events", null=True,
                              blank=True)
    host = models.ForeignKey("fleet.Host", on_delete=models.CASCADE, related_name="operator_events", null=True,
                             blank=True, help_text=_("The host the event is about, where there is one."))
    kind = models.CharField(_("kind"), max_length=40, choices=Kind.choices)
    key = models.CharField(_("key"), max_length=200,
                           help_text=_("What makes it this event (the same finding seen again is not raised)."))
    text = models.TextField(_("what happened"))
    payload = models.JSONField(_("payload"), default=dict)
    created_at = models.DateTimeField(_("raised"))

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["order", "kind", "key"], name="operator_event_once"),
            models.UniqueConstraint(fields=["host", "kind", "key"], condition=Q(order__isnull=True),
                                    name="host_event_once"),
            models.CheckConstraint(condition=Q(order__isnull=False) | Q(host__isnull=False),
                                   name="operator_event_about_something"),
        ]
        verbose_name = _("operator event")
        verbose_name_plural = _("operator events")

    def __str__(self) -> str:
        return f"{self.subject} · {self.kind}"

    @property
    def subject(self) -> str:
        """What the event is about, in a few words: the order's reference, else the host's name."""
        if self.order_id:
            return str(self.order)
        return f"host {self.host.name}" if self.host_id else "?"

    @property
    def event_id(self) -> str:
        return f"evt_{self.uid.hex}"


class WebhookDelivery(models.Model):
    """One operator event to one webhook URL: an outbox row the worker sends (``webhooks.webhooks_send_due``),
    signed, tried again with back-off on a failure or a non-2xx answer, given up after the last attempt."""

    event = models.ForeignKey(OperatorEvent, on_delete=models.CASCADE, related_name="deliveries")
    url = models.CharField(_("URL"), max_length=500)
    created_at = models.DateTimeField(_("queued"), auto_now_add=True)
    due_at = models.DateTimeField(_("next attempt"))
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    sent_at = models.DateTimeField(_("delivered"), null=True, blank=True)
    failed_at = models.DateTimeField(_("given up"), null=True, blank=True)
    last_status = models.PositiveSmallIntegerField(_("last HTTP status"), null=True, blank=True)
    last_error = models.CharField(_("last error"), max_length=300, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["due_at"], name="webhook_delivery_due",
                                condition=Q(sent_at__isnull=True, failed_at__isnull=True))]
        verbose_name = _("webhook delivery")
        verbose_name_plural = _("webhook deliveries")

    def __str__(self) -> str:
        return f"{self.event} → {self.shown_url}"

    @property
    def shown_url(self) -> str:
        return webhook_urls.shown_url(self.url)

    @property
    def status(self) -> str:
        if self.sent_at:
            return "delivered"
        return "given_up" if self.failed_at else "pending"


class Move(models.Model):
    """An order's term moved to other cards (``orders.moves.order_move``; the booking's part is
    ``allocation.moves.booking_move``). When access had been prepared on the old cards, the steps of that round
    are kept here (``previous_steps``), access is prepared again on the new cards, and the old cards are wiped by
    the worker (``orders.move_wipes``): no later term starts on them until that wipe is recorded here."""

    order = models.ForeignKey(Order, on_delete=models.PROTECT, related_name="moves")
    booking = models.ForeignKey(Booking, on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField(_("moved at"), help_text=_("From this moment the term runs on the new cards."))
    from_devices = models.JSONField(_("cards left"), default=list, help_text=_("Device ids."))
    to_devices = models.JSONField(_("cards taken"), default=list, help_text=_("Device ids."))
    from_hosts = models.CharField(_("from host(s)"), max_length=300)
    to_hosts = models.CharField(_("to host(s)"), max_length=300)
    reason = models.TextField(_("reason"))
    actor = models.CharField(_("moved by"), max_length=150)
    access_moved = models.BooleanField(_("access prepared again"), default=False,
                                       help_text=_("Access had been (partly) prepared on the old cards."))
    access_delivered = models.BooleanField(_("access had been delivered"), default=False)
    previous_steps = models.JSONField(_("steps on the old cards"), default=list, blank=True)
    wipe_due_at = models.DateTimeField(_("wipe of the old cards due"), null=True, blank=True)
    wiped_at = models.DateTimeField(_("old cards wiped"), null=True, blank=True)
    wipe_detail = models.JSONField(_("wipe proof"), default=dict, blank=True)
    wipe_attempts = models.PositiveSmallIntegerField(_("failed wipe attempts"), default=0)
    wipe_retry_at = models.DateTimeField(_("next wipe attempt not before"), null=True, blank=True)
    wipe_error = models.TextField(_("last wipe error"), blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["wipe_due_at"], name="move_wipe_due",
                                condition=Q(wipe_due_at__isnull=False, wiped_at__isnull=True))]
        verbose_name = _("move")
        verbose_name_plural = _("moves")

    def __str__(self) -> str:
        return f"{self.order} · {self.from_hosts} → {self.to_hosts} ({self.at:%Y-%m-%d %H:%M})"

    @property
    def wipe_pending(self) -> bool:
        return self.wipe_due_at is not None and self.wiped_at is None
