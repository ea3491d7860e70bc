"""Template context the shop's layout needs on every page."""

from __future__ import annotations

from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme


def login_next(request) -> dict:
    """Where "Log in" and "Sign up" in the header bring the customer back to:
    this page, or, on the log-in and sign-up pages, the safe ``next`` they carry."""
    try:
        own = {reverse("login"), reverse("signup")}
    except Exception:  # noqa: BLE001 - outside the language-prefixed URLs (admin, API)
        own = set()
    if request.path in own:
        target = request.GET.get("next", "")
        if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                               require_https=request.is_secure()):
            target = ""
    else:
        target = request.get_full_path()
    return {"login_next": target, "switch_next": _switch_next(request)}


def _switch_next(request) -> str:
    """This page's address for the language switcher, without a ``next``
    parameter that points off the site (it would be echoed into the page)."""
    query = request.GET.copy()
    target = query.get("next")
    if target is not None and not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                                   require_https=request.is_secure()):
        del query["next"]
    return request.path + (f"?{query.urlencode()}" if query else "")
