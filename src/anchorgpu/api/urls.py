"""API v1's URLs: the ninja API and its operations (``catalog``, ``orders``, ``pilot_reports``), each path
under its URL name, and the OpenAPI document at ``openapi.json``.

Around ninja's views, for every path: messages in the request's language, HEAD answered as GET, and any
other method not listed a JSON 405 with Allow, like every API error (the views are CSRF-exempt: a token, not
a session, authenticates)."""

from __future__ import annotations

from django.urls import path
from django.utils import translation
from django.utils.translation import gettext as _
from ninja.utils import replace_path_param_notation

from . import openapi
from .app import ROUTERS, api
from .responses import api_error


def _methods() -> dict[str, set[str]]:
    """The methods each route takes, HEAD with GET."""
    out: dict[str, set[str]] = {}
    for router in ROUTERS:
        for route, path_view in router.path_operations.items():
            methods = out.setdefault(replace_path_param_notation(route).lstrip("/"), set())
            for operation in path_view.operations:
                methods.update(operation.methods)
    return {route: methods | ({"HEAD"} if "GET" in methods else set()) for route, methods in out.items()}


def _entry(view, allowed: set[str]):
    def entry(request, *args, **kwargs):
        with translation.override(getattr(request, "LANGUAGE_CODE", None) or translation.get_language()):
            if request.method not in allowed:
                hint = _("%(method)s is not allowed here; use GET.") if allowed == {"GET", "HEAD"} \
                    else _("%(method)s is not allowed here.")
                response = api_error(405, "method_not_allowed", hint % {"method": request.method[:20]})
                response["Allow"] = ", ".join(sorted(allowed))
                return response
            if request.method == "HEAD":
                request.method = "GET"
                try:
                    return view(request, *args, **kwargs)
                finally:
                    request.method = "HEAD"
            return view(request, *args, **kwargs)
    entry.csrf_exempt = True
    return entry


def _patterns() -> list:
    methods = _methods()
    seen, out = set(), []
    for pattern in api.urls[0]:
        route = str(pattern.pattern)
        if pattern.name == "api-root" or route in seen:
            continue  # ninja lists a route once per operation; one view serves them all
        seen.add(route)
        out.append(path(route, _entry(pattern.callback, methods[route]), name=pattern.name))
    out.append(path("openapi.json", _entry(openapi.openapi_view, {"GET", "HEAD"}), name="api-openapi"))
    return out


urlpatterns = _patterns()
