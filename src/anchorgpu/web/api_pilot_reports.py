"""Pilot reports in the API: send the report ``anchorgpu pilot run`` wrote as the body; read back the figures
the shop takes from it. A report is the sender's own: another customer's is not found."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.urls import reverse
from django.utils.translation import gettext as _

from anchorgpu.pilot.report_schema import MAX_REPORT_BYTES, ReportRejected
from anchorgpu.pilotreports.models import PilotReport
from anchorgpu.pilotreports.services import report_store, report_summary, reports_of

from .api_body import BodyError
from .api_json import iso
from .api_orders import api_endpoint
from .report_reasons import rejection_text
from .responses import api_error


def report_json(row: PilotReport) -> dict:
    summary = report_summary(row)
    restore = summary.restore
    return {
        "id": str(row.pk), "uploaded_at": iso(row.uploaded_at), "filename": row.filename or None,
        "device": row.device_name or None, "device_count": row.device_count, "product": row.product_slug or None,
        "tokens_per_s": summary.tokens_per_s, "peak_memory_bytes": summary.peak_memory_bytes,
        "step_time_p50_s": summary.step_time_p50_s, "step_time_p95_s": summary.step_time_p95_s,
        "data_wait_share": summary.data_wait_share, "checkpoint_bytes": summary.checkpoint_bytes,
        "checkpoint_write_s": summary.checkpoint_write_s,
        "restore": {"status": restore.status,
                    "first_difference": ({k: str(v) for k, v in restore.first_difference.items()}
                                         if restore.first_difference else None)},
    }


@api_endpoint("GET", "POST")
def pilot_reports(request):
    if request.method != "POST":
        return JsonResponse({"reports": [report_json(r) for r in reports_of(request.api_user)[:100]]})
    if request.content_type.lower() != "application/json":
        return api_error(415, "unsupported_media_type",
                         rejection_text(ReportRejected("not_json", "not JSON")))
    too_large = api_error(413, "too_large", rejection_text(ReportRejected("too_large", "too large")))
    if int(request.headers.get("Content-Length") or 0) > MAX_REPORT_BYTES:
        return too_large
    try:
        body = request.body
    except RequestDataTooBig:
        return too_large
    try:
        row = report_store(user=request.api_user, data=body, filename="")
    except ReportRejected as exc:
        code = "report_" + {"not_utf8": "not_text"}.get(exc.code, exc.code)  # error codes are letters and _ only
        return api_error(413 if exc.code == "too_large" else 400, code, rejection_text(exc))
    response = JsonResponse(report_json(row), status=201)
    response["Location"] = reverse("api-pilot-report", kwargs={"report_id": row.pk})
    return response


@api_endpoint("GET")
def pilot_report(request, report_id):
    row = PilotReport.objects.filter(pk=report_id, user=request.api_user).first()
    if row is None:
        raise BodyError(api_error(404, "not_found", _("You have no pilot report with that id.")))
    return JsonResponse(report_json(row))
