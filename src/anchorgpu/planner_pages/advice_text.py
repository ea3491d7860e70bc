"""The planner's advice codes (``planner.term``, ``planner.purpose``) in the reader's language."""

from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from anchorgpu.formats.display import number, percent
from anchorgpu.planner.term import Advice


def duration(seconds: float | None) -> str:
    """``3 d 4 h``, ``5 h 20 min``, ``12 min``: a length of time as a reader takes it in."""
    if seconds is None:
        return "—"
    minutes = max(0, round(seconds / 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return _("%(d)d d %(h)d h") % {"d": days, "h": hours}
    if hours:
        return _("%(h)d h %(m)d min") % {"h": hours, "m": minutes}
    return _("%(m)d min") % {"m": minutes}


def _card(p: dict) -> str:
    return f'{int(p.get("quantity", 1))} × {_(str(p.get("product_name", p.get("product", ""))))}'


def _number(value, digits: int = 0) -> str:
    return number(value, digits)


def _percent(fraction) -> str:
    return percent(float(fraction) * 100)


def advice_text(advice: Advice) -> str:
    p, code = dict(advice.params), advice.code
    texts = {
        "margin": lambda: (
            _(
                "A margin of %(margin)s (%(time)s) is added for a throughput below the measured one and "
                "a restart or two."
            )
            % {"margin": _percent(p["margin"]), "time": duration(p["margin_s"])}
        ),
        "throughput_estimated": lambda: _(
            "The throughput is the planner's estimate from the card's peak speed, "
            "not a measurement: a pilot run on the card measures it."
        ),
        "no_term_covers_run": lambda: (
            _(
                "Even the %(days)d-day term is %(time)s short: split the run over two "
                "terms (resuming from an uploaded checkpoint), or choose faster or more "
                "cards."
            )
            % {"days": p["longest_term_days"], "time": duration(p["shortfall_s"])}
        ),
        "term_end_warning": lambda: (
            ngettext(
                "We e-mail you %(hours)d hour before the term ends.",
                "We e-mail you %(hours)d hours before the term ends.",
                p["hours_before"],
            )
            % {"hours": p["hours_before"]}
        ),
        "term_end_release_and_wipe": lambda: _(
            "When the term ends the cards are released and their disks are "
            "wiped, local NVMe included; the machine can no longer be reached."
        ),
        "local_nvme_not_a_backup": lambda: _(
            "Local NVMe is fast scratch space, not a backup: only what you upload off the machine outlives the term."
        ),
        "upload_checkpoints_off_machine": lambda: (
            _(
                "Upload each checkpoint off the machine as soon as it is written (%(n)d planned): a run that overruns "
                "then loses at most %(time)s of training."
            )
            % {"n": p["checkpoints"], "time": duration(p["max_lost_training_s"])}
        ),
        "run_unfinished_at_term_end": lambda: (
            _(
                "At the end of this term the run would be %(done)s done; its last uploaded checkpoint would hold "
                "%(tokens)s tokens, %(lost)s of training would be lost, and finishing would need %(resume)s more."
            )
            % {
                "done": _percent(p["progress"]),
                "tokens": _number(p["saved_tokens"]),
                "lost": duration(p["lost_training_s"]),
                "resume": duration(p["resume_s"]),
            }
        ),
        "smallest_fit": lambda: (
            _("To make the run possible at all: %(config)s is the smallest configuration that fits.")
            % {"config": _card(p)}
        ),
        "cheapest_fit": lambda: _("%(config)s is the cheapest configuration that fits.") % {"config": _card(p)},
        "single_experiment": lambda: (
            _("One experiment: %(config)s is the cheapest configuration that fits.") % {"config": _card(p)}
        ),
        "fastest_fit": lambda: (
            _("For a shorter step: %(config)s is the fastest configuration that fits (%(rate)s tokens/s).")
            % {"config": _card(p), "rate": _number(p["tokens_per_s"])}
        ),
        "global_batch_split_across_cards": lambda: (
            _("Its %(cards)d cards share each global batch, so every step takes less time.") % {"cards": p["cards"]}
        ),
        "fastest_single_unit": lambda: (
            _("To keep each step on one unit: %(config)s is the fastest (%(rate)s tokens/s).")
            % {"config": _card(p), "rate": _number(p["tokens_per_s"])}
        ),
        "data_parallel": lambda: (
            _(
                "For a larger global batch: data parallelism on %(config)s multiplies the batch "
                "by %(factor)s at about the same step time."
            )
            % {"config": _card(p), "factor": _number(p["batch_factor"], 1)}
        ),
        "gradient_accumulation_alternative": lambda: (
            _("Gradient accumulation on %(cards)d card(s) reaches the same batch with steps %(factor)s times longer.")
            % {"cards": p["cards"], "factor": _number(p["steps_longer_by"], 1)}
        ),
        "gradient_accumulation": lambda: (
            _(
                "No configuration that fits has more cards than %(config)s: gradient "
                "accumulation gives the larger batch there, with longer steps."
            )
            % {"config": _card(p)}
        ),
        "independent_single_card_runs": lambda: (
            _(
                "For %(n)d independent experiments: %(config)s runs %(at_once)d single-card runs side by side, in "
                "%(waves)d wave(s)."
            )
            % {"n": p["experiments"], "config": _card(p), "at_once": p["runs_at_once"], "waves": p["waves"]}
        ),
        "no_distributed_run_needed": lambda: _(
            "No distributed run is needed: nothing passes between the "
            "experiments, and one that fails stops only itself."
        ),
        "independent_multi_card_runs": lambda: (
            _("Each experiment needs %(cards)d cards: run them one after another on %(config)s.")
            % {"cards": p["cards_each"], "config": _card(p)}
        ),
        "nothing_fits": lambda: _("Nothing in the catalog fits this step as it is."),
        "see_suggested_changes": lambda: _("The changes listed above would make it fit."),
        "no_throughput_figures": lambda: _("There are no throughput figures to compare the cards' speed."),
    }
    text = texts.get(code)
    return text() if text is not None else code
