"""Where a running simulation is, as a code rather than a sentence.

The simulation reports its stages through a callback; the child process of
the shop writes them as codes that the job stores, and the shop's pages say
them in the reader's language when they are shown. The command line prints
``english()``. A code reads ``<stage>:<step>:<steps>:<cards>``: the stage,
which of the distinct steps is being measured (1-based, 0 when unknown),
how many there are, and the cards of that step (1: one card; more: FSDP
over that many cards).
"""

from __future__ import annotations

from dataclasses import dataclass

STAGES = ("step", "build", "shard", "place", "warmup", "measure")


@dataclass(frozen=True)
class Progress:
    stage: str
    step: int = 0
    steps: int = 0
    cards: int = 1

    def code(self) -> str:
        return f"{self.stage}:{self.step}:{self.steps}:{self.cards}"

    @classmethod
    def parse(cls, code: str) -> Progress | None:
        """The progress a code names; None for anything else (an older English line, a typo)."""
        parts = (code or "").split(":")
        if len(parts) != 4 or parts[0] not in STAGES or not all(p.isdigit() for p in parts[1:]):
            return None
        step, steps, cards = (int(p) for p in parts[1:])
        return cls(parts[0], step, steps, max(cards, 1))

    def within(self, step: int, steps: int) -> Progress:
        return Progress(self.stage, step, steps, self.cards)

    def english(self) -> str:
        where = "one card" if self.cards == 1 else f"FSDP over {self.cards} cards"
        what = {"step": f"step {self.step} of {self.steps}: {where}",
                "build": "building the model on the meta device",
                "shard": f"sharding the model with FSDP2 over {self.cards} ranks",
                "place": "placing the parameters",
                "warmup": "warm-up step (creates the optimizer state)",
                "measure": "measured step"}[self.stage]
        if self.stage != "step" and self.steps:
            return f"{where}: {what}"
        return what
