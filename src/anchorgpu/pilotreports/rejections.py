"""Why an uploaded pilot report was refused, in the reader's language (``ReportRejected.code``)."""

from __future__ import annotations

from django.utils.translation import gettext as _

from anchorgpu.pilot.report_schema import MAX_REPORT_BYTES, ReportRejected


def rejection_text(exc: ReportRejected) -> str:
    texts = {
        "too_large": _("The file is larger than %(mib)d MiB; a pilot report is much smaller. Upload the "
                       "report.json that anchorgpu pilot run wrote.") % {"mib": MAX_REPORT_BYTES // 2**20},
        "not_utf8": _("The file is not UTF-8 text: it is not a pilot report."),
        "not_json": _("The file is not JSON: upload the report.json that anchorgpu pilot run wrote."),
        "truncated": _("The file ends too early: it looks cut short (an interrupted copy?). Upload it again."),
        "not_a_report": _("This JSON is not a pilot report from anchorgpu pilot run."),
        "scale_report": _("This is a scaling report (anchorgpu pilot scale); upload the report of pilot run."),
        "schema_version": _("This report's format version is not one this shop reads; run the pilot with the "
                            "current kit and upload its report."),
        "missing_field": _("The report lacks a part it must have (%(field)s): was it edited?"),
        "bad_type": _("A part of the report has the wrong kind of value (%(field)s): was it edited?"),
        "bad_value": _("A figure in the report is impossible (%(field)s): was it edited?"),
        "too_many": _("You keep too many reports; delete old ones first."),
    }
    text = texts.get(exc.code, _("This file cannot be used as a pilot report."))
    return text % {"field": exc.field or "?"} if "%(field)s" in text else text
