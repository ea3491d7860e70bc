"""Per-layer simulation: a few layers of each kind stand for the whole model, extrapolated exactly.

Needs torch (imported by the simulation only).

A decoder's layers come in a few kinds: all alike (Llama), sliding-window
and global attention (Gemma 2/3's ``layer_types``), dense and MoE MLPs
(DeepSeek's ``first_k_dense_replace``, Qwen-MoE's ``mlp_only_layers`` and
``decoder_sparse_step``). A layer's kind is read from the model itself: the
signature of its module on the meta device (each parameter's name, shape
and dtype, each submodule's class, and the attributes that change what a
layer computes without changing its parameters: ``attention_type``,
``sliding_window``, ``is_sliding``, ``layer_type``).

The sampled models are sub-sequences of the full model's layers, built
from the config with ``num_hidden_layers`` and every per-layer field cut to
the chosen layers (``layer_types`` and other lists as long as the model;
``mlp_only_layers`` and ``first_k_dense_replace`` renumbered). The *base* keeps the first layer of
each kind and the full model's last layer; each further run adds one more
layer of one kind (the earliest not yet chosen). The built layers' kinds
are checked against the chosen ones: a config whose layer structure the
cut does not keep falls back to the whole model (``plan`` says why).

Why the extrapolation is exact: a step's live bytes at any moment are the
ends' tensors (embedding, final norm, head, loss, optimizer state, the
masks and rotary tables made once) plus, for each layer, what it keeps
(weights, gradients, optimizer state, saved activations or checkpointed
inputs) plus the transients of the operator running now. Each phase's peak
(forward, backward, optimizer step) sits at a moment fixed relative to the
ends: the loss or the last layer's forward, the first layers of backward,
the optimizer's foreach passes over all tensors (under FSDP the base has a
middle layer too, see ``plan_layers``). At such a moment every layer of a
kind adds the same bytes, so each phase's peak, and each
category at it, is affine in the count of each kind:

    peak(N) = peak(base) + sum_k (N_k - base_k) x (peak(base + one k) - peak(base))

Extrapolating each phase, and only then taking the highest, also covers a
peak that moves from one phase to another as the model deepens (small
models peak in the optimizer step, deep ones in backward). FSDP shards
each layer on its own, so a layer adds the same sharded and gathered bytes
too. The tests hold the extrapolation to whole-model simulations to the
byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

_KIND_ATTRIBUTES = ("attention_type", "sliding_window", "is_sliding", "layer_type", "use_rope", "is_causal")


@dataclass(frozen=True)
class LayerPlan:
    """How the layers of a model are sampled: their kinds and the sub-models to simulate."""

    sequence: tuple[int, ...]  # kind number of each layer of the full model
    kinds: tuple[str, ...]  # a short description of each kind, first-seen order
    runs: tuple[tuple[int, ...], ...]  # layer indices of each sampled model; runs[0] is the base
    varied: tuple[int | None, ...]  # for each run: the kind it adds one of (None for the base)
    signatures: tuple[tuple, ...] = ()  # each kind's layer_signature

    def keeps_kinds(self, indices: Sequence[int], reduced_model: torch.nn.Module) -> bool:
        """Whether a model built from the cut config has, layer for layer, the kinds of the chosen layers."""
        built = [layer_signature(layer) for layer in decoder_layers(reduced_model)]
        return built == [self.signatures[self.sequence[i]] for i in indices]

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(self.sequence.count(k) for k in range(len(self.kinds)))

    def run_counts(self, run: int) -> tuple[int, ...]:
        chosen = [self.sequence[i] for i in self.runs[run]]
        return tuple(chosen.count(k) for k in range(len(self.kinds)))

    @property
    def simulated_layers(self) -> int:
        return sum(len(run) for run in self.runs)

    def describe(self) -> str:
        parts = [f"{count} x {kind}" for kind, count in zip(self.kinds, self.counts, strict=True)]
        sizes = ", ".join(str(len(run)) for run in self.runs)
        return (f"per-layer simulation: {len(self.sequence)} layers ({'; '.join(parts)}) extrapolated from "
                f"{len(self.runs)} sampled models of {sizes} layers")


def decoder_layers(model: torch.nn.Module) -> Sequence[torch.nn.Module]:
    """The decoder layers of a transformers causal LM (``model.model.layers``)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner = getattr(base, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise LookupError("no model.layers")
    return layers


def layer_signature(layer: torch.nn.Module) -> tuple:
    """What makes two layers alike for memory: parameters, submodule classes, attention kind."""
    params = tuple((name, tuple(p.shape), str(p.dtype)) for name, p in layer.named_parameters())
    modules = []
    for name, module in layer.named_modules():
        attributes = tuple((a, getattr(module, a)) for a in _KIND_ATTRIBUTES
                           if isinstance(getattr(module, a, None), (str, int, float, bool, type(None)))
                           and hasattr(module, a))
        modules.append((name, type(module).__name__, attributes))
    return params, tuple(modules)


def describe_kind(layer: torch.nn.Module) -> str:
    """A few words for a kind of layer: its MLP's class and its attention type, if it has one."""
    words = []
    mlp = getattr(layer, "mlp", None) or getattr(layer, "block_sparse_moe", None)
    if mlp is not None:
        words.append(type(mlp).__name__)
    for module in layer.modules():
        kind = getattr(module, "attention_type", None) or getattr(module, "layer_type", None)
        if isinstance(kind, str):
            words.append(kind)
            break
    return " ".join(words) or type(layer).__name__


def plan_layers(model: torch.nn.Module, *, fsdp: bool = False) -> LayerPlan:
    """The kinds of ``model``'s decoder layers and the sampled sub-models (``model`` may be on meta).

    Under FSDP a layer's backward overlaps its neighbour's (FSDP2 prefetches the next all-gather one layer
    ahead and reduce-scatters the previous layer's gradients), so a model of two layers has no layer in the
    middle and its backward peak sits elsewhere than a deep model's: the base then also keeps the second
    layer, and every added layer is a middle one (the peaks are affine from three layers on)."""
    layers = decoder_layers(model)
    signatures: list[tuple] = []
    kinds: list[str] = []
    sequence = []
    for layer in layers:
        signature = layer_signature(layer)
        if signature not in signatures:
            signatures.append(signature)
            kinds.append(describe_kind(layer))
        sequence.append(signatures.index(signature))
    count = len(sequence)
    base = sorted(
        {sequence.index(k) for k in range(len(kinds))} | {count - 1} | ({min(1, count - 1)} if fsdp else set())
    )
    runs, varied = [tuple(base)], [None]
    for kind in range(len(kinds)):
        spare = [i for i in range(count) if sequence[i] == kind and i not in base]
        if spare:
            runs.append(tuple(sorted(base + [spare[0]])))
            varied.append(kind)
    return LayerPlan(sequence=tuple(sequence), kinds=tuple(kinds), runs=tuple(runs), varied=tuple(varied),
                     signatures=tuple(signatures))


def reduced_config(config: Mapping[str, Any], full: Any, indices: Sequence[int]) -> dict[str, Any]:
    """``config`` (a config.json dict) cut to the layers ``indices`` of the full model (``full``: the built
    transformers config object, whose per-layer fields are filled in)."""
    total = int(full.num_hidden_layers)
    reduced = dict(config)
    reduced["num_hidden_layers"] = len(indices)
    values = full.to_dict()
    for key, value in values.items():
        # Per-layer fields: layer_types, no_rope_layers, ... (a list as long as the model whose name says
        # layer or pattern; token-id lists that happen to be as long are not).
        per_layer = ("layer" in key or "pattern" in key) and key != "mlp_only_layers"
        if not per_layer or not isinstance(value, (list, tuple)) or len(value) != total:
            continue
        reduced[key] = [value[i] for i in indices]
    if isinstance(values.get("mlp_only_layers"), (list, tuple)) and "decoder_sparse_step" in values:
        dense = set(values["mlp_only_layers"])
        step = int(values.get("decoder_sparse_step") or 1)
        experts = int(getattr(full, "num_experts", 0) or 0)  # to_dict() may spell it num_local_experts
        sparse = [i not in dense and experts > 0 and (i + 1) % step == 0 for i in indices]
        reduced["mlp_only_layers"] = [p for p, is_sparse in enumerate(sparse) if not is_sparse]
        reduced["decoder_sparse_step"] = 1
    if values.get("first_k_dense_replace") is not None:
        reduced["first_k_dense_replace"] = sum(1 for i in indices if i < int(values["first_k_dense_replace"]))
    return reduced


def extrapolate(plan: LayerPlan, results: Sequence[tuple[dict[str, int], dict[str, dict[str, int]], int]]):
    """Whole-model figures from the sampled runs' ``(phase peaks, phase categories, trainable bytes)``.

    Returns ``(phase peaks, phase categories, trainable bytes)`` of the full model (see the module's text)."""
    full = plan.counts
    base_counts = plan.run_counts(0)
    base_peaks, base_cats, base_trainable = results[0]
    weights = []  # (run, multiplier) for each varied run
    for run in range(1, len(plan.runs)):
        kind = plan.varied[run]
        weights.append((run, full[kind] - base_counts[kind]))
    phases = {}
    categories = {}
    for label in base_peaks:
        if not all(label in results[run][0] for run, _m in weights):
            continue
        value = base_peaks[label]
        cats = dict(base_cats[label])
        for run, multiplier in weights:
            value += multiplier * (results[run][0][label] - base_peaks[label])
            for name in cats:
                cats[name] += multiplier * (results[run][1][label][name] - base_cats[label][name])
        phases[label] = value
        categories[label] = cats
    trainable = base_trainable + sum(m * (results[run][2] - base_trainable) for run, m in weights)
    return phases, categories, trainable
