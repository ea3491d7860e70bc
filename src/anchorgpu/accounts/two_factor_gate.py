"""The admin's door: every /admin/ address goes through here first.

- The admin's own log-in page is never used: it sends the visitor to the shop's
  log-in (where the code step is), and a signed-in operator straight on.
- An operator with two-factor on whose session has not passed the code is sent
  to the code step, whether or not the admin requires two-factor.
- When the admin requires two-factor (``ANCHORGPU_ADMIN_2FA``; on in production),
  an operator without it is sent to set it up.
Everyone else (customers, visitors) meets the admin's own refusal."""

from __future__ import annotations

from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode

from .two_factor import admin_requires_two_factor, confirmed_device, session_is_verified


def _with_next(name: str, target: str) -> str:
    return f"{reverse(name)}?{urlencode({'next': target})}"


def admin_gate(request):
    """A redirect for a request to the admin that may not go there yet, or None."""
    user = request.user
    if request.path == reverse("admin:login"):
        target = request.GET.get("next", "")
        if target.startswith(request.path) or not url_has_allowed_host_and_scheme(
                target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
            target = reverse("admin:index")
        if user.is_authenticated and user.is_staff:
            return redirect(target)  # on to the page, through this gate again
        return redirect(_with_next("login", target))
    if not (user.is_authenticated and user.is_active and user.is_staff) or session_is_verified(request):
        return None
    if confirmed_device(user) is not None:
        return redirect(_with_next("login_code", request.get_full_path()))
    if admin_requires_two_factor():
        return redirect(_with_next("two_factor", request.get_full_path()))
    return None


class AdminTwoFactorMiddleware:
    """After the session, locale and authentication middleware: see ``admin_gate``."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith(reverse("admin:index")):
            response = admin_gate(request)
            if response is not None:
                return response
        return self.get_response(request)
