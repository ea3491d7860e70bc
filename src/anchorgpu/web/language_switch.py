"""The language switcher's endpoint: the same page and query, in the chosen language.

Django's own ``set_language`` translates ``next`` by resolving it in the
language that is active for the switch request (the cookie, or the browser's
Accept-Language); a ``/pt/`` address does not resolve under a Korean browser,
so it came back unchanged and the switch only reloaded the Portuguese page.
Here the language prefix is swapped in the address itself, whatever language
the request arrived in.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.http import HttpResponseRedirect
from django.urls import Resolver404, resolve
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from anchorgpu.web.views import bad_request


def _codes() -> set[str]:
    return {code for code, _name in settings.LANGUAGES}


def _safe(request, target: str) -> bool:
    return bool(target) and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                            require_https=request.is_secure())


def in_language(target: str, code: str) -> str:
    """``target`` (a path with its query, on this site) with its language prefix set to ``code``.

    A path without a prefix keeps its own address when it is one of the site's
    unprefixed pages (admin, API); any other gets the prefix put in front. The
    query is kept as it was written, except that a ``next`` in it (the log-in
    page's way back) follows the new language too.
    """
    parts = urlsplit(target)
    path = parts.path or "/"
    segments = path.split("/")  # "/pt/guides/x/" -> ["", "pt", "guides", "x", ""]
    if len(segments) > 1 and segments[1] in _codes():
        segments[1] = code
        path = "/".join(segments)
    elif not _resolves_unprefixed(path):
        path = f"/{code}{path}"
    query = _NEXT_IN_QUERY.sub(lambda m: m["head"] + code + m["tail"] if m["code"] in _codes() else m[0],
                               parts.query)
    return urlunsplit(("", "", path, query, parts.fragment))


# next=/pt/... or next=%2Fpt%2F... inside a query string
_NEXT_IN_QUERY = re.compile(r"(?P<head>(?:^|&)next=(?:/|%2F))(?P<code>[a-z]{2})(?P<tail>/|%2F|$|&)", re.IGNORECASE)


def _resolves_unprefixed(path: str) -> bool:
    if path == "/":  # the bare root only redirects to a language
        return False
    try:
        resolve(path)
    except Resolver404:
        return False
    return True


@require_POST
def switch_language(request):
    """Set the language cookie and go to ``next`` in that language.

    An unknown language is the shop's 400 page. A ``next`` that points off the
    site is not followed: the safe Referer, or else the catalog, is used instead,
    as Django's own view does.
    """
    code = request.POST.get("language", "")
    if code not in _codes():
        return bad_request(request)
    target = request.POST.get("next") or request.GET.get("next") or ""
    if not _safe(request, target):
        referer = request.META.get("HTTP_REFERER", "")
        target = referer if _safe(request, referer) else "/"
    response = HttpResponseRedirect(in_language(target, code))
    response.set_cookie(
        settings.LANGUAGE_COOKIE_NAME, code, max_age=settings.LANGUAGE_COOKIE_AGE, path=settings.LANGUAGE_COOKIE_PATH,
        domain=settings.LANGUAGE_COOKIE_DOMAIN, secure=settings.LANGUAGE_COOKIE_SECURE,
        httponly=settings.LANGUAGE_COOKIE_HTTPONLY, samesite=settings.LANGUAGE_COOKIE_SAMESITE,
    )
    return response
