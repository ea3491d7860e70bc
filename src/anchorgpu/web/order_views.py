"""Checkout and the customer's own orders. Views validate with forms and call
services; they hold no rules. Another customer's order is a 404, never a 403:
the shop does not confirm that an order reference exists."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from anchorgpu.accounts.saved_keys import saved_keys_keep
from anchorgpu.billing.words import order_vat_note
from anchorgpu.catalog import offers as offers_selector
from anchorgpu.catalog.models import Product
from anchorgpu.catalog.rules import MAX_QUANTITY, TERM_DAYS
from anchorgpu.ops.ratelimit import RateLimited, rate_take
from anchorgpu.orders.errors import OrderError
from anchorgpu.orders.extension_options import extension_options, refusal_text
from anchorgpu.orders.extensions import order_extend as extension_place
from anchorgpu.orders.models import Order
from anchorgpu.orders.move_page import moves_for_page
from anchorgpu.orders.selectors import order_for_customer, order_page, orders_for_customer
from anchorgpu.orders.services import order_cancel
from anchorgpu.payments.claim_check import claim_check_after_claim, describe, latest_claim_check
from anchorgpu.payments.models import ClaimCheck
from anchorgpu.payments.refund_networks import customer_network, refund_networks
from anchorgpu.payments.services import payment_claim, payment_status, refund_address_set
from anchorgpu.payments.uri import carries_amount, payment_uri, qr_svg
from anchorgpu.planner_pages.run_plans import plan_at_checkout

from . import checkout_price, checkout_refusals, order_extend, order_forms, timeline
from .checkout_form import CheckoutForm
from .forms import checked_start
from .order_extend import extend_facts
from .order_limits import order_place_limited
from .order_term import term_facts
from .payment_next import payment_next

_ERROR_STATUS = {"invalid": 400, "conflict": 409, "unavailable": 409, "taken": 409, "vat_not_set_up": 400,
                 "bad_vat_id": 400, "bad_company": 400}


def _own_order(request, reference: str) -> Order:
    order = order_for_customer(user=request.user, reference=reference)
    if order is None:
        raise Http404("no such order")
    return order


def _initial(request, product: Product, query=None) -> dict:
    query = request.GET if query is None else query
    initial = {"email": request.user.email, "name": request.user.get_full_name(),
               "submission": f"web-{uuid.uuid4().hex}"}
    for key in ("quantity", "term", "environment", "purpose"):
        if query.get(key):
            initial[key] = query.get(key)[:50]
    if query.get("start"):
        initial.update(start_mode="date", start=query.get("start")[:40])
    if query.get("plan"):
        initial["plan"] = query.get("plan")[:8000]
    if query.getlist("options"):
        initial["options"] = [slug[:50] for value in query.getlist("options") for slug in value.split(",")][:10]
    last = Order.objects.filter(user=request.user).order_by("-created_at").first()
    if last is not None:  # the customer's details from their previous order
        initial.update(name=last.name, company=last.company, country=last.country.code,
                       billing_address=last.billing_address, vat_id=last.vat_id)
    return initial


def _preview(form: CheckoutForm, product: Product):
    """The availability and price of what the form holds so far (for the page)."""
    data = form.cleaned_data if form.is_bound and hasattr(form, "cleaned_data") else {}
    quantity = data.get("quantity") or form.initial.get("quantity") or 1
    term = data.get("term") or form.initial.get("term") or 7
    try:
        quantity, term = int(quantity), int(term)
    except (TypeError, ValueError, OverflowError):
        return None
    if term not in TERM_DAYS or not 1 <= quantity <= MAX_QUANTITY:
        return None  # the form says what is wrong; no preview for it
    options = [o.slug for o in data.get("options") or []]
    return offers_selector.offer_for(product, term_days=term, quantity=quantity, not_before=data.get("start"),
                                     options=options)


def _start_shown(form: CheckoutForm):
    """The dated start the form holds (sent, or carried by the link), for the term's dates; None for ASAP."""
    if form.is_bound:
        data = getattr(form, "cleaned_data", {})
        return data.get("start") if data.get("start_mode") == "date" and "start" not in form.errors else None
    if form.initial.get("start_mode") != "date":
        return None
    try:  # the same checks as a sent form: a start past the horizon (or the calendar's end) shows no dates
        return checked_start(form.fields["start"].clean(form.initial.get("start")), past="")
    except ValidationError:
        return None


