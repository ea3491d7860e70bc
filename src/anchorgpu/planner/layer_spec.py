"""One decoder layer's shape: its attention, its MLP (dense or mixture of experts) and its norms.

A model is a sequence of ``LayerSpec`` values; most models repeat one kind,
some alternate (Gemma 2/3 and gpt-oss slide a window on some layers, the
DeepSeek models keep their first layers dense). ``layer_tensors`` lists
every parameter tensor of a layer under the name transformers 5 gives it,
so that the counts can be held to the model's own module tree
(``model_tree.py``) and LoRA targets can be checked by name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AttentionSpec:
    """``gqa``: query, key and value projections with grouped key/value heads (``fused_qkv``: one
    ``qkv_proj``, as Phi-3). ``mla``: DeepSeek's multi-head latent attention: keys and values
    come out of a compressed latent of ``kv_lora_rank`` (and queries out of one of ``q_lora_rank``
    when given); ``head_dim`` is then the query/key head width (no-RoPE part plus RoPE part)."""

    kind: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    q_bias: bool = False
    kv_bias: bool = False
    o_bias: bool = False
    q_norm: int = 0  # width of the query norm's weight: head_dim (per head), q_dim (whole query), or 0
    k_norm: int = 0
    sliding_window: int | None = None
    sinks: bool = False  # one learned attention sink per head (gpt-oss)
    fused_qkv: bool = False
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def k_dim(self) -> int:
        """Key width per token as attention sees it (MLA expands the latent to every head)."""
        return (self.num_heads if self.kind == "mla" else self.num_kv_heads) * self.head_dim

    @property
    def v_dim(self) -> int:
        return (self.num_heads if self.kind == "mla" else self.num_kv_heads) * self.v_head_dim

    @property
    def out_dim(self) -> int:
        """Width of the attention output, the input of ``o_proj``."""
        return self.num_heads * self.v_head_dim


@dataclass(frozen=True)
class MlpSpec:
    """``dense``: gate, up and down projections (``fused_gate_up``: one ``gate_up_proj``).
    ``moe``: ``num_experts`` routed experts of width ``intermediate_size`` each, ``top_k`` per
    token, stored as transformers 5 fuses them (one 3-D ``gate_up_proj`` and ``down_proj`` per
    layer), a router, and optional shared experts of total width ``shared_intermediate``
    (``shared_gate``: Qwen2-MoE's sigmoid gate on the shared expert)."""

    kind: str
    intermediate_size: int
    num_experts: int = 0
    top_k: int = 0
    shared_intermediate: int = 0
    shared_gate: bool = False
    router_bias: bool = False
    expert_bias: bool = False
    bias: bool = False
    fused_gate_up: bool = False
    experts_hidden_first: bool = False  # gpt-oss keeps gate_up_proj as [experts, hidden, 2 × width]
    router_name: str = "gate"  # gpt-oss calls it "router"

    @property
    def is_moe(self) -> bool:
        return self.kind == "moe"


@dataclass(frozen=True)
class LayerSpec:
    attention: AttentionSpec
    mlp: MlpSpec
    # The hidden-wide norms of the layer, by name: Llama's two, Gemma 2/3's four, OLMo 2's two after the blocks.
    norm_names: tuple[str, ...] = ("input_layernorm", "post_attention_layernorm")

    @property
    def norms(self) -> int:
        return len(self.norm_names)


@dataclass(frozen=True)
class LayerTensor:
    """One parameter tensor of a layer: ``shape`` as transformers stores it, ``module`` the LoRA target name."""

    name: str
    shape: tuple[int, ...]
    group: str  # attention | mlp | experts | router | norm
    module: str

    @property
    def numel(self) -> int:
        n = 1
        for size in self.shape:
            n *= size
        return n


def _linear(name: str, prefix: str, out_features: int, in_features: int, bias: bool, group: str):
    tensors = [LayerTensor(f"{prefix}.{name}.weight", (out_features, in_features), group, name)]
    if bias:
        tensors.append(LayerTensor(f"{prefix}.{name}.bias", (out_features,), group, name))
    return tensors


def attention_tensors(a: AttentionSpec, hidden: int) -> list[LayerTensor]:
    p = "self_attn"
    out: list[LayerTensor] = []
    if a.kind == "mla":
        if a.q_lora_rank:
            out += _linear("q_a_proj", p, a.q_lora_rank, hidden, a.q_bias, "attention")
            out.append(LayerTensor(f"{p}.q_a_layernorm.weight", (a.q_lora_rank,), "norm", "q_a_layernorm"))
            out += _linear("q_b_proj", p, a.q_dim, a.q_lora_rank, False, "attention")
        else:
            out += _linear("q_proj", p, a.q_dim, hidden, False, "attention")
        out += _linear("kv_a_proj_with_mqa", p, a.kv_lora_rank + a.qk_rope_head_dim, hidden, a.kv_bias, "attention")
        out.append(LayerTensor(f"{p}.kv_a_layernorm.weight", (a.kv_lora_rank,), "norm", "kv_a_layernorm"))
        nope = a.head_dim - a.qk_rope_head_dim
        out += _linear("kv_b_proj", p, a.num_heads * (nope + a.v_head_dim), a.kv_lora_rank, False, "attention")
    elif a.fused_qkv:
        out += _linear("qkv_proj", p, a.q_dim + 2 * a.num_kv_heads * a.head_dim, hidden, a.q_bias, "attention")
    else:
        kv = a.num_kv_heads * a.head_dim
        out += _linear("q_proj", p, a.q_dim, hidden, a.q_bias, "attention")
        out += _linear("k_proj", p, kv, hidden, a.kv_bias, "attention")
        out += _linear("v_proj", p, kv, hidden, a.kv_bias, "attention")
    out += _linear("o_proj", p, hidden, a.out_dim, a.o_bias, "attention")
    if a.q_norm:
        out.append(LayerTensor(f"{p}.q_norm.weight", (a.q_norm,), "norm", "q_norm"))
    if a.k_norm:
        out.append(LayerTensor(f"{p}.k_norm.weight", (a.k_norm,), "norm", "k_norm"))
    if a.sinks:
        out.append(LayerTensor(f"{p}.sinks", (a.num_heads,), "attention", "sinks"))
    return out


def _dense_tensors(prefix: str, width: int, hidden: int, bias: bool, fused: bool, group: str) -> list[LayerTensor]:
    if fused:
        out = _linear("gate_up_proj", prefix, 2 * width, hidden, bias, group)
    else:
        out = _linear("gate_proj", prefix, width, hidden, bias, group) + _linear("up_proj", prefix, width, hidden,
                                                                                bias, group)
    return out + _linear("down_proj", prefix, hidden, width, bias, group)


def mlp_tensors(m: MlpSpec, hidden: int) -> list[LayerTensor]:
    if not m.is_moe:
        return _dense_tensors("mlp", m.intermediate_size, hidden, m.bias, m.fused_gate_up, "mlp")
    e, w = m.num_experts, m.intermediate_size
    gate_up = (e, hidden, 2 * w) if m.experts_hidden_first else (e, 2 * w, hidden)
    down = (e, w, hidden) if m.experts_hidden_first else (e, hidden, w)
    out = [LayerTensor("mlp.experts.gate_up_proj", gate_up, "experts", "experts")]
    if m.expert_bias:
        out.append(LayerTensor("mlp.experts.gate_up_proj_bias", (e, 2 * w), "experts", "experts"))
    out.append(LayerTensor("mlp.experts.down_proj", down, "experts", "experts"))
    if m.expert_bias:
        out.append(LayerTensor("mlp.experts.down_proj_bias", (e, hidden), "experts", "experts"))
    out += _linear(m.router_name, "mlp", e, hidden, m.router_bias, "router")
    if m.shared_intermediate:
        name = "shared_expert" if m.shared_gate else "shared_experts"
        out += _dense_tensors(f"mlp.{name}", m.shared_intermediate, hidden, False, False, "mlp")
        if m.shared_gate:
            out += _linear("shared_expert_gate", "mlp", 1, hidden, False, "router")
    return out


def layer_tensors(layer: LayerSpec, hidden: int) -> list[LayerTensor]:
    """Every parameter tensor of ``layer``, named as in transformers (relative to the layer)."""
    out = attention_tensors(layer.attention, hidden) + mlp_tensors(layer.mlp, hidden)
    for name in layer.norm_names:
        out.append(LayerTensor(f"{name}.weight", (hidden,), "norm", name))
    return out
