"""The live catalog (read-only, public) and price quotes. The catalog's query strings are read by the
catalog's forms, as on the catalog page; the answers are the Schemas of ``schemas``."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils.translation import gettext as _
from ninja import Router
from pydantic import TypeAdapter

from anchorgpu.catalog import answer_cache
from anchorgpu.catalog import offers as offers_selector
from anchorgpu.catalog.models import Product
from anchorgpu.catalog.selectors import environments_for
from anchorgpu.payments.selectors import assets_accepted
from anchorgpu.web import catalog_cache
from anchorgpu.web.forms import OfferQueryForm, ProductQueryForm

from . import answers
from . import schemas as s
from .body import BodyError, form_data
from .openapi_parts import errors, query_parameters
from .responses import api_error, form_error

router = Router()
_OFFERS = TypeAdapter(list[s.Offer])


def _offers_json(form) -> bytes:
    return _OFFERS.dump_json([answers.offer(o) for o in catalog_cache.live_offers(form)])


def _offers_answer(query):
    """The JSON bytes for a good query, else the 400 response."""
    form = OfferQueryForm.from_query(query, strict=True)
    return _offers_json(form) if form.is_valid() else form_error(form)


@router.get("/offers", url_name="api-offers", operation_id="listOffers", auth=None,
            summary="The live catalog: units free, earliest start, prices.",
            response={200: list[s.Offer], **errors(400)},
            openapi_extra={"parameters": query_parameters(s.OfferQuery)})
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


@router.get("/offers/{slug:slug}", url_name="api-offer-detail", operation_id="getOffer", auth=None,
            summary="One product, with the price lines for a quantity, term and options.",
            response={200: s.OfferDetail, **errors(400, 404)},
            openapi_extra={"parameters": query_parameters(s.ProductQuery, explode=("options",))})
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
    return answers.offer_detail(offer, environment=data["environment"], environments=environments_for(product),
                                options=data["options"])


_SYMBOL = {"name": "symbol", "in": "query", "required": False,
           "schema": {"type": "string", "minLength": 1, "maxLength": 12, "pattern": "^[A-Za-z0-9]+$"},
           "description": "Only this coin's networks, e.g. USDT (any case)."}


@router.get("/assets", url_name="api-assets", operation_id="listAssets", auth=None,
            summary="What orders may be paid in: each coin on each network, in the checkout's order.",
            response={200: list[s.PaymentAsset], **errors(400)}, openapi_extra={"parameters": [_SYMBOL]})
def assets(request):
    rows = list(assets_accepted())
    symbol = request.GET.get("symbol")
    if symbol is not None:
        coins = list(dict.fromkeys(asset.symbol for asset in rows))
        wanted = symbol.strip().upper()
        if wanted not in coins:
            return api_error(400, "unknown_coin", _("No coin “%(symbol)s” is accepted. Accepted: %(coins)s.")
                             % {"symbol": symbol[:12], "coins": ", ".join(coins)})
        rows = [asset for asset in rows if asset.symbol == wanted]
    return [answers.payment_asset(asset) for asset in rows]


def body_product(payload) -> Product:
    slug = payload.product
    product = Product.objects.filter(slug=slug, is_active=True).first() if slug else None
    if product is None:
        message = _("No such product is on sale.") if slug else _("This field is required.")
        raise BodyError(api_error(400, "invalid_request", f"product: {message}", {"product": [message]}))
    return product


@router.post("/quotes", url_name="api-quotes", operation_id="createQuote", auth=None,
             summary="Price and availability of a configuration (no token needed; nothing is held).",
             response={200: s.Quote, **errors(400, 413, 415)})
def quotes(request, payload: s.QuoteRequest):
    product = body_product(payload)
    data = form_data(payload)
    data.pop("product", None)
    form = ProductQueryForm(data, product=product)
    if not form.is_valid():
        return form_error(form)
    clean = form.cleaned_data
    offer = offers_selector.offer_for(product, term_days=clean["term"], quantity=clean["quantity"],
                                      not_before=clean["start"], options=clean["options"])
    return answers.quote(offer, start=clean["start"], environment=clean["environment"], options=clean["options"])
