"""Order use cases: place an order (hold + quote in one transaction), cancel
it. Payment use cases live in ``anchorgpu.payments.services``; access
preparation and the term lifecycle in ``fulfilment`` and ``lifecycle``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.allocation import services as allocation
from anchorgpu.allocation.errors import InvalidRequest, NoLongerAvailable, NoStartFree
from anchorgpu.allocation.models import Booking
from anchorgpu.audit.services import audit_record
from anchorgpu.billing import tax
from anchorgpu.billing.selectors import tax_decision
from anchorgpu.catalog import pricing
from anchorgpu.catalog.models import Environment, Product
from anchorgpu.catalog.rules import RuleError, check_environment
from anchorgpu.catalog.selectors import NoPriceList, price_list_current
from anchorgpu.i18n import message
from anchorgpu.payments.models import Asset, PaymentSettings
from anchorgpu.payments.quotes import quote_create
from anchorgpu.planner.run_cost import per_million_tokens

from . import notify, rules
from .errors import InvalidOrder, NotAllowedNow, Unavailable
from .models import Order, OrderKey, new_reference
from .ssh_keys import PublicKey
from .states import OrderState
from .term_slide import placement_reach
from .transitions import order_lock, order_transition


@dataclass(frozen=True)
class Checkout:
    product: Product
    quantity: int
    term_days: int
    start: datetime | None  # None: as soon as possible
    environment: Environment
    asset: Asset
    name: str
    email: str
    country: str
    ssh_keys: list[PublicKey]
    options: list[str] = field(default_factory=list)
    company: str = ""
    billing_address: str = ""
    vat_id: str = ""
    business: bool = False  # bought for a business (with ``company``; a VAT id makes EU reverse charge possible)
    language: str = "en"
    idempotency_key: str = ""  # the same key from the same customer returns the first order
    purpose: str = ""  # what the rental is for (``Order.PURPOSE_CHOICES``), if the customer said
    run_plan: dict = field(default_factory=dict)  # the planner's figures for this configuration (``run_plan_for``)


def _lines(price: pricing.Price) -> list[dict]:
    return [{"kind": line.kind, "description": line.description, "quantity": line.quantity,
             "unit_price": str(line.unit_price), "amount": str(line.amount), "params": dict(line.params)}
            for line in price.lines]


def _run_plan(plan: dict, price: pricing.Price) -> dict:
    """The plan as kept on the order, with the cost per million training tokens of the order's own total."""
    if not plan or not plan.get("tokens"):
        return {}
    return {**plan, "total": str(price.total), "currency": price.currency,
            "cost_per_million_tokens": str(per_million_tokens(price.total, int(plan["tokens"]), price.currency))}


def _check(request: Checkout, now: datetime) -> pricing.Price:
    product = request.product
    if not product.is_active:
        raise InvalidOrder(_("%(product)s is not on sale.") % {"product": product.name})
    if not request.environment.is_active:
        raise InvalidOrder(_("That software environment is no longer offered."))
    if not request.asset.is_active:
        raise InvalidOrder(_("That payment asset is no longer accepted."))
    if not request.ssh_keys:
        raise InvalidOrder(_("Give at least one SSH public key."))
    try:
        check_environment(product.name, product.stack, request.environment.name, request.environment.stack)
        prices = price_list_current(at=now)
        return pricing.price(prices, product=product.slug, product_name=product.name,
                             cards_per_unit=product.cards_per_unit, quantity=request.quantity,
                             term_days=request.term_days, options=request.options)
    except NoPriceList:
        raise Unavailable(_("The shop has no prices set right now; please try again later."),
                          code="no_prices") from None
    except RuleError as exc:
        raise InvalidOrder(message(exc)) from None


def _tax(request: Checkout) -> dict:
    """The VAT treatment of this customer under the operator's rules now, or the order is refused."""
    vat_id = tax.normalise_vat_id(request.vat_id)
    problem = tax.customer_problem(country=request.country, business=request.business, company=request.company,
                                   vat_id=vat_id)
    if problem is not None:
        raise InvalidOrder(message(problem[1]), code="bad_" + problem[0])
    try:
        return tax_decision(country=request.country, business=request.business, vat_id=vat_id).as_data()
    except tax.TaxError as exc:
        raise InvalidOrder(_("We cannot take orders billed to this country yet (%(reason)s). Please write to us.")
                           % {"reason": message(exc)}, code="vat_not_set_up") from None


