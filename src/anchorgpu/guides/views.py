from django.http import Http404
from django.shortcuts import render
from django.utils.translation import get_language

from . import loader


def _language() -> str:
    lang = (get_language() or "").split("-")[0]
    if lang not in loader.LANGUAGES:  # no fallback: the shop's languages are the guides' languages
        raise Http404("No guides in this language.")
    return lang


def guide_index(request):
    return render(request, "guides/index.html", {"guides": loader.load_all(_language())})


def guide_detail(request, slug):
    if slug not in loader.SLUGS:
        raise Http404("No such guide.")
    return render(request, "guides/guide.html", {"guide": loader.load(slug, _language())})
