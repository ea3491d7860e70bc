"""Extending an order's term (``orders.extensions``): what can be bought now, and placing the extension. The
extension is an order: its answer is an Order (its quote, "I've paid" and cancel links are its own)."""

from __future__ import annotations

from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from ninja import Router, Status

from anchorgpu.orders.errors import OrderError
from anchorgpu.orders.extension_options import extension_options, refusal_text
from anchorgpu.orders.extensions import extension_price, order_extend
from anchorgpu.payments.selectors import assets_accepted

from . import answers
from . import schemas as s
from .auth import ApiToken, no_query
from .body import BodyError
from .openapi_parts import errors
from .orders import _REFERENCE_DOC, _own_order, order_answer
from .responses import api_error

router = Router()


def _before_read(request, reference):
    request.api_order = _own_order(request, reference)
    no_query(request)


@router.get("/orders/{str:reference}/extension", url_name="api-order-extension", operation_id="getExtensionOptions",
            auth=ApiToken(_before_read),
            summary="Whether the term can be extended on the same cards, by which days and at what price; "
                    "otherwise until when the cards are free after it.",
            response={200: s.ExtensionOptions, **errors(400, 401, 404)},
            openapi_extra={"parameters": [_REFERENCE_DOC]})
def extension_read(request, reference: str):
    order = request.api_order
    found = extension_options(order)
    prices, currency = {}, None
    for days in found.days:
        try:
            price = extension_price(order=order, days=days)
        except OrderError:
            continue
        prices[days], currency = price.total, price.currency
    return answers.extension_options(found, prices, currency, "" if found.possible else
                                     (refusal_text(found) if found.start or found.refusal else ""))


@router.post("/orders/{str:reference}/extend", url_name="api-order-extend", operation_id="extendOrder",
             auth=ApiToken(_before_read),
             summary="Extend the term by 3, 7 or 30 days on the same cards: holds them and makes the extension's "
                     "own quote. The answer is the extension, an order to pay like any other.",
             response={201: s.Order, **errors(400, 401, 404, 409, 413, 415)},
             openapi_extra={"parameters": [_REFERENCE_DOC], "responses": {
                 201: {"description": "The extension was made.",
                       "headers": {"Location": {"schema": {"type": "string"}}}}}})
def extension_create(request, reference: str, payload: s.ExtendRequest, response: HttpResponse):
    if payload.days is None or payload.asset is None:
        raise BodyError(api_error(400, "invalid", _("Give days (3, 7 or 30) and asset.")))
    asset = assets_accepted().filter(code=payload.asset).first()
    if asset is None:
        raise BodyError(api_error(400, "bad_asset", _("Choose one of the assets listed.")))
    extension = order_extend(order=request.api_order, days=payload.days, asset=asset,
                             actor=request.api_user.get_username())
    response["Location"] = reverse("api-order", kwargs={"reference": extension.reference})
    return Status(201, order_answer(extension))
