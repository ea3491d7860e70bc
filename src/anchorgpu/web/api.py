"""JSON API, version 1: the catalog (read-only, public) here; quotes and orders
in ``api_orders``, the OpenAPI schema in ``api_schema``."""

from __future__ import annotations

from functools import wraps

from django.http import HttpResponse, JsonResponse
from django.urls import path
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt

from anchorgpu.catalog import answer_cache
from anchorgpu.catalog import offers as offers_selector
from anchorgpu.catalog.models import Product
from anchorgpu.catalog.selectors import environments_for

from . import api_orders, api_pilot_reports, api_schema, catalog_cache
from .api_json import iso, price_json
from .forms import OfferQueryForm, ProductQueryForm
from .responses import api_error, form_error


def read_only(view):
    """GET and HEAD only; anything else gets a JSON 405 like every API error
    (csrf_exempt, so that a POST gets that 405 rather than a CSRF page)."""
    @csrf_exempt
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method not in ("GET", "HEAD"):
            response = api_error(405, "method_not_allowed", _("%(method)s is not allowed here; use GET.")
                                 % {"method": request.method[:20]})
            response["Allow"] = "GET, HEAD"
            return response
        return view(request, *args, **kwargs)
    return wrapper


def _offer_json(offer) -> dict:
    product = offer.product
    return {
        "product": product.slug,
        "name": product.name,
        "vendor": product.vendor,
        "memory_gb_per_card": product.memory_gb_per_card,
        "cards_per_unit": product.cards_per_unit,
        "stack": product.stack,
        "stack_label": offer.stack_label,
        "term": offer.term_days,
        "quantity": offer.quantity,
        "units_total": offer.units_total,
        "units_free_now": offer.units_free_now,
        "earliest_start": iso(offer.earliest_start),
        "price": {str(days): f"{p.total:f}" for days, p in offer.prices.items()},
        "currency": offer.currency or None,
    }


def _offers_json(form) -> bytes:
    return JsonResponse([_offer_json(o) for o in catalog_cache.live_offers(form)], safe=False).content


def _offers_answer(query):
    """The JSON bytes for a good query, else the 400 response."""
    form = OfferQueryForm.from_query(query, strict=True)
    return _offers_json(form) if form.is_valid() else form_error(form)


@read_only
def offers(request):
    # The JSON bytes, exact for this database state and second (anchorgpu.catalog.answer_cache), keyed on the
    # query as sent; a query with a start is validated first, then keyed on its normalised value
    # (web.catalog_cache).
    params = catalog_cache.query_params(request.GET)
    if params is not None:
        answer = answer_cache.answer("offers-api", params, lambda now: _offers_answer(request.GET),
                                     keep=catalog_cache.kept)
    else:
        form = OfferQueryForm.from_query(request.GET, strict=True)
        if not form.is_valid():
            return form_error(form)
        answer = answer_cache.answer("offers-json", form.query_key(), lambda now: _offers_json(form))
    if isinstance(answer, HttpResponse):
        return answer
    return HttpResponse(answer, content_type="application/json")


@read_only
def offer_detail(request, slug: str):
    product = Product.objects.filter(slug=slug, is_active=True).first()
    if product is None:
        return api_error(404, "not_found", _("No product “%(product)s” is on sale.") % {"product": slug[:60]})
    form = ProductQueryForm.from_query(request.GET, strict=True, product=product)
    if not form.is_valid():
        return form_error(form)
    data = form.cleaned_data
    offer = offers_selector.offer_for(product, term_days=data["term"], quantity=data["quantity"],
                                      not_before=data["start"], options=data["options"])
    body = _offer_json(offer)
    price = offer.price_for_term
    body["environment"] = data["environment"].slug if data["environment"] else None
    body["environments"] = [e.slug for e in environments_for(product)]
    body["options"] = data["options"]
    body.update(price_json(price))
    return JsonResponse(body)


urlpatterns = [
    path("offers", offers, name="api-offers"),
    path("offers/<slug:slug>", offer_detail, name="api-offer-detail"),
    path("quotes", api_orders.quotes, name="api-quotes"),
    path("orders", api_orders.orders, name="api-orders"),
    path("orders/<str:reference>", api_orders.order_detail, name="api-order"),
    path("orders/<str:reference>/paid", api_orders.order_paid, name="api-order-paid"),
    path("orders/<str:reference>/cancel", api_orders.order_cancel_view, name="api-order-cancel"),
    path("pilot-reports", api_pilot_reports.pilot_reports, name="api-pilot-reports"),
    path("pilot-reports/<uuid:report_id>", api_pilot_reports.pilot_report, name="api-pilot-report"),
    path("openapi.json", api_schema.openapi_view, name="api-openapi"),
]
