"""``CSRF_FAILURE_VIEW``: a checkout whose CSRF token went stale comes back as the checkout itself.

Apart from ``checkout_refusals`` (which the checkout view imports) so that the two do not import each other."""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.http import QueryDict
from django.urls import Resolver404, resolve
from django.utils.translation import gettext as _
from django.views.csrf import csrf_failure as django_csrf_failure

from .checkout_refusals import checkout_address, choice_query
from .order_views import checkout_again


def csrf_failure(request, reason: str = ""):
    """``CSRF_FAILURE_VIEW``: a checkout sent with a stale token (an expired session, a log-in in another
    tab) comes back as the checkout, 403, saying so; every other form gets Django's page."""
    try:
        match = resolve(request.path_info)
    except Resolver404:
        match = None
    if match is None or match.url_name != "checkout" or request.method != "POST":
        return django_csrf_failure(request, reason=reason)
    if not request.user.is_authenticated:
        return redirect_to_login(checkout_address(request))
    return checkout_again(
        request, slug=match.kwargs["slug"], query=QueryDict(choice_query(request.POST)), status=403,
        error=_("This form had been open too long (or you logged in again in another tab), so it could not be "
                "sent and nothing was ordered. What you typed is filled in again: check it and press “Place "
                "the order” again."))