def _options_shown(form: CheckoutForm) -> list[str]:
    if form.is_bound:
        return [o.slug for o in getattr(form, "cleaned_data", {}).get("options") or []]
    return list(form.initial.get("options") or [])


def _plan_shown(form: CheckoutForm, product: Product, offer) -> dict | None:
    """The run plan the customer came with, at the price shown: the cost per million training tokens."""
    token = form.data.get("plan") if form.is_bound else form.initial.get("plan")
    if not token:
        return None
    price = offer.price_for_term if offer is not None else None
    quantity = offer.quantity if offer is not None else form.initial.get("quantity")
    try:
        quantity = int(quantity or 1)
    except (TypeError, ValueError):
        return None
    return plan_at_checkout(token, slug=product.slug, quantity=quantity, total=price.total if price else None,
                            currency=price.currency if price else "")


@checkout_refusals.guest_to_login
def checkout(request, slug: str):
    """The form, and the order it places. Only an order created counts toward the order limit; past it the
    page comes back with everything typed (429). The form's own submission key makes a repeated press (or a
    retry after an error page) return the order it already placed."""
    product = Product.objects.filter(slug=slug, is_active=True).first()
    if product is None:
        raise Http404("no such product")
    status, retry_after = 200, None
    if request.method == "POST":
        form = CheckoutForm(request.POST, product=product, user=request.user)
        if form.is_valid():
            try:
                order = order_place_limited(
                    request=request, user=request.user,
                    checkout=form.checkout(language=translation.get_language() or "en"))
            except OrderError as exc:
                form.add_error(None, exc.message)
                status = _ERROR_STATUS.get(exc.code, 409)
            except RateLimited as exc:
                minutes = max(1, -(-exc.retry_after // 60))
                form.refusal = (ngettext(
                    "You have placed as many orders as the shop takes from one account (or IP address) in a short "
                    "time. Nothing was ordered this time; what you typed is kept: press the button again in "
                    "%(minutes)d minute.",
                    "You have placed as many orders as the shop takes from one account (or IP address) in a short "
                    "time. Nothing was ordered this time; what you typed is kept: press the button again in "
                    "%(minutes)d minutes.", minutes) % {"minutes": minutes})
                status, retry_after = 429, exc.retry_after
            else:
                saved_keys_keep(user=request.user, keys=form.keys_to_save())
                return redirect("order", reference=order.reference)
        else:
            status = 400
    else:
        form = CheckoutForm(initial=_initial(request, product), product=product, user=request.user)
    return _checkout_page(request, form, product, status=status, retry_after=retry_after)


def _checkout_page(request, form: CheckoutForm, product: Product, *, status: int, retry_after: int | None = None):
    offer = _preview(form, product)
    context = {"form": form, "product": product, "offer": offer, "plan": _plan_shown(form, product, offer)}
    context.update(checkout_price.summary(offer, start=_start_shown(form), chosen=_options_shown(form)))
    response = render(request, "web/checkout.html", context, status=status)
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def checkout_again(request, *, slug: str, query, status: int, error: str):
    """A fresh checkout (a new CSRF token) with the choice in ``query`` and ``error`` on top: for a form that
    could not be read as sent (web.checkout_csrf.csrf_failure)."""
    product = Product.objects.filter(slug=slug, is_active=True).first()
    if product is None:
        raise Http404("no such product")
    form = CheckoutForm(initial=_initial(request, product, query), product=product, user=request.user)
    form.refusal = error
    return _checkout_page(request, form, product, status=status)


def _checkout_database_down(request):
    """The 503 of a checkout sent while the database was unreachable (ops.dbdown): the form again, bound to
    what was sent, when the database answers for the page; raises (the plain 503 page then) when it does not."""
    product = Product.objects.filter(slug=request.resolver_match.kwargs.get("slug"), is_active=True).first()
    if product is None or not request.user.is_authenticated:
        return None
    form = CheckoutForm(request.POST, product=product, user=request.user)
    form.is_valid()
    form.refusal = _("Our database could not be reached just now, so we cannot tell whether what you sent was "
                     "saved: it may have been. What you typed is kept below: in a few seconds, press the same "
                     "button again. A form sent twice places one order, and you then see the order it placed. "
                     "Or look at your orders first.")
    form.refusal_link = True
    return _checkout_page(request, form, product, status=503)


checkout.on_database_down = _checkout_database_down


@login_required
def order_list(request):
    return render(request, "web/orders.html", {"orders": orders_for_customer(user=request.user)})


# Outcomes of a hash check that are not a refusal: found, waiting, or not checked by machine.
_CLAIM_HOPEFUL = (ClaimCheck.Outcome.FOUND, ClaimCheck.Outcome.PENDING, ClaimCheck.Outcome.UNAVAILABLE,
                  ClaimCheck.Outcome.NOT_WATCHED)


def _detail_context(request, order: Order, **extra) -> dict:
    quote = getattr(order, "quote", None)
    evaluation = payment_status(order) if quote else None
    claim_check = latest_claim_check(order) if quote else None
    claim_refused = claim_check is not None and claim_check.outcome not in _CLAIM_HOPEFUL
    now = timezone.now()
    page = order_page(order, evaluation=evaluation, claim_refused=claim_refused, now=now)
    pay_uri = ""
    if page.units_due:  # the amount still due (orders.rules.amount_due): for an underpaid order, what is missing
        pay_uri = payment_uri(scheme=quote.scheme, address=quote.address, amount=page.units_due,
                              decimals=quote.asset.decimals, chain_id=quote.asset.chain_id,
                              contract=quote.asset.contract)
    context = {
        "order": order,
        "page": page,  # what the page shows, decided by the order rules
        "quote": quote,
        "qr_svg": qr_svg(pay_uri) if pay_uri else "",
        "pay_uri": pay_uri,
        "qr_has_amount": bool(quote) and carries_amount(quote.scheme),  # TRON: the address only (payments.uri)
        "demo_keys": bool(quote) and getattr(settings, "ANCHORGPU_ALLOW_TEST_KEYS", False),
        "pay_units": page.units_due,  # what to send now, in base units (the templates format it)
        "evaluation": evaluation,
        "timeline": timeline.for_order(order),
        "now": now,
        "keys": order.ssh_keys.all(),
        "steps": {s.step: s for s in order.steps.all()},
        "invoice": getattr(order, "invoice", None),
        "vat_note": order_vat_note(order),
        "simulated": "simulated" in (order.provisioner or getattr(settings, "ANCHORGPU_PROVISIONER", "")).lower(),
        "claim_form": order_forms.ClaimForm(chain=quote.asset.chain if quote else "btc"),
        "claim_check": claim_check,
        "claim_refused": claim_refused,
        "claim_text": describe(claim_check, quote.asset) if claim_check else "",
        "refund_form": _refund_form(order, quote),
        "refund_network": customer_network(order) if quote else None,
        "moves": moves_for_page(order),
    }
    context.update(payment_next(order, quote, now=context["now"]))
    context.update(term_facts(order, now=context["now"]))
    context.update(extend_facts(order, now=context["now"]))
    context.update(extra)
    context["wants_refund_address"] = page.wants_refund_address or context["refund_form"].is_bound
    return context


@login_required
def order_detail(request, reference: str):
    order = _own_order(request, reference)
    return render(request, "web/order.html", _detail_context(request, order))


@login_required
def order_status(request, reference: str):
    """The live part of the order page (state, payment, timeline), for polling."""
    order = _own_order(request, reference)
    return render(request, "web/_order_live.html", _detail_context(request, order))


@login_required
@require_POST
def order_claim_payment(request, reference: str):
    order = _own_order(request, reference)
    chain = order.quote.asset.chain
    try:
        rate_take(request, "claim", user=request.user)
    except RateLimited as exc:  # the order page again, with the transaction id typed
        minutes = max(1, -(-exc.retry_after // 60))
        messages.error(request, ngettext(
            "To protect your account and the shop, this was refused. Try again in %(minutes)s minute.",
            "To protect your account and the shop, this was refused. Try again in %(minutes)s minutes.", minutes)
            % {"minutes": minutes})
        typed = order_forms.ClaimForm(initial={"txid": request.POST.get("txid", "")[:100]}, chain=chain)
        response = render(request, "web/order.html", _detail_context(request, order, claim_form=typed), status=429)
        response["Retry-After"] = str(exc.retry_after)
        return response
    form = order_forms.ClaimForm(request.POST, chain=chain)
    if form.is_valid():
        try:
            order = payment_claim(order=order, actor=request.user.get_username(), txid=form.cleaned_data["txid"])
        except OrderError as exc:
            messages.error(request, exc.message)  # the form may not be on the page in this state
            order.refresh_from_db()
            return render(request, "web/order.html", _detail_context(request, order), status=409)
        else:
            check = claim_check_after_claim(order) if order.claimed_txid else None
            if check is None or check.outcome in _CLAIM_HOPEFUL:
                messages.success(request, _("Thank you. We are checking your transfer; this page shows when it is "
                                            "confirmed."))
            return redirect("order", reference=order.reference)
    order.refresh_from_db()
    return render(request, "web/order.html", _detail_context(request, order, claim_form=form), status=400)


def _refund_form(order, quote) -> order_forms.RefundAddressForm:
    """The refund-address form, its network preset to the customer's choice (the quote's until they choose)."""
    if quote is None:
        return order_forms.RefundAddressForm(initial={"address": order.refund_address})
    return order_forms.RefundAddressForm(initial={"address": order.refund_address,
                                                  "network": customer_network(order).code},
                                         networks=refund_networks(quote))


@login_required
@require_POST
def order_refund_address(request, reference: str):
    order = _own_order(request, reference)
    quote = getattr(order, "quote", None)
    form = order_forms.RefundAddressForm(request.POST, networks=refund_networks(quote) if quote else ())
    if form.is_valid():
        try:
            refund_address_set(order=order, actor=request.user.get_username(), address=form.cleaned_data["address"],
                               asset=form.cleaned_data.get("network"))
        except OrderError as exc:
            form.add_error("address", exc.message)
        else:
            messages.success(request, _("Refund address saved."))
            return redirect("order", reference=order.reference)
    return render(request, "web/order.html", _detail_context(request, order, refund_form=form), status=400)


@login_required
@require_POST
def order_cancel_view(request, reference: str):
    order = _own_order(request, reference)
    try:
        order_cancel(order=order, actor=request.user.get_username(), reason="cancelled by the customer")
    except OrderError as exc:
        messages.error(request, exc.message)
        return render(request, "web/order.html", _detail_context(request, order), status=409)
    messages.success(request, _("The order is cancelled and the cards are released."))
    return redirect("order", reference=order.reference)


@login_required
@require_POST
def order_extend_view(request, reference: str):
    order = _own_order(request, reference)
    found = extension_options(order)
    if not found.possible:
        messages.error(request, refusal_text(found))
        return render(request, "web/order.html", _detail_context(request, order), status=409)
    form = order_extend.ExtendForm(request.POST, choices=[(d, str(d)) for d in found.days])
    if form.is_valid():
        try:
            extension = extension_place(order=order, days=form.cleaned_data["days"],
                                        asset=form.cleaned_data["asset"], actor=request.user.get_username())
        except OrderError as exc:
            messages.error(request, exc.message)
            order.refresh_from_db()
            return render(request, "web/order.html", _detail_context(request, order), status=409)
        messages.success(request, _("The cards are held for your extension. Pay it here to add the days to order "
                                    "%(reference)s.") % {"reference": order.reference})
        return redirect("order", reference=extension.reference)
    for error in form.errors.values():
        messages.error(request, " ".join(error))
    return render(request, "web/order.html", _detail_context(request, order), status=400)
