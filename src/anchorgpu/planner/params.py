"""Exact parameter counts: every weight tensor of a model and of its LoRA adapters.

Counts are exact for the supported families (they match the published
totals to the parameter); they depend only on the config, not on a dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

from .layer_spec import layer_tensors
from .model_spec import ModelSpec, resolve_targets
from .setup import TrainingSetup


@dataclass(frozen=True)
class ParamTensor:
    """One weight tensor, present ``copies`` times (once per decoder layer of its kind, or once).

    ``stack`` is the experts dimension of transformers' fused expert weights ([experts, rows, cols]);
    ``kind`` the index of its layer kind in ``spec.layer_kinds()`` (None outside the decoder layers)."""

    name: str
    rows: int
    cols: int  # 1 for a vector (norm weight, bias)
    copies: int
    group: str  # embedding | attention | mlp | experts | router | norm | lm_head | vision | lora
    module: str = ""  # q_proj ... down_proj for linear weights, biases and their adapters
    per_layer: bool = False  # one copy in each decoder layer of its kind
    stack: int = 1
    kind: int | None = None

    @property
    def numel(self) -> int:
        return self.stack * self.rows * self.cols

    @property
    def total(self) -> int:
        return self.numel * self.copies

    @property
    def is_matrix(self) -> bool:
        return self.cols > 1

    @property
    def is_linear_weight(self) -> bool:
        """A 2-D weight of an ``nn.Linear`` in a decoder layer: what bitsandbytes quantises (fused expert weights
        are plain parameters, not ``nn.Linear``: bitsandbytes leaves them as they are)."""
        return self.group in {"attention", "mlp"} and self.is_matrix and self.stack == 1


def model_tensors(spec: ModelSpec) -> tuple[ParamTensor, ...]:
    tensors = [ParamTensor("embed_tokens", spec.vocab_size, spec.hidden_size, 1, "embedding")]
    for index, (layer, count) in enumerate(spec.layer_kinds()):
        for t in layer_tensors(layer, spec.hidden_size):
            if len(t.shape) == 3:
                stack, rows, cols = t.shape
            elif len(t.shape) == 2:
                stack, (rows, cols) = 1, t.shape
            else:
                stack, rows, cols = 1, t.shape[0], 1
            tensors.append(ParamTensor(t.name, rows, cols, count, t.group, t.module, True, stack, index))
    tensors.append(ParamTensor("final_norm", spec.hidden_size, 1, 1, "norm"))
    if not spec.tie_word_embeddings:
        tensors.append(ParamTensor("lm_head", spec.vocab_size, spec.hidden_size, 1, "lm_head"))
    if spec.extra_frozen_parameters:
        tensors.append(ParamTensor("vision_tower", spec.extra_frozen_parameters, 1, 1, "vision"))
    return tuple(tensors)


def lora_tensors(spec: ModelSpec, setup: TrainingSetup) -> tuple[ParamTensor, ...]:
    """The A (rank × in) and B (out × rank) matrices of every adapter, one pair per target per layer.

    ``experts`` targets the fused expert weights as peft's ``target_parameters`` does: one adapter per
    3-D weight whose A is (rank × experts) × in and B is out × (rank × experts)."""
    if not setup.is_lora:
        return ()
    r, tensors = setup.lora_rank, []
    targets = set(resolve_targets(spec, setup.lora_targets))
    for index, (layer, count) in enumerate(spec.layer_kinds()):
        for t in layer_tensors(layer, spec.hidden_size):
            if t.name.endswith(".bias") or t.group in {"norm"}:
                continue
            if t.group == "experts" and "experts" in targets and len(t.shape) == 3:
                experts, first, second = t.shape
                # transformers stores [experts, out, in] except gpt-oss ([experts, in, out]).
                out_f, in_f = (second, first) if layer.mlp.experts_hidden_first else (first, second)
                tensors.append(ParamTensor(f"{t.name}.lora_A", r * experts, in_f, count, "lora", "experts", True,
                                           kind=index))
                tensors.append(ParamTensor(f"{t.name}.lora_B", out_f, r * experts, count, "lora", "experts", True,
                                           kind=index))
            elif t.module in targets and len(t.shape) == 2 and t.group in {"attention", "mlp"}:
                out_f, in_f = t.shape
                tensors.append(ParamTensor(f"{t.name}.lora_A", r, in_f, count, "lora", t.module, True, kind=index))
                tensors.append(ParamTensor(f"{t.name}.lora_B", out_f, r, count, "lora", t.module, True, kind=index))
    if "lm_head" in targets:
        tensors.append(ParamTensor("lm_head.lora_A", r, spec.hidden_size, 1, "lora", "lm_head"))
        tensors.append(ParamTensor("lm_head.lora_B", spec.vocab_size, r, 1, "lora", "lm_head"))
    if "embed_tokens" in targets:  # peft's Embedding adapter: lora_embedding_A (r × vocab), lora_embedding_B
        tensors.append(ParamTensor("embed_tokens.lora_embedding_A", r, spec.vocab_size, 1, "lora", "embed_tokens"))
        tensors.append(ParamTensor("embed_tokens.lora_embedding_B", spec.hidden_size, r, 1, "lora", "embed_tokens"))
    return tuple(tensors)


@dataclass(frozen=True)
class ParameterCounts:
    embedding: int
    attention: int
    mlp: int
    norms: int
    lm_head: int  # 0 when the head shares the embedding matrix
    lora: int = 0
    experts: int = 0  # routed experts' weights (all of them)
    router: int = 0
    vision: int = 0  # a multimodal model's vision tower, loaded and frozen
    active_experts: int = 0  # of ``experts``: what one token runs through (top-k of each MoE layer)

    @property
    def total(self) -> int:
        """The model's parameters (adapters not included)."""
        return (self.embedding + self.attention + self.mlp + self.experts + self.router + self.norms + self.lm_head
                + self.vision)

    @property
    def active(self) -> int:
        """Parameters one token runs through (MoE: top-k experts per layer), as MoE models publish "active"."""
        return self.total - self.experts + self.active_experts

    @property
    def matmul(self) -> int:
        """Parameters that take part in a matrix multiply per token (the head, tied or not; not the lookup)."""
        return self.attention + self.mlp + self.router + self.active_experts + (self.lm_head or self.embedding)


def parameter_counts(spec: ModelSpec, setup: TrainingSetup | None = None) -> ParameterCounts:
    sums = dict.fromkeys(("embedding", "attention", "mlp", "experts", "router", "norm", "lm_head", "vision",
                          "lora"), 0)
    active = 0
    kinds = spec.layer_kinds()
    for tensor in model_tensors(spec) + (lora_tensors(spec, setup) if setup else ()):
        sums[tensor.group] += tensor.total
        if tensor.group == "experts":
            mlp = kinds[tensor.kind][0].mlp
            active += tensor.total // mlp.num_experts * mlp.top_k
    return ParameterCounts(embedding=sums["embedding"], attention=sums["attention"], mlp=sums["mlp"],
                           norms=sums["norm"], lm_head=sums["lm_head"], lora=sums["lora"], experts=sums["experts"],
                           router=sums["router"], vision=sums["vision"], active_experts=active)


def layer_parameters(spec: ModelSpec) -> int:
    """Parameters of the largest decoder layer (what FSDP gathers at a time)."""
    sizes = [0] * len(spec.layer_kinds())
    for t in model_tensors(spec):
        if t.per_layer:
            sizes[t.kind] += t.numel
    return max(sizes)
