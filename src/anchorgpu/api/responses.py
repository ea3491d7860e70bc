"""JSON responses of the API, errors included, in one shape."""

from __future__ import annotations

from django.http import JsonResponse
from django.utils.translation import gettext as _


def api_error(status: int, code: str, message: str, fields: dict | None = None) -> JsonResponse:
    body = {"error": {"code": code, "message": str(message)}}
    if fields:
        body["error"]["fields"] = {name: [str(m) for m in messages] for name, messages in fields.items()}
    return JsonResponse(body, status=status)


def form_error(form) -> JsonResponse:
    fields = {name: list(errors) for name, errors in form.errors.items() if name != "__all__"}
    general = [str(m) for m in form.non_field_errors()]
    first = general[0] if general else next((f"{n}: {m[0]}" for n, m in fields.items()), _("Invalid request."))
    if general:
        fields["request"] = general
    return api_error(400, "invalid_request", first, fields)
