"""The warnings a pilot report carries, in the reader's language.

The pilot kit runs on the customer's machine without Django and writes its
warnings into the report in English. The ones this version of the kit writes
are recognised here and said in the active language; any other (an older or
newer kit) is shown as it came, marked as English."""

from __future__ import annotations

import re

from django.utils.html import format_html
from django.utils.translation import get_language, ngettext
from django.utils.translation import gettext as _

_KNOWN = (  # pilot.run and pilot.scale write these
    (re.compile(r"fewer than ten examples: validation ran on the training examples"),
     lambda m: _("Fewer than ten examples: validation ran on the training examples.")),
    (re.compile(r"(\d+) example\(s\) were longer than --seq-len and were cut"),
     lambda m: ngettext("%(n)d example was longer than --seq-len and was cut.",
                        "%(n)d examples were longer than --seq-len and were cut.", int(m[1])) % {"n": int(m[1])}),
    (re.compile(r"the data has fewer examples than the timed steps use: batches repeat"),
     lambda m: _("The data has fewer examples than the timed steps use: batches repeat.")),
    (re.compile(r"(\d+) CPU cores for up to (\d+) processes: they share cores, so the efficiencies understate what "
                r"separate devices would give"),
     lambda m: _("%(cores)s CPU cores for up to %(processes)s processes: they share cores, so the efficiencies "
                 "understate what separate devices would give.") % {"cores": m[1], "processes": m[2]}),
)


def warning_text(warning: str):
    for pattern, say in _KNOWN:
        if found := pattern.fullmatch(warning.strip().rstrip(".")):
            return say(found)
    if (get_language() or "en").startswith("en"):
        return warning
    return format_html('<span lang="en">{}</span>', warning)