def order_place(*, user, request: Checkout, now: datetime | None = None) -> Order:
    """Hold the cards for the term, record the order and its quote: all in one
    transaction, so a failure anywhere leaves nothing behind."""
    now = (now or timezone.now()).replace(microsecond=0)
    key = request.idempotency_key.strip()
    if len(key) > 64:
        raise InvalidOrder(_("The idempotency key is at most 64 characters."), code="invalid")
    if key:
        earlier = Order.objects.filter(user=user, idempotency_key=key).first()
        if earlier is not None:
            return earlier  # a repeated submission (double click, retried request)
    price = _check(request, now)
    tax_data = _tax(request)
    actor = user.get_username()
    reference = new_reference()
    payment = PaymentSettings.current()
    try:
        with transaction.atomic():
            # No start: the earliest one, searched in the product's turn (an order for "as soon as possible"
            # is not refused because a concurrent one took the start it would have found a moment before).
            # An as-soon-as-possible term starts when access is ready: its cards are held past the term for
            # the payment window and access preparation, and the term slides inside that (``term_slide``).
            booking = allocation.hold_place(product=request.product, quantity=request.quantity, start=request.start,
                                            term_days=request.term_days, actor=actor, reference=reference,
                                            hold_minutes=payment.quote_minutes, now=now,
                                            reach=placement_reach(payment) if request.start is None else timedelta(0))
            order = Order.objects.create(
                reference=reference, user=user, language=request.language, product=request.product,
                quantity=request.quantity, term_days=request.term_days, start_asap=request.start is None,
                starts_at=booking.starts_at, ends_at=booking.starts_at + timedelta(days=request.term_days),
                environment=request.environment,
                option_slugs=list(request.options), booking=booking, currency=price.currency,
                lines=_lines(price), fiat_total=price.total, name=request.name, email=request.email,
                company=request.company, country=request.country, billing_address=request.billing_address,
                vat_id=tax.normalise_vat_id(request.vat_id), business=request.business, tax=tax_data,
                idempotency_key=key, purpose=request.purpose,
                run_plan=_run_plan(request.run_plan, price))
            OrderKey.objects.bulk_create([
                OrderKey(order=order, key_type=key.type, fingerprint=key.fingerprint, comment=key.comment,
                         public_key=key.line) for key in request.ssh_keys])
            audit_record(actor=actor, action="order_place", obj=order, to_state=order.state,
                         data={"product": request.product.slug, "quantity": request.quantity,
                               "term_days": request.term_days, "total": str(price.total),
                               "currency": price.currency, "booking": booking.pk})
            quote_create(order=order, asset=request.asset, now=now, actor=actor, settings=payment)
            notify.order_placed(order.pk)
    except IntegrityError:
        earlier = Order.objects.filter(user=user, idempotency_key=key).first() if key else None
        if earlier is None:
            raise
        return earlier  # the same request, sent twice at once: the other one won
    except NoStartFree:
        raise Unavailable(_("No start within the booking horizon has %(count)d unit(s) of %(product)s free "
                            "for the whole term.") % {"count": request.quantity, "product": request.product.name},
                          code="unavailable") from None
    except NoLongerAvailable:
        if request.start is None:  # every attempt met a conflict: rare, and another try will do
            raise Unavailable(_("Many orders for the same cards came in at the same moment, and this one could not "
                                "be placed. Nothing was charged; please try again."), code="busy") from None
        raise Unavailable(_("Someone else has just taken the last free unit(s) for that start. Choose another "
                            "start or quantity; nothing was charged."), code="taken") from None
    except InvalidRequest as exc:
        raise InvalidOrder(message(exc)) from None
    return order


def order_cancel(*, order: Order, actor: str, reason: str = "") -> Order:
    """The customer (or an operator) cancels an order that is not paid yet;
    its hold is released at once so the cards are free for others."""
    with transaction.atomic():
        locked = order_lock(order)
        refusal = rules.cancel_refusal(locked.order_state, transfer_recorded=locked.transfers.exists())
        if refusal == rules.CANCEL_WRONG_STATE:
            raise NotAllowedNow(_("Only an order still awaiting payment can be cancelled here; for a paid order, "
                                  "ask us for a refund."))
        if refusal == rules.CANCEL_TRANSFER_RECORDED:
            raise NotAllowedNow(_("A transfer has already been recorded for this order; ask us for a refund "
                                  "instead."))
        booking = locked.booking
        if booking is not None and booking.state == Booking.State.LIVE:
            allocation.booking_release(booking=booking, actor=actor, reason=reason or "order cancelled", for_order=True)
        order_transition(order=locked, to=OrderState.CANCELLED, actor=actor, reason=reason or "cancelled")
    return locked
