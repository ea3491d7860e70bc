"""How long a training run takes, the shortest term that covers it, and what happens if it runs over.

Pure: no Django. The run's size is a number of training tokens (tokens per
epoch × epochs, or optimizer steps × global batch × sequence length); the
throughput is tokens per second of the whole configuration, measured by a
pilot or estimated by the planner (and then marked as such); the overheads
are the time a run spends not training. The wall time is

    loading + training + validation passes + checkpoints × (write + upload) + final export

and the recommended term is the shortest of 3, 7 and 30 days with
``wall × (1 + margin) <= term``; the margin (15 % unless stated) absorbs a
throughput a little below the pilot's and a restart or two.

What a term's end means follows the shop's rules (DESIGN §3 and §6,
``orders.lifecycle``): the customer is warned 24 hours before; at the end the
booking is released, the machine's disks (local NVMe included) are wiped and
the order is completed. Local NVMe is scratch space, not a backup: only what
was uploaded off the machine survives, so a run that overruns loses the
training since its last uploaded checkpoint.

Durations are float seconds. Messages are plain English; the shop shows the
``Advice`` codes and their parameters in the reader's language.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from .errors import PlannerInputError
from .recommend import SECONDS_PER_DAY, TERMS

DEFAULT_MARGIN = 0.15
# orders.lifecycle.WARN_BEFORE: the customer is told this long before the term ends.
WARNING_HOURS_BEFORE_END = 24
# An assumed upload speed to storage off the machine (about 0.8 Gbit/s), for ``upload_seconds``.
DEFAULT_UPLOAD_BYTES_PER_S = 100 * 10**6


@dataclass(frozen=True)
class Advice:
    """One fact or recommendation, as a stable code with its figures; the web layer words it."""

    code: str
    params: Mapping[str, object] = field(default_factory=dict)


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PlannerInputError(name, f"{name.split('.')[-1].replace('_', ' ')} must be a positive whole number, "
                                      f"not {value!r}.")
    return value


def _seconds(value, name: str, *, positive: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        raise PlannerInputError(name, f"{name.split('.')[-1].replace('_', ' ')} must be a "
                                      f"{'positive' if positive else 'non-negative'} number of seconds, not {value!r}.")
    return float(value)


@dataclass(frozen=True)
class RunSize:
    """The training tokens of one complete run, and the figures they came from.

    Build it with ``from_epochs`` or ``from_steps``. From steps, every sequence
    counts at its full length: with shorter, padded sequences that is more
    than the useful tokens a pilot's throughput counts, so the wall time errs
    long.
    """

    tokens: int
    basis: str  # "epochs" or "steps"
    tokens_per_epoch: int | None = None
    epochs: int | None = None
    steps: int | None = None
    global_batch: int | None = None  # sequences per optimizer step, all cards together
    seq_len: int | None = None

    @classmethod
    def from_epochs(cls, tokens_per_epoch: int, epochs: int) -> RunSize:
        per_epoch, count = _positive_int(tokens_per_epoch, "tokens_per_epoch"), _positive_int(epochs, "epochs")
        return cls(per_epoch * count, "epochs", tokens_per_epoch=per_epoch, epochs=count)

    @classmethod
    def from_steps(cls, steps: int, global_batch: int, seq_len: int) -> RunSize:
        values = [_positive_int(v, n) for v, n in ((steps, "steps"), (global_batch, "global_batch"),
                                                   (seq_len, "seq_len"))]
        return cls(values[0] * values[1] * values[2], "steps", steps=values[0], global_batch=values[1],
                   seq_len=values[2])

    def times(self, factor: int) -> RunSize:
        """``factor`` runs of this size one after another (independent experiments in waves)."""
        _positive_int(factor, "runs")
        return RunSize(self.tokens * factor, self.basis, self.tokens_per_epoch,
                       None if self.epochs is None else self.epochs * factor,
                       None if self.steps is None else self.steps * factor, self.global_batch, self.seq_len)


class RateSource(str, Enum):
    PILOT = "pilot"  # measured by ``anchorgpu pilot run`` on the customer's model and data
    ESTIMATE = "estimate"  # the planner's FLOPs estimate (``throughput_estimate``)


@dataclass(frozen=True)
class TokenRate:
    """Training tokens per second of the whole configuration (all its cards), and where the figure came from."""

    tokens_per_s: float
    source: RateSource
    note: str = ""

    def __post_init__(self):
        value = self.tokens_per_s
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise PlannerInputError("tokens_per_s", f"the throughput must be a positive number of tokens per "
                                                    f"second, not {value!r}.")
        object.__setattr__(self, "source", RateSource(self.source))

    @classmethod
    def pilot(cls, tokens_per_s: float, note: str = "") -> TokenRate:
        return cls(tokens_per_s, RateSource.PILOT, note)

    @classmethod
    def estimate(cls, tokens_per_s: float, note: str = "") -> TokenRate:
        return cls(tokens_per_s, RateSource.ESTIMATE, note)


def upload_seconds(nbytes: int, bytes_per_s: float = DEFAULT_UPLOAD_BYTES_PER_S) -> float:
    """Seconds to upload ``nbytes`` (a pilot's checkpoint size) off the machine."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise PlannerInputError("checkpoint_bytes", f"checkpoint bytes must be a whole number, not {nbytes!r}.")
    return nbytes / _seconds(bytes_per_s, "upload_bytes_per_s", positive=True)


@dataclass(frozen=True)
class Overheads:
    """Time a run spends not training, in seconds.

    The defaults are stated assumptions for a 7B-class fine-tune; replace them
    with the pilot's figures where it has them (its checkpoint ``write_s``,
    ``upload_seconds`` of its checkpoint bytes, its validation seconds scaled
    to the validation set).

    - ``loading_s``: copying weights and data onto the machine, tokenising,
      loading the model, the first steps' compilation: 20 minutes.
    - ``checkpoint_every_s``: training time between two checkpoints: 3 hours.
      It bounds what an overrun loses.
    - ``checkpoints``: how many; ``None`` means one per ``checkpoint_every_s``
      of training, at least one (the last one ends the training).
    - ``checkpoint_write_s`` (2 minutes) and ``checkpoint_upload_s`` (10
      minutes, about 60 GB at ``DEFAULT_UPLOAD_BYTES_PER_S``) per checkpoint;
      uploads are counted as if they block the training.
    - ``validation_passes``: ``None`` means one before each checkpoint;
      ``validation_pass_s``: 5 minutes each.
    - ``export_s``: the final export (merging adapters, writing safetensors)
      and its upload: 15 minutes.
    """

    loading_s: float = 20 * 60
    checkpoint_every_s: float = 3 * 3600
    checkpoints: int | None = None
    checkpoint_write_s: float = 120.0
    checkpoint_upload_s: float = 600.0
    validation_passes: int | None = None
    validation_pass_s: float = 300.0
    export_s: float = 15 * 60

    def validate(self) -> Overheads:
        for name in ("loading_s", "checkpoint_write_s", "checkpoint_upload_s", "validation_pass_s", "export_s"):
            _seconds(getattr(self, name), f"overheads.{name}")
        _seconds(self.checkpoint_every_s, "overheads.checkpoint_every_s", positive=True)
        for name in ("checkpoints", "validation_passes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise PlannerInputError(f"overheads.{name}", f"{name.replace('_', ' ')} must be a whole number "
                                                             f"from 0, not {value!r}.")
        return self


@dataclass(frozen=True)
class WallTime:
    """A run's wall time, part by part."""

    loading_s: float
    training_s: float
    validation_s: float
    checkpoint_s: float  # writes and uploads
    export_s: float
    checkpoints: int
    validation_passes: int

    @property
    def total_s(self) -> float:
        return self.loading_s + self.training_s + self.validation_s + self.checkpoint_s + self.export_s

    @property
    def middle_s(self) -> float:
        """Training with its validation passes and checkpoints, which the model spreads evenly over the training."""
        return self.training_s + self.validation_s + self.checkpoint_s


def wall_time(size: RunSize, rate: TokenRate, overheads: Overheads | None = None) -> WallTime:
    overheads = (overheads or Overheads()).validate()
    training = size.tokens / rate.tokens_per_s
    checkpoints = overheads.checkpoints
    if checkpoints is None:
        checkpoints = max(1, math.ceil(training / overheads.checkpoint_every_s))
    passes = checkpoints if overheads.validation_passes is None else overheads.validation_passes
    return WallTime(overheads.loading_s, training, passes * overheads.validation_pass_s,
                    checkpoints * (overheads.checkpoint_write_s + overheads.checkpoint_upload_s), overheads.export_s,
                    checkpoints, passes)


@dataclass(frozen=True)
class OverrunFacts:
    """What the end of a ``term_days`` term means for this run.

    ``progress``: the share of the training done when the term ends (1 when
    the run finishes); ``saved_tokens``: what the last checkpoint uploaded
    before the end holds; ``lost_training_s``: training done since then,
    wiped with the machine; ``resume_s``: the wall time a new term needs to
    finish from the saved checkpoint (0 when the run finishes);
    ``max_lost_training_s``: what any overrun loses at most, with
    checkpoints uploaded as planned (one checkpoint interval);
    ``tolerated_slowdown``: how much slower than planned the whole run may
    be and still finish (negative: it does not finish as planned).
    """

    term_days: int
    completes: bool
    progress: float
    saved_tokens: int
    lost_training_s: float
    resume_s: float
    max_lost_training_s: float
    tolerated_slowdown: float
    consequences: tuple[Advice, ...]


def overrun_at(size: RunSize, wall: WallTime, term_days: int) -> OverrunFacts:
    """The facts of a ``term_days`` term's end for a run of ``size`` that takes ``wall``."""
    term_s = _positive_int(term_days, "term_days") * SECONDS_PER_DAY
    completes = wall.total_s <= term_s
    n = wall.checkpoints
    if wall.middle_s > 0:
        progress = min(1.0, max(0.0, (term_s - wall.loading_s) / wall.middle_s))
    else:
        progress = 1.0 if term_s >= wall.loading_s else 0.0
    saved = 1 if completes else (math.floor(progress * n + 1e-9) / n if n else 0.0)
    lost = 0.0 if completes else max(0.0, progress - saved) * wall.training_s
    resume = 0.0 if completes else wall.loading_s + (1 - saved) * wall.middle_s + wall.export_s
    interval = wall.training_s / n if n else wall.training_s
    consequences = [
        Advice("term_end_warning", {"hours_before": WARNING_HOURS_BEFORE_END}),
        Advice("term_end_release_and_wipe", {"term_days": term_days}),
        Advice("local_nvme_not_a_backup", {}),
        Advice("upload_checkpoints_off_machine", {"checkpoints": n, "max_lost_training_s": interval}),
    ]
    if not completes:
        consequences.append(Advice("run_unfinished_at_term_end", {
            "progress": progress, "saved_tokens": int(size.tokens * saved), "lost_training_s": lost,
            "resume_s": resume}))
    return OverrunFacts(term_days, completes, progress if not completes else 1.0, int(size.tokens * saved), lost,
                        resume, interval, term_s / wall.total_s - 1 if wall.total_s else math.inf,
                        tuple(consequences))


@dataclass(frozen=True)
class TermFit:
    term_days: int
    covers: bool  # wall × (1 + margin) <= the term
    slack_s: float  # the term less wall × (1 + margin); negative: short by that much


@dataclass(frozen=True)
class TermAdvice:
    """The shortest term that covers a run with the margin, or ``term_days`` None and the shortfall."""

    size: RunSize
    rate: TokenRate
    wall: WallTime
    margin: float
    terms: tuple[TermFit, ...]
    term_days: int | None
    overrun: OverrunFacts  # for the recommended term, or the longest when none covers the run
    notes: tuple[Advice, ...]

    @property
    def needed_s(self) -> float:
        return self.wall.total_s * (1 + self.margin)

    @property
    def fits(self) -> bool:
        return self.term_days is not None

    @property
    def slack_s(self) -> float | None:
        """Time left in the recommended term after the run and its margin."""
        return next((t.slack_s for t in self.terms if t.term_days == self.term_days), None)

    @property
    def shortfall_s(self) -> float | None:
        """When no term covers the run: how much the longest term lacks."""
        return None if self.fits else -self.terms[-1].slack_s


def _check_margin(margin) -> float:
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin <= 1:
        raise PlannerInputError("margin", f"the margin is a fraction from 0 to 1 (0.15 for 15 %), not {margin!r}.")
    return float(margin)


def recommend_term(size: RunSize, rate: TokenRate, *, overheads: Overheads | None = None,
                   margin: float = DEFAULT_MARGIN, terms: Sequence[int] = TERMS) -> TermAdvice:
    """The run's wall time, and the shortest of ``terms`` (days) that holds it with ``margin``."""
    margin = _check_margin(margin)
    terms = tuple(sorted({_positive_int(t, "term_days") for t in terms}))
    if not terms:
        raise PlannerInputError("terms", "at least one term is needed.")
    wall = wall_time(size, rate, overheads)
    needed = wall.total_s * (1 + margin)
    fits = tuple(TermFit(t, needed <= t * SECONDS_PER_DAY, t * SECONDS_PER_DAY - needed) for t in terms)
    chosen = next((f.term_days for f in fits if f.covers), None)
    notes = [Advice("margin", {"margin": margin, "margin_s": needed - wall.total_s})]
    if rate.source is RateSource.ESTIMATE:
        notes.append(Advice("throughput_estimated", {"note": rate.note}))
    if chosen is None:
        notes.append(Advice("no_term_covers_run", {"longest_term_days": terms[-1], "shortfall_s": -fits[-1].slack_s}))
    return TermAdvice(size, rate, wall, margin, fits, chosen, overrun_at(size, wall, chosen or terms[-1]),
                      tuple(notes))
