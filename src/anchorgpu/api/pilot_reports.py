"""Pilot reports in the API: send the report ``anchorgpu pilot run`` wrote as the body; read back the figures
the shop takes from it. A report is the sender's own: another customer's is not found. The body is read by
the pilot report reader (``report_store``), which has its own limits and refusals."""

from __future__ import annotations

from uuid import UUID

from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from ninja import Router, Status

from anchorgpu.pilot.report_schema import MAX_REPORT_BYTES, ReportRejected
from anchorgpu.pilotreports.models import PilotReport
from anchorgpu.pilotreports.rejections import rejection_text
from anchorgpu.pilotreports.services import report_store, reports_of

from . import answers
from . import schemas as s
from .auth import ApiToken
from .openapi_parts import errors
from .responses import api_error

router = Router()


@router.get("/pilot-reports", url_name="api-pilot-reports", operation_id="listPilotReports", auth=ApiToken(),
            summary="Your pilot reports, newest first (at most 100).",
            response={200: s.PilotReportList, **errors(400, 401)})
def pilot_report_list(request):
    return s.PilotReportList(reports=[answers.pilot_report(r) for r in reports_of(request.api_user)[:100]])


@router.post("/pilot-reports", url_name="api-pilot-reports", operation_id="uploadPilotReport", auth=ApiToken(),
             summary="Upload a pilot report: the planner then uses its measured throughput.",
             response={201: s.PilotReport, **errors(400, 401, 413, 415)},
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": {"$ref": "#/components/schemas/PilotReportBody"}}}},
                 "responses": {201: {"description": "The report was kept.",
                                       "headers": {"Location": {"schema": {"type": "string"}}}}}})
def pilot_report_upload(request, response: HttpResponse):
    if request.content_type.lower() != "application/json":
        return api_error(415, "unsupported_media_type", rejection_text(ReportRejected("not_json", "not JSON")))
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
    response["Location"] = reverse("api-pilot-report", kwargs={"report_id": row.pk})
    return Status(201, answers.pilot_report(row))


@router.get("/pilot-reports/{uuid:report_id}", url_name="api-pilot-report", operation_id="getPilotReport",
            auth=ApiToken(), summary="The figures the shop takes from one of your pilot reports.",
            response={200: s.PilotReport, **errors(400, 401, 404)})
def pilot_report_detail(request, report_id: UUID):
    row = PilotReport.objects.filter(pk=report_id, user=request.api_user).first()
    if row is None:
        return api_error(404, "not_found", _("You have no pilot report with that id."))
    return answers.pilot_report(row)
