"""Config readers: what each decoder family's ``config.json`` says about its layers.

``read_layers(family, config, common)`` returns the family's per-layer shape
(``LayerSpec``) for every decoder layer, from the same fields (and the same
defaults) transformers 5 builds the model from. Each reader is held to the
model's own module tree on the meta device by ``tests/planner/test_architectures.py``:
every parameter tensor, by name and shape. A family not named here is read
by ``model_tree.generic_spec`` (the standard field names, accepted only when
the module tree agrees to the tensor) or refused with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from anchorgpu.messages import gettext_noop

from .errors import PlannerInputError
from .layer_spec import AttentionSpec, LayerSpec, MlpSpec

GEMMA_NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
               "post_feedforward_layernorm")
OLMO2_NORMS = ("post_attention_layernorm", "post_feedforward_layernorm")


@dataclass(frozen=True)
class Common:
    """The fields every family has, already checked (see ``model_spec._common``)."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    layers: int
    intermediate: int | None


@dataclass(frozen=True)
class Family:
    """How a family differs where memory is concerned (beyond its layers)."""

    norm: str = "rms"  # rms | rms_gemma (fp32 throughout, scaled by 1 + weight)
    mlp_act: str = "gated_silu"
    tie: bool = False  # tie_word_embeddings when the config leaves it out
    head_dim_required: bool = False
    needs_intermediate: bool = True


