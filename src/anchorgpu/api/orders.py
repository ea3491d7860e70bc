"""The customer's orders: list, place (with an Idempotency-Key), read, "I've paid", cancel.

Customers authenticate with a bearer token (``auth``). An order of another customer is a 404, as on the
pages. The bodies are validated by their Schemas, then by the checkout page's forms; the views call the same
services and hold no rules."""

from __future__ import annotations

import re
from dataclasses import replace

from django.db import IntegrityError, transaction
from django.http import HttpResponse
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _
from ninja import Router, Status

from anchorgpu.ops.ratelimit import rate_take
from anchorgpu.orders.models import Order
from anchorgpu.orders.selectors import order_for_customer
from anchorgpu.orders.services import order_cancel
from anchorgpu.payments.claim_check import claim_check_after_claim
from anchorgpu.payments.services import payment_claim
from anchorgpu.web.checkout_form import CheckoutForm
from anchorgpu.web.order_forms import ClaimForm
from anchorgpu.web.order_limits import order_place_limited

from . import answers
from . import schemas as s
from .auth import ApiToken, no_query
from .body import OPTIONAL_BODY, BodyError, fingerprint, form_data
from .catalog import body_product
from .models import ApiIdempotency
from .openapi_parts import errors
from .responses import api_error, form_error

router = Router()

# 60, not 64: the service stores it with an "api-" prefix in a 64-character column.
KEY_MAX = 60
KEY_PATTERN = f"^[!-~]{{1,{KEY_MAX}}}$"  # visible ASCII, no spaces
_IDEMPOTENCY_KEY = re.compile(KEY_PATTERN)
_REFERENCE_PATTERN = "^[A-Za-z0-9-]{1,20}$"
_REFERENCE = re.compile(_REFERENCE_PATTERN)
# A reference that is not of this shape is a 404 like any unknown one, so the path parameter is documented
# with it but not refused by it.
_REFERENCE_DOC = {"name": "reference", "in": "path", "required": True, "description": "The order reference, e.g. AG-…",
                  "schema": {"type": "string", "minLength": 1, "maxLength": 20, "pattern": "^[A-Za-z0-9-]+$"}}
_KEY_DOC = {"name": "Idempotency-Key", "in": "header", "required": True,
            "schema": {"type": "string", "minLength": 1, "maxLength": KEY_MAX, "pattern": "^[!-~]+$"},
            "description": "Your id for this order, e.g. a UUID. The same key with the same body returns the same "
                           "order; with another body it is refused."}
_LOCATION = {"Location": {"schema": {"type": "string"}}}


def _own_order(request, reference: str) -> Order:
    order = order_for_customer(user=request.api_user, reference=reference) if _REFERENCE.match(reference) else None
    if order is None:
        raise BodyError(api_error(404, "not_found", _("You have no order with that reference.")))
    return order


# What each operation checks once the token is good and before its body is read ---------------------------

def _before_list(request):
    no_query(request)


def _before_create(request):
    key = request.headers.get("Idempotency-Key", "")
    if not key:
        raise BodyError(api_error(400, "idempotency_key_required", _(
            "Send an Idempotency-Key header (1 to %(most)d characters, e.g. a UUID) so that a retried request "
            "never makes two orders.") % {"most": KEY_MAX}))
    if not _IDEMPOTENCY_KEY.match(key):
        raise BodyError(api_error(400, "idempotency_key_invalid", _(
            "The Idempotency-Key is 1 to %(most)d visible ASCII characters, without spaces.") % {"most": KEY_MAX}))
    no_query(request)


def _before_detail(request, reference):
    request.api_order = _own_order(request, reference)
    no_query(request)


def _before_paid(request, reference):
    request.api_order = _own_order(request, reference)
    rate_take(request, "claim", user=request.api_user)
    no_query(request)
    setattr(request, OPTIONAL_BODY, True)


def _before_cancel(request, reference):
    request.api_order = _own_order(request, reference)
    no_query(request)
    setattr(request, OPTIONAL_BODY, True)


# Operations -------------------------------------------------------------------------------------------------

@router.get("/orders", url_name="api-orders", operation_id="listOrders", auth=ApiToken(_before_list),
            summary="Your orders, newest first (at most 100).", response={200: s.OrderList, **errors(400, 401)})
def order_list(request):
    found = (Order.objects.filter(user=request.api_user).select_related("product").order_by("-created_at")[:100])
    return s.OrderList(orders=[answers.order_summary(o) for o in found])


