"""The checkout's refusals that happen before its view can answer with the form: a visitor who is not
signed in (never signed in, or a session that expired while typing) and a form whose CSRF check failed.
Both come back to a checkout with the customer's choice (what to rent) in the address; the rest of what
they typed is put back by the page's draft keeper (static/anchorgpu/draft.js) from the browser's own
storage. The server never fills a form from a request that failed its CSRF check with anything but the
choice a link could carry as well: a page elsewhere must not be able to plant an SSH key or an e-mail
address into a customer's checkout."""

from __future__ import annotations

from functools import wraps
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.views import redirect_to_login

# What a link to the checkout may carry (order_views._initial reads the same names).
CHOICE_FIELDS = ("quantity", "term", "environment", "purpose", "start", "plan", "options")
_LIMITS = {"plan": 8000}
_LANGUAGES = {code for code, _name in settings.LANGUAGES}


def choice_query(data) -> str:
    """The checkout's choice in ``data`` (a POST or a query) as a query string; a start only when the form
    asked for a dated start."""
    pairs = []
    for name in CHOICE_FIELDS:
        if name == "start" and data.get("start_mode", "date") != "date":
            continue
        values = data.getlist(name) if hasattr(data, "getlist") else [data.get(name)]
        for value in values[:10]:
            value = (value or "").strip()[: _LIMITS.get(name, 50)]
            if value:
                pairs.append((name, value))
    return urlencode(pairs)


def checkout_address(request) -> str:
    """The checkout this request was on, with the choice it carried (from the form sent, or its query)."""
    query = choice_query(request.POST if request.method == "POST" else request.GET)
    return request.path + (f"?{query}" if query else "")


def guest_to_login(view):
    """``login_required`` for the checkout, keeping the choice: a form sent by a visitor whose session has
    gone brings them to the log-in page with the checkout (and what they chose) as ``next``."""
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(checkout_address(request))
        return view(request, *args, **kwargs)
    return wrapper


def leads_to_checkout(path: str) -> bool:
    """Whether a ``next`` address is one of the shop's checkouts (the log-in page then says why it is asked)."""
    path = (path or "").split("?", 1)[0]
    if not path.startswith("/") or path.startswith("//"):
        return False
    parts = [part for part in path.split("/") if part]
    if parts and parts[0] in _LANGUAGES:
        parts = parts[1:]
    return len(parts) == 2 and parts[0] == "checkout"