def _get(config: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = config.get(key, default)
    return default if value is None else value


def _whole(config: Mapping[str, Any], key: str, default: int | None = None, *, zero: bool = False) -> int:
    value = config.get(key, default)
    if value is None:
        raise PlannerInputError(f"config.{key}", gettext_noop("the config has no “%(key)s”, which the planner "
                                                              "needs."), key=key)
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
        raise PlannerInputError(f"config.{key}", gettext_noop("“%(key)s” must be a positive whole number, not "
                                                              "%(value)s."), key=key, value=repr(value))
    return value


def flag(config: Mapping[str, Any], key: str, default: bool) -> bool:
    """A true/false field of ``config`` (``default`` when absent or null); anything else is refused."""
    value = config.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise PlannerInputError(f"config.{key}", gettext_noop("“%(key)s” must be true or false, not %(value)s."),
                                key=key, value=repr(value))
    return value


def _layer_list(config: Mapping[str, Any], key: str) -> set[int]:
    value = _get(config, key, [])
    if not isinstance(value, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in value):
        raise PlannerInputError(f"config.{key}", gettext_noop("“%(key)s” must be a list of layer numbers."),
                                key=key)
    return set(value)


def _top_k(config: Mapping[str, Any], experts: int, key: str = "num_experts_per_tok") -> int:
    top_k = _whole(config, key)
    if experts and top_k > experts:
        raise PlannerInputError(f"config.{key}", gettext_noop("each token cannot go to %(top_k)s experts when "
                                                              "there are %(experts)s."), top_k=top_k,
                                experts=experts)
    return top_k


def layer_types(config: Mapping[str, Any], layers: int, default: Callable[[int], str]) -> list[str]:
    """Each layer's attention kind ("full_attention" or "sliding_attention"), as the config states it or as
    the family's config class would derive it."""
    given = config.get("layer_types")
    if given is None:
        return [default(i) for i in range(layers)]
    if not isinstance(given, list) or len(given) != layers or any(
            t not in {"full_attention", "sliding_attention"} for t in given):
        raise PlannerInputError("config.layer_types", gettext_noop("“layer_types” must list “full_attention” or "
                                                                   "“sliding_attention” for each of the "
                                                                   "%(layers)s layers."), layers=layers)
    return list(given)


def _window(config: Mapping[str, Any], kind: str) -> int | None:
    if kind != "sliding_attention":
        return None
    return _whole(config, "sliding_window")


def _gqa(c: Common, config, *, kind="full_attention", q_bias=False, kv_bias=False, o_bias=False, q_norm=0,
         k_norm=0, sinks=False, fused_qkv=False) -> AttentionSpec:
    return AttentionSpec("gqa", c.heads, c.kv_heads, c.head_dim, c.head_dim, q_bias=q_bias, kv_bias=kv_bias,
                         o_bias=o_bias, q_norm=q_norm, k_norm=k_norm, sliding_window=_window(config, kind),
                         sinks=sinks, fused_qkv=fused_qkv)


def _dense(c: Common, *, bias=False, fused=False, width: int | None = None) -> MlpSpec:
    return MlpSpec("dense", width or c.intermediate, bias=bias, fused_gate_up=fused)


def _qwen_window(config, layers):
    """Qwen 2/3: a window only with use_sliding_window, on the layers from max_window_layers on."""
    use = flag(config, "use_sliding_window", False)
    first = _whole(config, "max_window_layers", layers, zero=True)
    return lambda i: "sliding_attention" if use and i >= first else "full_attention"


def _llama(config, c):
    bias = flag(config, "attention_bias", False)
    mlp = _dense(c, bias=flag(config, "mlp_bias", False))
    return [LayerSpec(_gqa(c, config, q_bias=bias, kv_bias=bias, o_bias=bias), mlp)] * c.layers


def _mistral(config, c):
    kind = "sliding_attention" if config.get("sliding_window") else "full_attention"
    return [LayerSpec(_gqa(c, config, kind=kind), _dense(c))] * c.layers


def _qwen2(config, c):
    kinds = layer_types(config, c.layers, _qwen_window(config, c.layers))
    return [LayerSpec(_gqa(c, config, kind=k, q_bias=True, kv_bias=True), _dense(c)) for k in kinds]


def _qwen3_attention(config, c, kind):
    bias = flag(config, "attention_bias", False)
    return _gqa(c, config, kind=kind, q_bias=bias, kv_bias=bias, o_bias=bias, q_norm=c.head_dim, k_norm=c.head_dim)


def _qwen3(config, c):
    kinds = layer_types(config, c.layers, _qwen_window(config, c.layers))
    return [LayerSpec(_qwen3_attention(config, c, k), _dense(c)) for k in kinds]


def _qwen3_moe(config, c):
    kinds = layer_types(config, c.layers, _qwen_window(config, c.layers))
    experts = _whole(config, "num_experts", zero=True)
    step = _whole(config, "decoder_sparse_step", 1)
    dense_only = _layer_list(config, "mlp_only_layers")
    moe = MlpSpec("moe", _whole(config, "moe_intermediate_size"), num_experts=experts,
                  top_k=_top_k(config, experts))
    out = []
    for i, kind in enumerate(kinds):
        sparse = experts > 0 and i not in dense_only and (i + 1) % step == 0
        out.append(LayerSpec(_qwen3_attention(config, c, kind), moe if sparse else _dense(c)))
    return out


def _qwen2_moe(config, c):
    kinds = layer_types(config, c.layers, _qwen_window(config, c.layers))
    experts = _whole(config, "num_experts", zero=True)
    step = _whole(config, "decoder_sparse_step", 1)
    dense_only = _layer_list(config, "mlp_only_layers")
    shared = _whole(config, "shared_expert_intermediate_size", 0, zero=True)
    moe = MlpSpec("moe", _whole(config, "moe_intermediate_size"), num_experts=experts,
                  top_k=_top_k(config, experts), shared_intermediate=shared, shared_gate=bool(shared))
    bias = flag(config, "qkv_bias", True)
    return [LayerSpec(_gqa(c, config, kind=k, q_bias=bias, kv_bias=bias),
                      moe if experts and i not in dense_only and (i + 1) % step == 0 else _dense(c))
            for i, k in enumerate(kinds)]


def _gemma(config, c):
    bias = flag(config, "attention_bias", False)
    return [LayerSpec(_gqa(c, config, q_bias=bias, kv_bias=bias, o_bias=bias), _dense(c))] * c.layers


def _gemma2(config, c):
    bias = flag(config, "attention_bias", False)
    kinds = layer_types(config, c.layers, lambda i: "sliding_attention" if (i + 1) % 2 else "full_attention")
    return [LayerSpec(_gqa(c, config, kind=k, q_bias=bias, kv_bias=bias, o_bias=bias), _dense(c),
                      norm_names=GEMMA_NORMS) for k in kinds]


def _gemma3(config, c):
    bias = flag(config, "attention_bias", False)
    pattern = _whole(config, "sliding_window_pattern", 6)
    kinds = layer_types(config, c.layers, lambda i: "sliding_attention" if (i + 1) % pattern else "full_attention")
    return [LayerSpec(_gqa(c, config, kind=k, q_bias=bias, kv_bias=bias, o_bias=bias, q_norm=c.head_dim,
                           k_norm=c.head_dim), _dense(c), norm_names=GEMMA_NORMS) for k in kinds]


def _phi3(config, c):
    kind = "sliding_attention" if config.get("sliding_window") else "full_attention"
    return [LayerSpec(_gqa(c, config, kind=kind, fused_qkv=True), _dense(c, fused=True))] * c.layers


def _mixtral(config, c):
    kind = "sliding_attention" if config.get("sliding_window") else "full_attention"
    experts = _whole(config, "num_local_experts")
    moe = MlpSpec("moe", c.intermediate, num_experts=experts, top_k=_top_k(config, experts))
    return [LayerSpec(_gqa(c, config, kind=kind), moe)] * c.layers


def _gpt_oss(config, c):
    kinds = layer_types(config, c.layers, lambda i: "sliding_attention" if i % 2 == 0 else "full_attention")
    bias = flag(config, "attention_bias", True)
    top_k = config.get("num_experts_per_tok", config.get("experts_per_token", 4))
    experts = _whole(config, "num_local_experts")
    moe = MlpSpec("moe", c.intermediate, num_experts=experts,
                  top_k=_top_k({"num_experts_per_tok": top_k}, experts), router_bias=True,
                  expert_bias=True, experts_hidden_first=True, router_name="router")
    return [LayerSpec(_gqa(c, config, kind=k, q_bias=bias, kv_bias=bias, o_bias=bias, sinks=True), moe)
            for k in kinds]


def _deepseek(config, c):
    rope = _whole(config, "qk_rope_head_dim")
    nope = _whole(config, "qk_nope_head_dim")
    q_rank = config.get("q_lora_rank")
    if q_rank is not None:
        q_rank = _whole(config, "q_lora_rank")
    bias = flag(config, "attention_bias", False)
    attention = AttentionSpec("mla", c.heads, c.heads, nope + rope, _whole(config, "v_head_dim"), q_bias=bias,
                              kv_bias=bias, o_bias=bias, q_lora_rank=q_rank,
                              kv_lora_rank=_whole(config, "kv_lora_rank"), qk_rope_head_dim=rope)
    routed = _whole(config, "n_routed_experts", 0, zero=True)
    width = _whole(config, "moe_intermediate_size")
    shared = _whole(config, "n_shared_experts", 0, zero=True) * width
    moe = MlpSpec("moe", width, num_experts=routed, top_k=_top_k(config, routed),
                  shared_intermediate=shared)
    first_dense = _whole(config, "first_k_dense_replace", 0, zero=True)
    freq = _whole(config, "moe_layer_freq", 1)
    return [LayerSpec(attention, moe if routed and i >= first_dense and i % freq == 0 else _dense(c))
            for i in range(c.layers)]


def _olmo2(config, c):
    bias = flag(config, "attention_bias", False)
    attention = _gqa(c, config, q_bias=bias, kv_bias=bias, o_bias=bias, q_norm=c.heads * c.head_dim,
                     k_norm=c.kv_heads * c.head_dim)
    return [LayerSpec(attention, _dense(c), norm_names=OLMO2_NORMS)] * c.layers


# family -> (traits, reader). ``granite`` is Llama's layout (its multipliers scale values, not memory).
FAMILIES: Mapping[str, tuple[Family, Callable]] = {
    "llama": (Family(), _llama),
    "granite": (Family(), _llama),
    "mistral": (Family(), _mistral),
    "qwen2": (Family(), _qwen2),
    "qwen2_moe": (Family(), _qwen2_moe),
    "qwen3": (Family(tie=False), _qwen3),
    "qwen3_moe": (Family(), _qwen3_moe),
    "gemma": (Family(norm="rms_gemma", mlp_act="gated_gelu_tanh", tie=True, head_dim_required=True), _gemma),
    "gemma2": (Family(norm="rms_gemma", mlp_act="gated_gelu_tanh", tie=True, head_dim_required=True), _gemma2),
    "gemma3_text": (Family(norm="rms_gemma", mlp_act="gated_gelu_tanh", tie=True, head_dim_required=True), _gemma3),
    "phi3": (Family(), _phi3),
    "mixtral": (Family(), _mixtral),
    "gpt_oss": (Family(), _gpt_oss),
    "deepseek_v2": (Family(), _deepseek),
    "deepseek_v3": (Family(), _deepseek),
    "olmo2": (Family(), _olmo2),
}

# Multimodal wrappers planned for their text tower: model_type -> the text tower's model_type.
TEXT_TOWERS: Mapping[str, str] = {"gemma3": "gemma3_text", "qwen2_5_vl": "qwen2", "qwen2_vl": "qwen2"}
