"""From a memory estimate to a purchase: which product and quantity, at what price.

Pure: takes offers (memory per card, cards per unit, quantities on sale,
prices per term) and an estimate per number of cards; says for every
product and quantity whether a step fits with the operator's headroom,
which component overflows where it does not, the cheapest configuration that
fits, what change would make a cheaper one fit, and the cost per million
training tokens.

Units: memory is in bytes. The catalog states memory in GB of 10^9 bytes
(``Offer.from_gb``), which is below what the cards really have (an "80 GB"
card has about 85.9e9 bytes): the planner errs on the safe side.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from .analytic import COMPONENTS, Breakdown, Reserve, estimate
from .device_memory import DeviceMeasures, card_generation
from .errors import PlannerInputError
from .model_spec import ModelSpec
from .params import parameter_counts
from .setup import ZERO, TrainingSetup

GB = 10**9
DEFAULT_HEADROOM = 0.10
TERMS = (3, 7, 30)
SECONDS_PER_DAY = 86400
COMPONENT_LABELS = {"weights": "the weights", "gradients": "the gradients", "optimizer": "the optimizer state",
                    "activations": "the activations", "temporaries": "temporary buffers",
                    "reserve": "the framework's reserve"}


@dataclass(frozen=True)
class Offer:
    """A product as the planner sees it.

    ``prices``: quantity -> term in days -> total price of that many units for
    that term (what the shop's price list gives). ``peak_flops_per_card``:
    dense bf16 FLOP/s of one card, for the throughput estimate.
    """

    slug: str
    name: str
    memory_bytes_per_card: int
    cards_per_unit: int
    quantities: tuple[int, ...]
    prices: Mapping[int, Mapping[int, Decimal]] = field(default_factory=dict)
    currency: str = ""
    peak_flops_per_card: float | None = None

    @classmethod
    def from_gb(cls, slug: str, name: str, memory_gb_per_card: int | float, cards_per_unit: int,
                quantities: Iterable[int], **more) -> Offer:
        """Memory given in the catalog's GB (10^9 bytes)."""
        return cls(slug, name, int(memory_gb_per_card * GB), cards_per_unit, tuple(quantities), **more)

    def validate(self) -> Offer:
        for value, what in ((self.memory_bytes_per_card, "memory per card"), (self.cards_per_unit, "cards per unit")):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise PlannerInputError(f"offer.{self.slug}", f"{what} must be a positive whole number, "
                                                             f"not {value!r}.")
        for quantity in self.quantities:
            if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity <= 0:
                raise PlannerInputError(f"offer.{self.slug}", f"quantities must be positive whole numbers, "
                                                             f"not {quantity!r}.")
        return self

    def price(self, quantity: int, term_days: int) -> Decimal | None:
        return self.prices.get(quantity, {}).get(term_days)

    @property
    def generation(self) -> str | None:
        """The card generation (``device_memory.CARDS``) the slug or name names, or None (the largest is assumed)."""
        return card_generation(self.slug, self.name)


@dataclass(frozen=True)
class Throughput:
    """Training tokens per second per card: measured by a pilot, or estimated from FLOPs.

    ``measured``: product slug -> tokens/s per card from a pilot run.
    Without one, tokens/s per card = peak FLOP/s × ``utilisation`` / FLOPs per
    token, with FLOPs per token = 2 × (matmul parameters) + 2 × layers ×
    sequence × query width for the forward (causal attention), × 3 for a full
    fine-tune (backward twice the forward), × 2 for LoRA (no weight grads for
    the base), plus one forward more with checkpointing.
    ``multi_card_efficiency``: the share of per-card throughput kept on 2+ cards.
    """

    measured: Mapping[str, float] = field(default_factory=dict)
    utilisation: float = 0.35
    multi_card_efficiency: float = 0.90

    def validate(self) -> Throughput:
        for slug, value in self.measured.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise PlannerInputError("throughput", f"the measured tokens/s for {slug} must be positive, "
                                                      f"not {value!r}.")
        for value, what in ((self.utilisation, "utilisation"), (self.multi_card_efficiency, "multi-card efficiency")):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise PlannerInputError("throughput", f"the {what} is a fraction above 0 and at most 1, "
                                                      f"not {value!r}.")
        return self


def flops_per_token(spec: ModelSpec, setup: TrainingSetup) -> float:
    forward = 2 * parameter_counts(spec).matmul + 2 * spec.num_layers * setup.seq_len * spec.q_dim
    passes = (2 if setup.is_lora else 3) + (1 if setup.grad_checkpointing else 0)
    return forward * passes


@dataclass(frozen=True)
class Option:
    offer: Offer
    quantity: int
    cards: int
    parallel: str
    breakdown: Breakdown
    usable_bytes: int  # memory per card less the headroom
    prices: Mapping[int, Decimal]  # term days -> price
    tokens_per_second: float | None = None  # all cards together
    cost_per_million_tokens: Mapping[int, Decimal] = field(default_factory=dict)

    @property
    def capacity_bytes(self) -> int:
        return self.offer.memory_bytes_per_card

    @property
    def measures(self) -> DeviceMeasures:
        """allocated / reserved / device-used peaks per card on this offer's card generation."""
        return self.breakdown.measures(self.offer.generation)

    @property
    def device_used_bytes(self) -> int:
        """What nvidia-smi / amd-smi would show per card at the peak: what "fits" is decided on."""
        return self.measures.device_used_bytes

    @property
    def fits(self) -> bool:
        return self.device_used_bytes <= self.usable_bytes

    @property
    def headroom_bytes(self) -> int:
        """Memory per card left at the peak (negative when the step does not fit at all)."""
        return self.capacity_bytes - self.device_used_bytes

    @property
    def headroom_fraction(self) -> float:
        return self.headroom_bytes / self.capacity_bytes

    @property
    def overflow(self) -> str | None:
        """The component that takes the stack (weights, gradients, ... in that order) past the usable memory."""
        total = 0
        for name in COMPONENTS:
            total += self._component(name)
            if total > self.usable_bytes:
                return name
        return None

    def _component(self, name: str) -> int:
        if name == "reserve":  # on this card: the reserve up to its device_used_bytes
            return self.device_used_bytes - self.breakdown.live
        return getattr(self.breakdown, name)

    @property
    def largest_component(self) -> str:
        parts = self.breakdown.components()
        return max(parts, key=parts.get)

    @property
    def reason(self) -> str:
        peak, usable = self.device_used_bytes / GB, self.usable_bytes / GB
        if self.fits:
            return f"fits: {peak:.1f} GB device-used of {self.capacity_bytes / GB:.0f} GB per card, " \
                   f"{self.headroom_fraction:.0%} left"
        if self.overflow == COMPONENTS[0]:
            return f"does not fit: the weights alone need {self.breakdown.weights / GB:.1f} GB per card, " \
                   f"more than the {usable:.1f} GB usable"
        largest = self.largest_component
        return f"does not fit: needs {peak:.1f} GB device-used per card, {usable:.1f} GB usable; it overflows at " \
               f"{COMPONENT_LABELS[self.overflow]} (largest part: {COMPONENT_LABELS[largest]}, " \
               f"{self.breakdown.components()[largest] / GB:.1f} GB)"

    def rank(self, term_days: int) -> tuple:
        """Cheapest first for ``term_days``; unpriced after priced; ties go to fewer cards."""
        price = self.prices.get(term_days)
        return (price is None, price if price is not None else Decimal(0), self.cards,
                self.cards * self.capacity_bytes, self.offer.slug, self.quantity)


@dataclass(frozen=True)
class Recommendation:
    options: tuple[Option, ...]
    best: Option | None
    term_days: int
    headroom: float

    @property
    def failing(self) -> tuple[Option, ...]:
        return tuple(o for o in self.options if not o.fits)


def _cost(price: Decimal, tokens_per_second: float, term_days: int) -> Decimal:
    tokens = Decimal(repr(tokens_per_second)) * term_days * SECONDS_PER_DAY
    return (price / tokens * 1_000_000).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)


