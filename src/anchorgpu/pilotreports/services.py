"""Storing an uploaded pilot report: checked by ``pilot.report_schema``, kept whole, its key figures on the row."""

from __future__ import annotations

from django.db import transaction

from anchorgpu.audit.services import audit_record
from anchorgpu.pilot.report_schema import MAX_REPORT_BYTES, PilotSummary, ReportRejected, read_report, summarise
from anchorgpu.pilot.stack import PRODUCTS

from .models import PilotReport

MAX_REPORTS_PER_CUSTOMER = 100


def product_for_device(name: str | None) -> str:
    """The catalog product a device name is (``NVIDIA H200`` → ``h200-141gb``); "" when none matches."""
    text = (name or "").lower()
    matches = [p for p in PRODUCTS.values() if p.name_token.lower() in text]
    return max(matches, key=lambda p: len(p.name_token)).code if matches else ""


def report_store(*, user, data: bytes, filename: str = "") -> PilotReport:
    """Check ``data`` and keep it for ``user``. Raises ``ReportRejected`` with the reason."""
    if len(data) > MAX_REPORT_BYTES:
        raise ReportRejected("too_large", f"the file is {len(data):,} bytes; reports are at most "
                                          f"{MAX_REPORT_BYTES:,} bytes.")
    report = read_report(data, max_bytes=MAX_REPORT_BYTES)
    summary = summarise(report)
    with transaction.atomic():
        if PilotReport.objects.filter(user=user).count() >= MAX_REPORTS_PER_CUSTOMER:
            raise ReportRejected("too_many", f"you keep {MAX_REPORTS_PER_CUSTOMER} reports at most; delete one "
                                             "first.")
        row = PilotReport.objects.create(
            user=user, filename=filename[:200], size_bytes=len(data), schema_version=summary.schema_version,
            tokens_per_s=summary.tokens_per_s, peak_memory_bytes=summary.peak_memory_bytes,
            device_name=(summary.device_name or summary.device_type or "")[:200], device_count=summary.device_count,
            product_slug=product_for_device(summary.device_name), restore=summary.restore.status, report=report)
        audit_record(actor=user.get_username(), action="pilot_report_upload", obj=row,
                     data={"bytes": len(data), "tokens_per_s": summary.tokens_per_s, "restore": summary.restore.status,
                           "device": row.device_name})
    return row


def report_summary(row: PilotReport) -> PilotSummary:
    return summarise(row.report)


def reports_of(user):
    return PilotReport.objects.filter(user=user).order_by("-uploaded_at")
