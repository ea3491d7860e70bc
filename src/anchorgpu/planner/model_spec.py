"""A decoder-only model's shape, read from a Hugging Face ``config.json``.

``ModelSpec`` holds what the memory estimate needs and nothing else: sizes,
head layout (grouped-query attention), biases, norm and MLP kind, whether
the output head shares the embedding matrix, and how attention is run.
``model_spec_from_config`` reads the ``config.json`` of the decoder
families the planner supports and refuses everything else by name.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from anchorgpu.messages import gettext_noop

from .errors import PlannerInputError

SUPPORTED_FAMILIES: tuple[str, ...] = ("llama", "mistral", "qwen2", "gemma", "gemma2")

# The linear layers of one decoder layer, the same names in all supported
# families (and the names LoRA targets use).
ATTENTION_MODULES: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES: tuple[str, ...] = ("gate_proj", "up_proj", "down_proj")
LINEAR_MODULES: tuple[str, ...] = ATTENTION_MODULES + MLP_MODULES

# How the families differ where memory is concerned. ``tie`` is the
# family's default for ``tie_word_embeddings`` when a config leaves it out
# (the defaults of the transformers config classes).
_FAMILY = {
    "llama": {"norm": "rms", "norms_per_layer": 2, "mlp": "gated_silu", "tie": False, "head_dim_required": False},
    "mistral": {"norm": "rms", "norms_per_layer": 2, "mlp": "gated_silu", "tie": False, "head_dim_required": False},
    "qwen2": {"norm": "rms", "norms_per_layer": 2, "mlp": "gated_silu", "tie": False, "head_dim_required": False},
    "gemma": {"norm": "rms_gemma", "norms_per_layer": 2, "mlp": "gated_gelu_tanh", "tie": True,
              "head_dim_required": True},
    "gemma2": {"norm": "rms_gemma", "norms_per_layer": 4, "mlp": "gated_gelu_tanh", "tie": True,
               "head_dim_required": True},
}


@dataclass(frozen=True)
class LinearShape:
    name: str
    in_features: int
    out_features: int
    bias: bool


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a decoder-only transformer, as far as memory is concerned.

    ``norm_kind`` is ``"rms"`` (Llama style: normalise in fp32, multiply by the
    weight in the input's dtype) or ``"rms_gemma"`` (Gemma style: everything in
    fp32, scale by ``1 + weight``). ``attention`` is ``"sdpa"`` (fused kernel,
    no stored attention matrix) or ``"eager"`` (Gemma 2 with logit
    soft-capping: the attention matrix is built and kept, so its memory grows
    with the square of the sequence length).
    """

    family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    norm_kind: str = "rms"
    norms_per_layer: int = 2
    mlp_kind: str = "gated_silu"
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    attention: str = "sdpa"
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None
    sliding_window: int | None = None
    name: str = ""

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def label(self) -> str:
        return self.name or f"{self.family} ({self.num_layers} layers, hidden {self.hidden_size})"

    def linear_shapes(self) -> tuple[LinearShape, ...]:
        h, i = self.hidden_size, self.intermediate_size
        return (
            LinearShape("q_proj", h, self.q_dim, self.qkv_bias),
            LinearShape("k_proj", h, self.kv_dim, self.qkv_bias),
            LinearShape("v_proj", h, self.kv_dim, self.qkv_bias),
            LinearShape("o_proj", self.q_dim, h, self.o_bias),
            LinearShape("gate_proj", h, i, self.mlp_bias),
            LinearShape("up_proj", h, i, self.mlp_bias),
            LinearShape("down_proj", i, h, self.mlp_bias),
        )

    def linear(self, name: str) -> LinearShape:
        for shape in self.linear_shapes():
            if shape.name == name:
                return shape
        raise PlannerInputError("lora_targets", gettext_noop("“%(name)s” is not a linear layer of %(model)s; its "
                                                             "linear layers are %(layers)s."),
                                name=name, model=self.label, layers=", ".join(LINEAR_MODULES))


def _int(config: Mapping[str, Any], key: str, *, default: int | None = None, required: bool = True) -> int | None:
    if key not in config or config[key] is None:
        if default is not None or not required:
            return default
        raise PlannerInputError(f"config.{key}", gettext_noop("the config has no “%(key)s”, which the planner "
                                                              "needs."), key=key)
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not (math.isfinite(value) and value.is_integer())):
        raise PlannerInputError(f"config.{key}", gettext_noop("“%(key)s” must be a whole number, not %(value)s."),
                                key=key, value=repr(value))
    value = int(value)
    if value <= 0:
        raise PlannerInputError(f"config.{key}", gettext_noop("“%(key)s” must be positive, not %(value)s."),
                                key=key, value=value)
    return value