def _check_headroom(headroom: float) -> None:
    if isinstance(headroom, bool) or not isinstance(headroom, (int, float)) or not 0 <= headroom < 1:
        raise PlannerInputError("headroom", f"the headroom is a fraction from 0 to below 1, not {headroom!r}.")


def recommend(estimate_for: Callable[[int], Breakdown], offers: Sequence[Offer], *,
              headroom: float = DEFAULT_HEADROOM, term_days: int = 30,
              parallel_for: Callable[[int], str] = lambda cards: "single" if cards == 1 else "ddp",
              tokens_per_second_for: Callable[[Offer, int], float | None] | None = None) -> Recommendation:
    """Every product and quantity, whether it fits, and the cheapest that does for ``term_days``.

    ``estimate_for(cards)`` gives the per-device breakdown on that many cards
    (the analytic estimate, or later the simulation); ``tokens_per_second_for``
    the throughput of all cards of an option.
    """
    _check_headroom(headroom)
    if isinstance(term_days, bool) or not isinstance(term_days, int) or term_days <= 0:
        raise PlannerInputError("term_days", f"the term is a positive number of days, not {term_days!r}.")
    options = []
    for offer in offers:
        offer.validate()
        usable = int(offer.memory_bytes_per_card * (1 - headroom))
        for quantity in sorted(set(offer.quantities)):
            cards = quantity * offer.cards_per_unit
            prices = {t: p for t in sorted(set(TERMS) | {term_days}) if (p := offer.price(quantity, t)) is not None}
            rate = tokens_per_second_for(offer, cards) if tokens_per_second_for else None
            costs = {t: _cost(p, rate, t) for t, p in prices.items()} if rate else {}
            options.append(Option(offer, quantity, cards, parallel_for(cards), estimate_for(cards), usable, prices,
                                  rate, costs))
    fitting = [o for o in options if o.fits]
    best = min(fitting, key=lambda o: o.rank(term_days)) if fitting else None
    return Recommendation(tuple(options), best, term_days, headroom)


