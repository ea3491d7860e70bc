"""The planner's throughput estimate, for when no pilot has run: FLOPs per token over a share of the card's peak.

    tokens/s = cards × peak bf16 dense FLOP/s per card × utilisation / FLOPs per token
               (× multi-card efficiency on two or more cards)

FLOPs per token are ``recommend.flops_per_token``: the forward pass costs
2 FLOPs per matmul parameter plus causal attention; a full fine-tune costs
three forwards (about 6 × parameters per token: the backward computes
gradients for both activations and weights), LoRA two (about 4 × parameters:
the frozen base needs activation gradients only; the adapters are too small
to count), and gradient checkpointing one forward more. Utilisation (model
FLOPs over peak) and the multi-card efficiency are ``recommend.Throughput``'s
defaults (35 % and 90 %). Every rate made here is marked as an estimate.
"""

from __future__ import annotations

from .errors import PlannerInputError
from .model_spec import ModelSpec
from .recommend import Throughput, flops_per_token
from .setup import TrainingSetup
from .term import TokenRate

# Peak dense (no 2:4 sparsity) bf16 tensor FLOP/s of one card, from the vendors' data sheets; where a sheet gives
# the sparse figure only, half of it. Keys are the shop's product slugs (``demo.PRODUCTS``).
PEAK_BF16_DENSE_FLOPS: dict[str, float] = {
    "a100-sxm-80gb": 312e12,  # NVIDIA A100 Tensor Core GPU data sheet: BF16 312 TFLOPS (624 with sparsity)
    "h100-sxm-80gb": 989e12,  # NVIDIA H100 data sheet, SXM: BF16 1,979 TFLOPS with sparsity
    "h200-141gb": 989e12,  # NVIDIA H200 data sheet, SXM: BF16 1,979 TFLOPS with sparsity (same GH100 compute)
    "mi300x-192gb": 1307.4e12,  # AMD Instinct MI300X data sheet: peak BF16 1,307.4 TFLOPS (2,614.9 with sparsity)
    "b200-lot-2x180gb": 2250e12,  # NVIDIA HGX B200 specifications, per GPU: BF16 4.5 PFLOPS with sparsity
}


def peak_flops(product_slug: str) -> float | None:
    """The dense bf16 peak of one card of ``product_slug``; None for a product this table does not know."""
    return PEAK_BF16_DENSE_FLOPS.get(product_slug)


def estimate_rate(spec: ModelSpec, setup: TrainingSetup, *, peak_flops_per_card: float, cards: int = 1,
                  throughput: Throughput | None = None, product: str = "") -> TokenRate:
    """Tokens per second of ``cards`` cards training ``spec`` with ``setup``, estimated from FLOPs."""
    throughput = (throughput or Throughput()).validate()
    if isinstance(cards, bool) or not isinstance(cards, int) or cards <= 0:
        raise PlannerInputError("cards", f"cards must be a positive whole number, not {cards!r}.")
    if isinstance(peak_flops_per_card, bool) or not isinstance(peak_flops_per_card, (int, float)) \
            or not peak_flops_per_card > 0:
        raise PlannerInputError("peak_flops_per_card", f"the peak FLOP/s must be positive, not "
                                                       f"{peak_flops_per_card!r}.")
    per_token = flops_per_token(spec, setup)
    efficiency = throughput.multi_card_efficiency if cards > 1 else 1.0
    rate = cards * peak_flops_per_card * throughput.utilisation * efficiency / per_token
    note = (f"estimated{' for ' + product if product else ''}: {per_token:.3g} FLOPs per token, "
            f"{peak_flops_per_card / 1e12:,.0f} TFLOP/s bf16 peak per card at {throughput.utilisation:.0%} "
            f"utilisation" + (f", {efficiency:.0%} efficiency on {cards} cards" if cards > 1 else "")
            + "; a pilot run measures it")
    return TokenRate.estimate(rate, note)
