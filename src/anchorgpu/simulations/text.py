"""A running simulation's stage (a ``planner.progress`` code, as the job
stores it) and a failed one's reason, in the reader's language."""

from __future__ import annotations

import re

from django.utils.html import format_html
from django.utils.translation import get_language, gettext, ngettext
from django.utils.translation import gettext as _

from anchorgpu.planner.progress import Progress


def progress_text(code: str) -> str:
    progress = Progress.parse(code)
    if progress is None:  # not a code (a job stored by an older runner): say only that it runs
        return _("simulating…")
    cards = progress.cards
    where = (_("one card") if cards == 1 else
             ngettext("FSDP over %(cards)d card", "FSDP over %(cards)d cards", cards) % {"cards": cards})
    if progress.stage == "step":
        return _("step %(step)d of %(steps)d: %(where)s") % {"step": progress.step, "steps": progress.steps,
                                                              "where": where}
    what = {"build": _("building the model on the meta device"),
            "shard": ngettext("sharding the model with FSDP2 over %(cards)d rank",
                              "sharding the model with FSDP2 over %(cards)d ranks", cards) % {"cards": cards},
            "place": _("placing the parameters"),
            "warmup": _("warm-up step (creates the optimizer state)"),
            "measure": _("measured step")}[progress.stage]
    if progress.steps:
        return _("%(where)s: %(what)s") % {"where": where, "what": what}
    return what


_RUNNER_SENTENCES = (  # what simulations.runner stores, English, with the figures it puts in
    (re.compile(r"The simulation could not be started\."), lambda m: _("The simulation could not be started.")),
    (re.compile(r"The simulation ran longer than (\d+) s and was stopped\."),
     lambda m: _("The simulation ran longer than %(seconds)s s and was stopped.") % {"seconds": m[1]}),
    (re.compile(r"The simulation stopped without an answer \(status (-?\d+|None)\); the operators have its log\."),
     lambda m: _("The simulation stopped without an answer (status %(status)s); the operators have its log.")
     % {"status": m[1]}),
    (re.compile(r"The simulation's answer was malformed\."), lambda m: _("The simulation's answer was malformed.")),
)


def error_text(error: str) -> str:
    """A failed job's stored reason in the active language: the runner's own sentences and anything the
    catalogs carry are translated; any other detail (the planner's words about an input) is shown as it
    came, marked as English so that a reader and a screen reader know."""
    for pattern, say in _RUNNER_SENTENCES:
        if found := pattern.fullmatch(error):
            return say(found)
    translated = gettext(error)
    if translated != error or (get_language() or "en").startswith("en"):
        return translated
    return format_html('{} <span lang="en">{}</span>', _("Details, in English:"), error)