def card_counts(offers: Sequence[Offer]) -> tuple[int, ...]:
    """Every number of cards an option of ``offers`` has (1 when there are no offers: the setup alone)."""
    return tuple(sorted({q * o.cards_per_unit for o in offers for q in o.quantities})) or (1,)


def setup_for_cards(setup: TrainingSetup, cards: int) -> TrainingSetup:
    """The setup on ``cards`` devices: several run the sharding asked for (FSDP, ZeRO-2/3), else DDP; one card
    runs alone, or under ZeRO where that was asked for (it runs on one GPU too, e.g. with ZeRO-Offload). FSDP's
    parameter offload needs several cards: one card keeps only the optimizer offload (the higher peak)."""
    if cards == 1:
        if setup.parallel in ZERO:
            return setup.replace(gpus=1)
        alone = setup.replace(parallel="single", gpus=1)
        return alone.replace(offload="optimizer") if alone.offload == "optimizer_and_params" else alone
    return setup.replace(parallel=setup.parallel if setup.parallel in ("fsdp", *ZERO) else "ddp", gpus=cards)


@dataclass(frozen=True)
class Suggestion:
    change: str  # what to change, as a short key (grad_checkpointing, lora, qlora, fsdp, ...)
    description: str
    setup: TrainingSetup
    option: Option  # the cheapest option that fits with the change


@dataclass(frozen=True)
class Plan:
    spec: ModelSpec
    setup: TrainingSetup
    recommendation: Recommendation
    suggestions: tuple[Suggestion, ...]
    throughput_note: str

    @property
    def best(self) -> Option | None:
        return self.recommendation.best

    @property
    def options(self) -> tuple[Option, ...]:
        return self.recommendation.options


EstimateWith = Callable[[ModelSpec, TrainingSetup, Reserve], Breakdown]


def _evaluate(spec: ModelSpec, setup: TrainingSetup, offers: Sequence[Offer], headroom: float, term_days: int,
              throughput: Throughput, reserve: Reserve, estimate_with: EstimateWith = estimate) -> Recommendation:
    cache: dict[int, Breakdown] = {}

    def estimate_for(cards: int) -> Breakdown:
        if cards not in cache:
            cache[cards] = estimate_with(spec, setup_for_cards(setup, cards), reserve)
        return cache[cards]

    def rate(offer: Offer, cards: int) -> float | None:
        per_card = throughput.measured.get(offer.slug)
        if per_card is None and offer.peak_flops_per_card:
            per_card = offer.peak_flops_per_card * throughput.utilisation / flops_per_token(spec, setup)
        if per_card is None:
            return None
        return per_card * cards * (throughput.multi_card_efficiency if cards > 1 else 1.0)

    return recommend(estimate_for, offers, headroom=headroom, term_days=term_days, tokens_per_second_for=rate,
                     parallel_for=lambda cards: setup_for_cards(setup, cards).parallel)


def _changes(setup: TrainingSetup) -> list[tuple[str, str, TrainingSetup]]:
    changes = []
    if not setup.grad_checkpointing:
        changes.append(("grad_checkpointing", "turn on gradient checkpointing", setup.replace(grad_checkpointing=True)))
    if setup.method == "full":
        changes.append(("lora", f"train LoRA adapters (rank {setup.lora_rank}, {', '.join(setup.lora_targets)}) "
                                "instead of all weights", setup.replace(method="lora")))
    if setup.method != "qlora":
        precision = "bf16_mixed" if setup.precision == "fp32" else setup.precision
        changes.append(("qlora", "train LoRA adapters on a 4-bit (NF4) base",
                        setup.replace(method="qlora", precision=precision)))
    if setup.parallel != "fsdp":
        changes.append(("fsdp", "shard weights, gradients and optimizer state with FSDP across the cards",
                        setup.replace(parallel="fsdp", gpus=2)))
    if setup.optimizer == "adamw":
        changes.append(("adamw8bit", "use 8-bit AdamW", setup.replace(optimizer="adamw8bit")))
    if setup.precision == "fp32":
        changes.append(("bf16_mixed", "train in bf16 mixed precision", setup.replace(precision="bf16_mixed")))
    if setup.micro_batch > 1:
        changes.append(("micro_batch", "use micro-batches of 1 (gradient accumulation keeps the batch size)",
                        setup.replace(micro_batch=1)))
    return changes


