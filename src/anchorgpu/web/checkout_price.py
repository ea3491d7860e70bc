"""The checkout's price summary: every line of the price (cards, term discount, each option chosen) and the
total, what every option offered would add for this term, and when the term starts and ends. Rendered with
the checkout page, and again by ``checkout_price`` (an htmx GET) whenever the quantity, term, start or
options change. Prices come from the catalog's pricing, as the order will record them."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.http import Http404, QueryDict
from django.shortcuts import render

from anchorgpu.catalog import offers as offers_selector
from anchorgpu.catalog import pricing
from anchorgpu.catalog.models import Option, Product
from anchorgpu.catalog.selectors import NoPriceList, price_list_current

from .forms import ProductQueryForm

# What the summary reads of the checkout form (the rest of the form never leaves the page for it).
PRICED_FIELDS = ("quantity", "term", "options")


def summary(offer, *, start: datetime | None, chosen=()) -> dict:
    """The template context of ``web/_checkout_price.html`` for ``offer`` (None: nothing to price yet)."""
    context = {"offer": offer, "term_start": start, "term_end": None, "option_prices": []}
    if offer is None:
        return context
    if start is not None:
        try:
            context["term_end"] = start + timedelta(days=offer.term_days)
        except OverflowError:  # the calendar's end: no dates to show (the form refuses such a start)
            context["term_start"] = None
    try:
        prices = price_list_current()
    except NoPriceList:
        return context
    names = dict(Option.objects.filter(is_active=True).values_list("slug", "name"))
    chosen = set(chosen)
    context["option_prices"] = [
        {"slug": slug, "name": names.get(slug, line.description), "line": line, "chosen": slug in chosen,
         "currency": prices.currency}
        for slug, line in pricing.option_lines(prices, quantity=offer.quantity, term_days=offer.term_days)
        if slug in names]
    return context


def _priced_query(query) -> QueryDict:
    """The part of the checkout's fields that the price depends on; the start only for a dated start."""
    kept = QueryDict(mutable=True)
    for name in PRICED_FIELDS:
        values = [v for v in query.getlist(name) if v][:20]
        if values:
            kept.setlist(name, values)
    if query.get("start_mode") == "date" and query.get("start"):
        kept["start"] = query.get("start")
    return kept


def checkout_price(request, slug: str):
    """The summary for the choice in the query (400 with the reason when it cannot be priced)."""
    product = Product.objects.filter(slug=slug, is_active=True).first()
    if product is None:
        raise Http404("no such product")
    form = ProductQueryForm.from_query(_priced_query(request.GET), strict=False, product=product)
    if not form.is_valid():
        problems = [str(error) for errors in form.errors.values() for error in errors]
        return render(request, "web/_checkout_price.html", {"problems": problems, "oob": True}, status=400)
    data = form.cleaned_data
    offer = offers_selector.offer_for(product, term_days=data["term"], quantity=data["quantity"],
                                      not_before=data["start"], options=data["options"])
    context = summary(offer, start=data["start"], chosen=data["options"])
    context["oob"] = True
    return render(request, "web/_checkout_price.html", context)
