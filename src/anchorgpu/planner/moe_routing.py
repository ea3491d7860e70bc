"""Mixture-of-experts layers in the simulated step: balanced routing, and what imbalance may add.

Needs torch (imported by the simulation only).

transformers 5 keeps each MoE layer's experts as fused parameters
(``gate_up_proj`` ``[experts, 2 x width, hidden]``, ``down_proj``) and runs
them through its experts interface. The simulation builds the model with
``experts_implementation="grouped_mm"``, transformers' default on the GPUs
it supports (compute capability 8.0 and up): the routed tokens are sorted
by expert, gathered into one ``[tokens x top_k, hidden]`` tensor and
multiplied in one grouped product whose group sizes are data (offsets),
not shapes. So every tensor of the step has the same size however the
router splits the tokens: the stored activations of the routed tokens
total ``tokens x top_k`` rows whether the split is balanced or not, and a
real CPU step with its own (unbalanced) routing tracks the same bytes as
the simulated one (the tests hold them to the byte).

Under fake tensors the router's choice has no values, so ``balanced_routing``
replaces it, for the duration of the step, by a fixed balanced one: slot
``j`` of token ``t`` goes to expert ``(t x top_k + j) mod experts``, so each
expert gets ``tokens x top_k / experts`` slots, the remainder spread one
each over the first experts, and a token's ``top_k`` experts are distinct.
The routing weights stay the router's, so its gradient flows as in a real
step.

Imbalance matters where the experts run one at a time (transformers'
``eager`` experts, the fallback below compute capability 8.0): each expert's
temporaries are sized by its own tokens, so the busiest expert's transient
is the one that can raise the peak. ``imbalance_allowance`` states it for a
given imbalance factor (the busiest expert's load over the balanced load).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import Any

import torch

DEFAULT_IMBALANCE = 2.0  # the busiest expert gets twice its balanced share


def experts_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The fused-experts modules of a model (those transformers' experts interface dispatches)."""
    return [m for m in model.modules() if hasattr(m, "_is_expert_parallel") and hasattr(m, "has_gate")]


def balanced_index(tokens: int, top_k: int, experts: int, like: torch.Tensor) -> torch.Tensor:
    """``[tokens, top_k]`` expert ids: slot ``t*top_k + j`` to expert ``(t*top_k + j) % experts``."""
    slots = torch.arange(tokens * top_k, device=like.device, dtype=like.dtype)
    return torch.remainder(slots, experts).view(tokens, top_k)


@contextlib.contextmanager
def balanced_routing(model: torch.nn.Module):
    """Routes every MoE layer's tokens in balance (see the module's text) while the block runs."""
    handles = []

    def route(module, args, kwargs):
        names = ("hidden_states", "top_k_index", "top_k_weights")
        values = dict(zip(names, args, strict=False))
        values.update(kwargs)
        index = values.get("top_k_index")
        if index is None:
            return None
        values["top_k_index"] = balanced_index(index.shape[0], index.shape[1], module.num_experts, index)
        return (), values

    for module in experts_modules(model):
        handles.append(module.register_forward_pre_hook(route, with_kwargs=True))
    try:
        yield len(handles)
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def grouped_products_on_fake_tensors():
    """The grouped product's fake (meta) kernel accepts bf16 only, as CUDA's kernel did when it was written;
    for other dtypes transformers' own fallback operator stands in. It allocates the same output
    ``[rows, out]`` and, in backward, gradients shaped as the input and the weights, as the grouped product
    does, so the live bytes do not change."""
    from transformers.integrations import moe

    original = moe._can_use_grouped_mm

    def can_use(input, weight, offs):
        if weight.dtype != torch.bfloat16 or input.dtype != torch.bfloat16:
            return False
        return original(input, weight, offs)

    moe._can_use_grouped_mm = can_use
    try:
        yield
    finally:
        moe._can_use_grouped_mm = original


def moe_shape(config: Any) -> dict[str, int] | None:
    """Experts, top-k and per-expert width of a transformers config object, or None for a dense model."""
    experts = next((getattr(config, n) for n in ("num_experts", "num_local_experts", "n_routed_experts")
                    if getattr(config, n, None)), None)
    top_k = getattr(config, "num_experts_per_tok", None) or getattr(config, "num_experts_per_token", None)
    if not experts or not top_k:
        return None
    width = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
    return {"experts": int(experts), "top_k": int(top_k), "width": int(width), "hidden": int(config.hidden_size)}


def imbalance_allowance(config: Any, tokens: int, dtype_bytes: int,
                        factor: float = DEFAULT_IMBALANCE) -> tuple[int, str] | None:
    """Extra live bytes of the busiest expert at ``factor`` times its balanced load, with the sentence saying so.

    With grouped products (what the simulation runs) the answer is 0: no tensor is sized by one expert's
    load. With experts run one at a time, one expert's temporaries are its tokens gathered ``[n, hidden]``,
    the gate/up product ``[n, 2 x width]``, the activation and the gated product ``[n, width]`` each, the
    down product and its weighted copy ``[n, hidden]`` each: the busiest expert's ``n`` is ``factor`` times
    the balanced ``tokens x top_k / experts``; the allowance is the difference over the balanced expert."""
    shape = moe_shape(config) if not isinstance(config, Mapping) else None
    if shape is None:
        return None
    balanced = math.ceil(tokens * shape["top_k"] / shape["experts"])
    busiest = min(tokens, math.ceil(factor * tokens * shape["top_k"] / shape["experts"]))
    per_row = (3 * shape["hidden"] + 4 * shape["width"]) * dtype_bytes
    extra = max(0, busiest - balanced) * per_row
    sentence = (f"MoE routing simulated in balance ({balanced} token slots per expert of {shape['experts']}, "
                f"top-{shape['top_k']}); with grouped products (transformers' default on compute capability 8.0 "
                "and up) no tensor depends on the balance. Where experts run one at a time (eager experts), "
                f"a busiest expert at {factor:g}x its share ({busiest} slots) would add up to {extra:,} bytes "
                "of transient memory: stated, not added.")
    return extra, sentence