def plan(spec: ModelSpec, setup: TrainingSetup, offers: Sequence[Offer], *, headroom: float = DEFAULT_HEADROOM,
         term_days: int = 30, throughput: Throughput | None = None, reserve: Reserve | None = None,
         estimate_with: EstimateWith = estimate) -> Plan:
    """The full answer for one model and setup: options, the cheapest fit, and changes that would cost less.

    ``estimate_with(spec, setup, reserve)`` gives the per-device breakdown of
    the options (the analytic ``estimate``, or ``measured.MeasuredSteps`` from
    simulated steps); the suggested changes are always estimated analytically.

    A suggestion is one change (or two together, when neither alone does as
    well) after which a cheaper configuration fits than fits now; for shorter
    sequences, the longest that does.
    """
    throughput, reserve = (throughput or Throughput()).validate(), reserve or Reserve()
    setup.validate(spec)

    def best(changed: TrainingSetup) -> Option | None:
        try:
            changed.validate(spec)
        except PlannerInputError:
            return None
        return _evaluate(spec, changed, offers, headroom, term_days, throughput, reserve).best

    def beats(option: Option | None, other: Option | None) -> bool:
        return option is not None and (other is None or option.rank(term_days) < other.rank(term_days))

    current = _evaluate(spec, setup, offers, headroom, term_days, throughput, reserve, estimate_with)
    suggestions, singles = [], {}
    for key, description, changed in _changes(setup):
        singles[key] = (description, changed, best(changed))
        if beats(singles[key][2], current.best):
            suggestions.append(Suggestion(key, description, changed, singles[key][2]))
    keys = list(singles)
    for i, first in enumerate(keys):
        for second in keys[i + 1:]:
            if {first, second} == {"lora", "qlora"}:
                continue
            changed = _combine(setup, singles[first][1], singles[second][1])
            option = best(changed)
            if beats(option, current.best) and all(beats(option, singles[k][2]) for k in (first, second)):
                suggestions.append(Suggestion(f"{first}+{second}", f"{singles[first][0]}, and "
                                                                   f"{singles[second][0]}", changed, option))
    seq = setup.seq_len // 2
    while seq >= 128:
        changed = setup.replace(seq_len=seq)
        option = best(changed)
        if beats(option, current.best):
            suggestions.append(Suggestion("seq_len", f"shorten sequences to {seq} tokens", changed, option))
            break
        seq //= 2
    suggestions.sort(key=lambda s: s.option.rank(term_days))
    note = (f"tokens/s per card measured by a pilot for {', '.join(sorted(throughput.measured))}; "
            if throughput.measured else "") + \
        f"otherwise estimated from peak FLOPs at {throughput.utilisation:.0%} utilisation, " \
        f"{throughput.multi_card_efficiency:.0%} per-card efficiency on several cards; " \
        "cost per million tokens assumes the cards train for the whole term."
    return Plan(spec, setup, current, tuple(suggestions), note)


def _combine(base: TrainingSetup, first: TrainingSetup, second: TrainingSetup) -> TrainingSetup:
    """``base`` with the fields either change altered."""
    fields = {name: getattr(changed, name) for changed in (first, second) for name in base.__dataclass_fields__
              if getattr(changed, name) != getattr(base, name)}
    return base.replace(**fields)


def prices_from_price_list(price_list, *, product: str, product_name: str, cards_per_unit: int,
                           quantities: Iterable[int], terms: Iterable[int] = TERMS) -> dict[int, dict[int, Decimal]]:
    """Offer prices from the shop's ``catalog.pricing.PriceList`` (quantity -> term -> total)."""
    from anchorgpu.catalog.pricing import price  # pure domain code, no Django
    from anchorgpu.catalog.rules import RuleError

    table: dict[int, dict[int, Decimal]] = {}
    for quantity in quantities:
        for term in terms:
            try:
                total = price(price_list, product=product, product_name=product_name, cards_per_unit=cards_per_unit,
                              quantity=quantity, term_days=term).total
            except RuleError:
                continue
            table.setdefault(quantity, {})[term] = total
    return table
