"""Shop pages. Views validate input with forms and call selectors; they hold no rules."""

from __future__ import annotations

import sys

from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import get_script_prefix
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from anchorgpu.catalog import answer_cache
from anchorgpu.catalog import offers as offers_selector
from anchorgpu.catalog.models import Product
from anchorgpu.catalog.rules import TERM_DAYS
from anchorgpu.catalog.selectors import environments_for, options_offered
from anchorgpu.ops.dbdown import DATABASE_DOWN, DatabaseUnavailableMiddleware

from . import catalog_cache
from .forms import OfferQueryForm, ProductQueryForm


def _status(form) -> int:
    return 200 if form.is_valid() else 400


def _catalog_offers(form, now) -> tuple[list, str]:
    """The offers and their table (web/_offers.html), which holds nothing of the visitor's: rendered
    without the request, so that it can be cached (anchorgpu.catalog.answer_cache)."""
    found = catalog_cache.live_offers(form)
    return found, render_to_string("web/_offers.html", {"form": form, "offers": found, "terms": TERM_DAYS})


def _catalog_context(form, offers, offers_html, now) -> dict:
    return {"form": form, "offers": offers, "offers_html": offers_html, "terms": TERM_DAYS, "now": now}


def _cached_offers(form) -> tuple[list, str]:
    """The offers and their table for a valid query, under its normalised value: requests that differ only in
    what the form ignores (the order of the parameters, unknown ones such as a campaign's tag) share it."""
    return answer_cache.answer("catalog-offers-html", form.query_key(), lambda now: _catalog_offers(form, now))


def _table_answer(request, now):
    """The offers table (an htmx request): its HTML when the query is good, else the 400 response."""
    form = OfferQueryForm.from_query(request.GET, strict=False)
    if form.is_valid():
        return _cached_offers(form)[1]
    return HttpResponse(render_to_string("web/_offers.html", {"form": form, "offers": [], "terms": TERM_DAYS}),
                        status=400)


def _page_answer(request, key, now):
    """The whole page (UTF-8) for a visitor without a session, with ``CSRF_HOLE`` for the token
    (web.catalog_cache); the 400 response, rendered for this request, when the query is bad. The page around
    the table is kept across snapshots and seconds (``catalog_cache.page_with_table``): it holds nothing read
    from the database or the clock, so it is rendered without them."""
    form = OfferQueryForm.from_query(request.GET, strict=False)
    if not form.is_valid():
        return _catalog_page(request, form)
    _offers, offers_html = _cached_offers(form)

    def shell() -> str:
        context = {"form": form, "offers_html": catalog_cache.TABLE_HOLE, "terms": TERM_DAYS,
                   "csrf_token": catalog_cache.CSRF_HOLE}
        return render_to_string("web/catalog.html", context, request=request)

    context = (translation.get_language(), timezone.get_current_timezone_name(), get_script_prefix())
    return catalog_cache.page_with_table((key, context), shell, offers_html).encode()


def _catalog_page(request, form) -> HttpResponse:
    """The page rendered for this visitor; only its offers table may come from the cache."""
    if form.is_valid():
        offers, offers_html = _cached_offers(form)
    else:  # the form's errors: never cached
        offers = []
        offers_html = render_to_string("web/_offers.html", {"form": form, "offers": offers, "terms": TERM_DAYS})
    if request.headers.get("HX-Request"):
        return HttpResponse(offers_html, status=_status(form))
    return render(request, "web/catalog.html", _catalog_context(form, offers, offers_html, timezone.now()),
                  status=_status(form))


def catalog(request):
    """The live catalog. Repeated requests are answered whole from the answer cache where the answer is the
    same for every visitor who sends them (web.catalog_cache says which, and on what key)."""
    if request.headers.get("HX-Request"):
        params = catalog_cache.query_params(request.GET)
        if params is not None:
            table = answer_cache.answer("catalog-table", params, lambda now: _table_answer(request, now),
                                        keep=catalog_cache.kept)
            return table if isinstance(table, HttpResponse) else HttpResponse(table)
    else:
        key = catalog_cache.page_key(request)
        if key is not None:
            page = answer_cache.answer("catalog-page", key, lambda now: _page_answer(request, key, now),
                                       keep=catalog_cache.kept)
            return catalog_cache.page_response(page, request)
    return _catalog_page(request, OfferQueryForm.from_query(request.GET, strict=False))


def product_detail(request, slug: str):
    product = Product.objects.filter(slug=slug, is_active=True).first()
    if product is None:
        raise Http404("no such product")
    form = ProductQueryForm.from_query(request.GET, strict=False, product=product)
    offer = None
    if form.is_valid():
        data = form.cleaned_data
        offer = offers_selector.offer_for(product, term_days=data["term"], quantity=data["quantity"],
                                          not_before=data["start"], options=data["options"])
    context = {"form": form, "product": product, "offer": offer, "terms": TERM_DAYS,
               "environments": environments_for(product), "options": options_offered(), "now": timezone.now()}
    template = "web/_quote.html" if request.headers.get("HX-Request") else "web/product.html"
    return render(request, template, context, status=_status(form))


def not_found(request, exception=None):
    if request.path.startswith("/api/"):
        return JsonResponse({"error": {"code": "not_found", "message": _("No such endpoint.")}}, status=404)
    return render(request, "404.html", status=404)


def bad_request(request, exception=None):
    if request.path.startswith("/api/"):
        return JsonResponse({"error": {"code": "bad_request", "message": _("The request could not be read.")}},
                            status=400)
    return render(request, "400.html", status=400)


def server_error(request):
    failure = sys.exc_info()[1]  # Django calls this handler inside its ``except`` block
    if isinstance(failure, DATABASE_DOWN):  # raised outside a view (a middleware): still a 503, not a 500
        return DatabaseUnavailableMiddleware(None).process_exception(request, failure)
    if request.path.startswith("/api/"):
        return JsonResponse({"error": {"code": "server_error", "message": _("Something failed on our side; "
                                                                            "it has been logged.")}}, status=500)
    return render(request, "500.html", status=500)
