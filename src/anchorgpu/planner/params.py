"""Exact parameter counts: every weight tensor of a model and of its LoRA adapters.

Counts are exact for the supported families (they match the published
totals to the parameter); they depend only on the config, not on a dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model_spec import ModelSpec
from .setup import TrainingSetup


@dataclass(frozen=True)
class ParamTensor:
    """One weight tensor, present ``copies`` times (once per decoder layer, or once)."""

    name: str
    rows: int
    cols: int  # 1 for a vector (norm weight, bias)
    copies: int
    group: str  # embedding | attention | mlp | norm | lm_head | lora
    module: str = ""  # q_proj ... down_proj for linear weights, biases and their adapters
    per_layer: bool = False  # one copy in each decoder layer (layer norms: norms_per_layer copies in each)

    @property
    def numel(self) -> int:
        return self.rows * self.cols

    @property
    def total(self) -> int:
        return self.numel * self.copies

    @property
    def is_matrix(self) -> bool:
        return self.cols > 1

    @property
    def is_linear_weight(self) -> bool:
        return self.group in {"attention", "mlp"} and self.is_matrix


def model_tensors(spec: ModelSpec) -> tuple[ParamTensor, ...]:
    layers = spec.num_layers
    tensors = [ParamTensor("embed_tokens", spec.vocab_size, spec.hidden_size, 1, "embedding")]
    for shape in spec.linear_shapes():
        group = "mlp" if shape.name in {"gate_proj", "up_proj", "down_proj"} else "attention"
        tensors.append(ParamTensor(f"{shape.name}.weight", shape.out_features, shape.in_features, layers, group,
                                   shape.name, per_layer=True))
        if shape.bias:
            tensors.append(ParamTensor(f"{shape.name}.bias", shape.out_features, 1, layers, group, shape.name,
                                       per_layer=True))
    tensors.append(ParamTensor("layer_norms", spec.hidden_size, 1, layers * spec.norms_per_layer, "norm",
                               per_layer=True))
    tensors.append(ParamTensor("final_norm", spec.hidden_size, 1, 1, "norm"))
    if not spec.tie_word_embeddings:
        tensors.append(ParamTensor("lm_head", spec.vocab_size, spec.hidden_size, 1, "lm_head"))
    return tuple(tensors)


def lora_tensors(spec: ModelSpec, setup: TrainingSetup) -> tuple[ParamTensor, ...]:
    """The A (rank × in) and B (out × rank) matrices of every adapter, one pair per target per layer."""
    if not setup.is_lora:
        return ()
    r, tensors = setup.lora_rank, []
    for name in setup.lora_targets:
        shape = spec.linear(name)
        tensors.append(ParamTensor(f"{name}.lora_A", r, shape.in_features, spec.num_layers, "lora", name, True))
        tensors.append(ParamTensor(f"{name}.lora_B", shape.out_features, r, spec.num_layers, "lora", name, True))
    return tuple(tensors)


@dataclass(frozen=True)
class ParameterCounts:
    embedding: int
    attention: int
    mlp: int
    norms: int
    lm_head: int  # 0 when the head shares the embedding matrix
    lora: int = 0

    @property
    def total(self) -> int:
        """The model's parameters (adapters not included)."""
        return self.embedding + self.attention + self.mlp + self.norms + self.lm_head

    @property
    def matmul(self) -> int:
        """Parameters that take part in a matrix multiply per token (the head, tied or not; not the lookup)."""
        return self.attention + self.mlp + (self.lm_head or self.embedding)


def parameter_counts(spec: ModelSpec, setup: TrainingSetup | None = None) -> ParameterCounts:
    sums = {"embedding": 0, "attention": 0, "mlp": 0, "norm": 0, "lm_head": 0, "lora": 0}
    for tensor in model_tensors(spec) + (lora_tensors(spec, setup) if setup else ()):
        sums[tensor.group] += tensor.total
    return ParameterCounts(embedding=sums["embedding"], attention=sums["attention"], mlp=sums["mlp"],
                           norms=sums["norm"], lm_head=sums["lm_head"], lora=sums["lora"])


def layer_parameters(spec: ModelSpec) -> int:
    """Parameters of one decoder layer (what FSDP gathers at a time)."""
    return sum(t.total for t in model_tensors(spec) if t.per_layer) // spec.num_layers