@router.post("/orders", url_name="api-orders", operation_id="createOrder", auth=ApiToken(_before_create),
             summary="Place an order: holds the cards and makes the payment quote.",
             response={201: s.Order, 200: s.Order, **errors(400, 401, 409, 413, 415, 422, 429)},
             openapi_extra={"parameters": [_KEY_DOC], "responses": {
                 201: {"description": "The order was made.", "headers": _LOCATION},
                 200: {"description": "A replay: this key was used before with the same body; the same order.",
                         "headers": {"Idempotent-Replayed": {"schema": {"type": "string", "enum": ["true"]}},
                                     **_LOCATION}}}})
def order_create(request, payload: s.OrderRequest, response: HttpResponse):
    key = request.headers["Idempotency-Key"]
    print_ = fingerprint(request.api_json)
    user = request.api_user
    earlier = ApiIdempotency.objects.filter(user=user, key=key).select_related("order").first()
    if earlier is not None:
        return _replay(earlier, print_, response)
    product = body_product(payload)
    data = form_data(payload)
    data.pop("product", None)
    data["start_mode"] = "date" if data.get("start") else "asap"
    form = CheckoutForm(data, product=product, user=user)
    if not form.is_valid():
        return form_error(form)
    checkout = replace(form.checkout(language=translation.get_language() or "en"), idempotency_key=f"api-{key}")
    with transaction.atomic():
        try:
            with transaction.atomic():  # taken first: a concurrent retry waits here, then replays
                record = ApiIdempotency.objects.create(user=user, key=key, fingerprint=print_)
        except IntegrityError:
            record = None
        if record is not None:  # counted if it creates the order; refused (all rolled back) past the limit
            order = order_place_limited(request=request, user=user, checkout=checkout)
            record.order = order
            record.save(update_fields=["order"])
    if record is None:
        return _replay(ApiIdempotency.objects.select_related("order").get(user=user, key=key), print_, response)
    answer = order_answer(order)
    response["Location"] = reverse("api-order", kwargs={"reference": order.reference})
    return Status(201, answer)


def _replay(record: ApiIdempotency, print_: str, response: HttpResponse):
    if record.fingerprint != print_:
        return api_error(422, "idempotency_key_reused", _("This Idempotency-Key was already used with a different "
                                                          "request body. Use a new key for a new order."))
    if record.order is None:  # only while the first request is still being written
        return api_error(409, "idempotency_key_in_use", _("A request with this Idempotency-Key is still being "
                                                          "processed; try again in a moment."))
    response["Idempotent-Replayed"] = "true"
    response["Location"] = reverse("api-order", kwargs={"reference": record.order.reference})
    return Status(200, order_answer(record.order))


def order_answer(order: Order) -> s.Order:
    """The order as the API writes it (one name, so that a test can make it meet a lost database)."""
    return answers.order(order)


@router.get("/orders/{str:reference}", url_name="api-order", operation_id="getOrder",
            auth=ApiToken(_before_detail), summary="An order's state, payment quote, payment and access.",
            response={200: s.Order, **errors(400, 401, 404)}, openapi_extra={"parameters": [_REFERENCE_DOC]})
def order_detail(request, reference: str):
    return order_answer(request.api_order)


@router.post("/orders/{str:reference}/paid", url_name="api-order-paid", operation_id="claimPayment",
             auth=ApiToken(_before_paid),
             summary="“I've paid”: the transfer is on its way (the transaction id helps us find it).",
             response={200: s.Order, **errors(400, 401, 404, 409, 413, 415, 429)},
             openapi_extra={"parameters": [_REFERENCE_DOC]})
def order_paid(request, reference: str, payload: s.PaidRequest = None):
    order = request.api_order
    txid = payload.txid if payload is not None else None
    quote = getattr(order, "quote", None)
    if quote is None:
        return api_error(409, "conflict", _("This order has no quote to pay."))
    form = ClaimForm({"txid": txid or ""}, chain=quote.asset.chain)
    if not form.is_valid():
        return form_error(form)
    payment_claim(order=order, actor=request.api_user.get_username(), txid=form.cleaned_data["txid"])
    order.refresh_from_db()
    if order.claimed_txid:
        claim_check_after_claim(order)
        order.refresh_from_db()
    return order_answer(order)


@router.post("/orders/{str:reference}/cancel", url_name="api-order-cancel", operation_id="cancelOrder",
             auth=ApiToken(_before_cancel),
             summary="Cancel an order still awaiting payment; its cards are released at once.",
             response={200: s.Order, **errors(400, 401, 404, 409, 413, 415)},
             openapi_extra={"parameters": [_REFERENCE_DOC]})
def order_cancel_view(request, reference: str, payload: s.EmptyRequest = None):
    order = order_cancel(order=request.api_order, actor=request.api_user.get_username(),
                         reason="cancelled by the customer (API)")
    return order_answer(order)