def _bool(config: Mapping[str, Any], key: str, default: bool) -> bool:
    value = config.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise PlannerInputError(f"config.{key}", gettext_noop("“%(key)s” must be true or false, not %(value)s."),
                                key=key, value=repr(value))
    return value


def _float_or_none(config: Mapping[str, Any], key: str) -> float | None:
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise PlannerInputError(f"config.{key}", gettext_noop("“%(key)s” must be a positive number or null, "
                                                              "not %(value)s."), key=key, value=repr(value))
    return float(value)


def model_spec_from_config(config: Any, *, name: str = "") -> ModelSpec:
    """Reads a Hugging Face ``config.json`` (already parsed) into a ``ModelSpec``."""
    if not isinstance(config, Mapping):
        raise PlannerInputError("config", gettext_noop("a model config must be a JSON object, not %(kind)s."),
                                kind=type(config).__name__)
    family = config.get("model_type")
    if family is None:
        raise PlannerInputError("config.model_type", gettext_noop("the config has no “model_type”, so the "
                                                                  "architecture is unknown; supported: "
                                                                  "%(supported)s."),
                                supported=", ".join(SUPPORTED_FAMILIES))
    if not isinstance(family, str) or family not in _FAMILY:
        raise PlannerInputError("config.model_type", gettext_noop("the architecture “%(family)s” is not "
                                                                  "supported; supported: %(supported)s."),
                                family=family, supported=", ".join(SUPPORTED_FAMILIES))
    traits = _FAMILY[family]
    hidden = _int(config, "hidden_size")
    heads = _int(config, "num_attention_heads")
    kv_heads = _int(config, "num_key_value_heads", default=heads)
    vocab = _int(config, "vocab_size")
    layers = _int(config, "num_hidden_layers")
    intermediate = _int(config, "intermediate_size")
    max_positions = _int(config, "max_position_embeddings")
    if traits["head_dim_required"]:
        head_dim = _int(config, "head_dim")
    else:
        head_dim = _int(config, "head_dim", required=False)
        if head_dim is None:
            if hidden % heads:
                raise PlannerInputError("config.num_attention_heads",
                                        gettext_noop("%(heads)s attention heads do not divide the hidden size "
                                                     "%(hidden)s and the config gives no “head_dim”."),
                                        heads=heads, hidden=hidden)
            head_dim = hidden // heads
    if kv_heads > heads or heads % kv_heads:
        raise PlannerInputError("config.num_key_value_heads",
                                gettext_noop("%(kv_heads)s key/value heads must divide the %(heads)s attention "
                                             "heads."), kv_heads=kv_heads, heads=heads)

    attention_bias = _bool(config, "attention_bias", False)
    if family == "qwen2":
        qkv_bias, o_bias = True, False  # Qwen2 always has q/k/v biases and none on o_proj
    else:
        qkv_bias = o_bias = attention_bias
    mlp_bias = _bool(config, "mlp_bias", False) if family == "llama" else False

    attn_cap = _float_or_none(config, "attn_logit_softcapping") if family == "gemma2" else None
    final_cap = _float_or_none(config, "final_logit_softcapping") if family == "gemma2" else None
    window = _int(config, "sliding_window", required=False) if family in {"mistral", "gemma2"} else None
    return ModelSpec(
        family=family, vocab_size=vocab, hidden_size=hidden, num_layers=layers, num_heads=heads,
        num_kv_heads=kv_heads, head_dim=head_dim, intermediate_size=intermediate,
        max_position_embeddings=max_positions,
        tie_word_embeddings=_bool(config, "tie_word_embeddings", traits["tie"]),
        norm_kind=traits["norm"], norms_per_layer=traits["norms_per_layer"], mlp_kind=traits["mlp"],
        qkv_bias=qkv_bias, o_bias=o_bias, mlp_bias=mlp_bias,
        # transformers runs Gemma 2 with soft-capping in eager attention (SDPA cannot soft-cap).
        attention="eager" if attn_cap is not None else "sdpa",
        attn_logit_softcapping=attn_cap, final_logit_softcapping=final_cap, sliding_window=window,
        name=name or str(config.get("_name_or_path") or ""),
    )


def load_config(path: str | Path) -> dict[str, Any]:
    """Reads a ``config.json`` file; every way it can fail ends in a ``PlannerInputError``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlannerInputError("config", f"there is no file at {path}.") from None
    except IsADirectoryError:
        raise PlannerInputError("config", f"{path} is a folder; give the path of its config.json.") from None
    except UnicodeDecodeError:
        raise PlannerInputError("config", f"{path} is not UTF-8 text; is it really a config.json?") from None
    except OSError as exc:
        raise PlannerInputError("config", f"{path} cannot be read ({exc.strerror or exc}).") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlannerInputError("config", f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                                          f"column {exc.colno}.") from None
    if not isinstance(data, dict):
        raise PlannerInputError("config", f"{path} holds a JSON {type(data).__name__}, not an object.")
    return data
