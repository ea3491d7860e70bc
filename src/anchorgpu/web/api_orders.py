"""JSON API, version 1: price quotes and the customer's orders.

Customers authenticate with a bearer token (see ``api_tokens``); sessions
and cookies play no part, so the views need no CSRF token. Views validate
with the pages' forms and call the same services; they hold no rules. An
order of another customer is a 404, as on the pages."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import wraps

from django.db import IntegrityError, transaction
from django.http import JsonResponse
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt

from anchorgpu.catalog import offers as offers_selector
from anchorgpu.catalog.models import Product
from anchorgpu.ops.ratelimit import RateLimited, rate_take
from anchorgpu.orders.errors import InvalidOrder, OrderError
from anchorgpu.orders.models import Order
from anchorgpu.orders.services import order_cancel
from anchorgpu.payments.claim_check import claim_check_after_claim
from anchorgpu.payments.services import payment_claim

from . import api_body
from .api_body import BodyError
from .api_json import offer_quote_json, order_json, order_summary_json
from .api_tokens import token_user
from .checkout_form import CheckoutForm
from .forms import ProductQueryForm
from .models import ApiIdempotency
from .order_forms import ClaimForm
from .order_limits import order_place_limited
from .responses import api_error, form_error

# 60, not 64: the service stores it with an "api-" prefix in a 64-character column.
KEY_MAX = 60
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,%d}$" % KEY_MAX)
_REFERENCE = re.compile(r"^[A-Za-z0-9-]{1,20}$")

QUOTE_FIELDS = {"product": "str", "quantity": "int", "term": "int", "start": "moment", "environment": "str",
                "options": "str_list"}
ORDER_FIELDS = {**QUOTE_FIELDS, "name": "str", "email": "str", "company": "str", "country": "str",
                "billing_address": "str", "vat_id": "str", "ssh_keys": "lines", "saved_keys": "str_list",
                "asset": "str", "accept": "bool", "purpose": "str"}


def api_endpoint(*methods: str, auth: bool = True):
    """Method check (405), bearer token (401), JSON errors for refused bodies
    and for the services' OrderError; messages in the request's language."""
    allowed = set(methods) | ({"HEAD"} if "GET" in methods else set())

    def decorate(view):
        @csrf_exempt
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            with translation.override(getattr(request, "LANGUAGE_CODE", None) or translation.get_language()):
                if request.method not in allowed:
                    response = api_error(405, "method_not_allowed", _("%(method)s is not allowed here.")
                                         % {"method": request.method[:20]})
                    response["Allow"] = ", ".join(sorted(allowed))
                    return response
                if auth:
                    request.api_user = token_user(request.headers.get("Authorization", ""))
                    if request.api_user is None:
                        return _unauthorized(request)
                try:
                    return view(request, *args, **kwargs)
                except RateLimited as exc:
                    response = api_error(429, "rate_limited", _("Too many attempts: try again in %(seconds)d s.")
                                         % {"seconds": exc.retry_after})
                    response["Retry-After"] = str(exc.retry_after)
                    return response
                except BodyError as exc:
                    return exc.response
                except OrderError as exc:
                    return api_error(400 if isinstance(exc, InvalidOrder) else 409, exc.code, exc.message)
        return wrapper
    return decorate


def _unauthorized(request):
    if request.headers.get("Authorization"):
        response = api_error(401, "token_invalid", _("The API token is not valid, or it has been revoked."))
        response["WWW-Authenticate"] = 'Bearer realm="api", error="invalid_token"'
    else:
        response = api_error(401, "token_required", _("Send an API token in the header “Authorization: Bearer "
                                                      "<token>”. Make one on your account’s API tokens page."))
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


def _no_query(request):
    if request.GET:
        name = next(iter(request.GET))[:40]
        raise BodyError(api_error(400, "invalid_request", _("Unknown parameter “%(name)s”.") % {"name": name},
                                  {name: [_("Unknown parameter.")]}))


def _product(body: dict) -> Product:
    slug = body.get("product")
    product = Product.objects.filter(slug=slug, is_active=True).first() if isinstance(slug, str) and slug else None
    if product is None:
        message = _("No such product is on sale.") if slug else _("This field is required.")
        raise BodyError(api_error(400, "invalid_request", f"product: {message}", {"product": [message]}))
    return product


def _own_order(request, reference: str) -> Order:
    order = None
    if _REFERENCE.match(reference):
        order = (Order.objects.select_related("product", "environment", "quote__asset")
                 .filter(reference=reference, user=request.api_user).first())
    if order is None:
        raise BodyError(api_error(404, "not_found", _("You have no order with that reference.")))
    return order


@api_endpoint("POST", auth=False)
def quotes(request):
    """Price and availability of a configuration, without ordering it."""
    body = api_body.read_json(request, fields=set(QUOTE_FIELDS))
    data = api_body.form_data(body, QUOTE_FIELDS)
    product = _product(body)
    data.pop("product", None)
    form = ProductQueryForm(data, product=product)
    if not form.is_valid():
        return form_error(form)
    clean = form.cleaned_data
    offer = offers_selector.offer_for(product, term_days=clean["term"], quantity=clean["quantity"],
                                      not_before=clean["start"], options=clean["options"])
    return JsonResponse(offer_quote_json(offer, start=clean["start"], environment=clean["environment"],
                                         options=clean["options"]))


@api_endpoint("GET", "POST")
def orders(request):
    if request.method == "POST":
        return _order_create(request)
    _no_query(request)
    found = (Order.objects.filter(user=request.api_user).select_related("product").order_by("-created_at")[:100])
    return JsonResponse({"orders": [order_summary_json(o) for o in found]})


def _order_create(request):
    key = request.headers.get("Idempotency-Key", "")
    if not key:
        return api_error(400, "idempotency_key_required", _("Send an Idempotency-Key header (1 to %(most)d "
                                                            "characters, e.g. a UUID) so that a retried request "
                                                            "never makes two orders.") % {"most": KEY_MAX})
    if not _IDEMPOTENCY_KEY.match(key):
        return api_error(400, "idempotency_key_invalid", _("The Idempotency-Key is 1 to %(most)d visible ASCII "
                                                           "characters, without spaces.") % {"most": KEY_MAX})
    _no_query(request)
    body = api_body.read_json(request, fields=set(ORDER_FIELDS))
    print_ = api_body.fingerprint(body)
    user = request.api_user
    earlier = ApiIdempotency.objects.filter(user=user, key=key).select_related("order").first()
    if earlier is not None:
        return _replay(request, earlier, print_)
    data = api_body.form_data(body, ORDER_FIELDS)
    product = _product(body)
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
        return _replay(request, ApiIdempotency.objects.select_related("order").get(user=user, key=key), print_)
    response = JsonResponse(order_json(order), status=201)
    response["Location"] = reverse("api-order", kwargs={"reference": order.reference})
    return response


def _replay(request, record: ApiIdempotency, print_: str):
    if record.fingerprint != print_:
        return api_error(422, "idempotency_key_reused", _("This Idempotency-Key was already used with a different "
                                                          "request body. Use a new key for a new order."))
    if record.order is None:  # only while the first request is still being written
        return api_error(409, "idempotency_key_in_use", _("A request with this Idempotency-Key is still being "
                                                          "processed; try again in a moment."))
    response = JsonResponse(order_json(record.order), status=200)
    response["Idempotent-Replayed"] = "true"
    response["Location"] = reverse("api-order", kwargs={"reference": record.order.reference})
    return response


@api_endpoint("GET")
def order_detail(request, reference: str):
    order = _own_order(request, reference)
    _no_query(request)
    return JsonResponse(order_json(order))


@api_endpoint("POST")
def order_paid(request, reference: str):
    """ "I've paid", with the transaction id when the customer has one."""
    order = _own_order(request, reference)
    rate_take(request, "claim", user=request.api_user)
    _no_query(request)
    body = api_body.read_json(request, fields={"txid"}, optional=True)
    txid = body.get("txid")
    if txid is not None and not isinstance(txid, str):
        raise BodyError(api_error(400, "invalid_request", "txid: " + _("Must be a string or null."),
                                  {"txid": [_("Must be a string or null.")]}))
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
    return JsonResponse(order_json(order))


@api_endpoint("POST")
def order_cancel_view(request, reference: str):
    order = _own_order(request, reference)
    _no_query(request)
    api_body.read_json(request, fields=set(), optional=True)
    order = order_cancel(order=order, actor=request.api_user.get_username(), reason="cancelled by the customer (API)")
    return JsonResponse(order_json(order))
