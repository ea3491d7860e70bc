"""Pilot reports in the shop: a customer uploads the JSON ``anchorgpu pilot run`` wrote, sees its key figures
and plots, and plans a run with its measured throughput. Another customer's report is a 404."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from anchorgpu.pilot.report_schema import MAX_REPORT_BYTES, ReportRejected
from anchorgpu.pilot.summary import memory_svg, step_time_svg
from anchorgpu.pilotreports.models import PilotReport
from anchorgpu.pilotreports.rejections import rejection_text
from anchorgpu.pilotreports.services import report_store, report_summary, reports_of


class ReportUploadForm(forms.Form):
    report = forms.FileField(label=gettext_lazy("Pilot report (the JSON file from anchorgpu pilot run)"))


@login_required
@require_http_methods(["GET", "POST"])
def pilot_reports(request):
    status = 200
    form = ReportUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST":
        if form.is_valid():
            upload = form.cleaned_data["report"]
            try:
                if upload.size > MAX_REPORT_BYTES:
                    raise ReportRejected("too_large", "too large")
                row = report_store(user=request.user, data=upload.read(), filename=upload.name or "")
            except ReportRejected as exc:
                form.add_error("report", rejection_text(exc))
                status = 413 if exc.code == "too_large" else 400
            else:
                return redirect("pilot_report", report_id=row.pk)
        else:
            status = 400
    return render(request, "pilotreports/pilot_reports.html", {"form": form, "reports": reports_of(request.user)[:50],
                                                      "max_mib": MAX_REPORT_BYTES // 2**20}, status=status)


@login_required
def pilot_report(request, report_id):
    row = PilotReport.objects.filter(pk=report_id, user=request.user).first()
    if row is None:
        raise Http404("no such report")
    summary = report_summary(row)
    # The plots are drawn by the pilot kit from numbers only; every text in them is its own, escaped.
    plots = {"steps": mark_safe(step_time_svg(row.report)), "memory": mark_safe(memory_svg(row.report))}  # noqa: S308
    difference = summary.restore.first_difference or {}
    return render(request, "pilotreports/pilot_report.html", {
        "row": row, "summary": summary, "plots": plots, "gib": 2**30,
        "difference": format_html("{}: {} → {}", difference.get("what", "?"), difference.get("expected", "?"),
                                  difference.get("found", "?")) if difference else "",
        "planner_query": f"report={row.pk}", "title": _("Pilot report")})
