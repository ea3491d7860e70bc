"""A decoder-only model's shape, read from a Hugging Face ``config.json``.

``ModelSpec`` holds what the memory estimate needs and nothing else: sizes,
head layout (grouped-query attention), biases, norm and MLP kind, whether
the output head shares the embedding matrix, and how attention is run.
``model_spec_from_config`` reads the ``config.json`` of the decoder
families the planner supports and refuses everything else by name.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorgpu.messages import gettext_noop

from .architectures import FAMILIES, GEMMA_NORMS, TEXT_TOWERS, Common, flag
from .errors import PlannerInputError
from .layer_spec import AttentionSpec, LayerSpec, MlpSpec, layer_tensors

# The linear layers of a Llama-style decoder layer (and the names LoRA targets use); other layouts
# (Phi-3's fused projections, DeepSeek's latent attention) name theirs in ``ModelSpec.linear_shapes``.
ATTENTION_MODULES: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES: tuple[str, ...] = ("gate_proj", "up_proj", "down_proj")
LINEAR_MODULES: tuple[str, ...] = ATTENTION_MODULES + MLP_MODULES


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
    # One ``LayerSpec`` per decoder layer (built from the fields above when not given).
    layers: tuple[LayerSpec, ...] = ()
    # Parameters loaded with the model but outside the planned text tower (a vision tower): frozen weights.
    extra_frozen_parameters: int = 0
    notes: tuple[str, ...] = ()
    # The config.json (the text tower's, for a multimodal model) the spec was read from.
    config: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)

    def __post_init__(self):
        if not self.layers:
            attention = AttentionSpec("gqa", self.num_heads, self.num_kv_heads, self.head_dim, self.head_dim,
                                      q_bias=self.qkv_bias, kv_bias=self.qkv_bias, o_bias=self.o_bias,
                                      sliding_window=self.sliding_window)
            norms = GEMMA_NORMS if self.norms_per_layer == 4 else GEMMA_NORMS[:self.norms_per_layer]
            layer = LayerSpec(attention, MlpSpec("dense", self.intermediate_size, bias=self.mlp_bias), norms)
            object.__setattr__(self, "layers", (layer,) * self.num_layers)

    def layer_kinds(self) -> tuple[tuple[LayerSpec, int], ...]:
        """The distinct layer kinds and how many layers of each, in the order they first appear."""
        counts: dict[LayerSpec, int] = {}
        for layer in self.layers:
            counts[layer] = counts.get(layer, 0) + 1
        return tuple(counts.items())

    @property
    def is_moe(self) -> bool:
        return any(layer.mlp.is_moe for layer in self.layers)

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
        """Each distinct linear module of the decoder layers, by the name LoRA targets use (the widest shape
        where layers differ, e.g. a dense MLP among MoE layers), in the order the layers hold them."""
        found: dict[str, LinearShape] = {}
        for layer, _count in self.layer_kinds():
            for tensor in layer_tensors(layer, self.hidden_size):
                if tensor.group not in {"attention", "mlp"} or len(tensor.shape) != 2:
                    continue
                shape = LinearShape(tensor.module, tensor.shape[1], tensor.shape[0], False)
                old = found.get(tensor.module)
                if old is None or shape.in_features * shape.out_features > old.in_features * old.out_features:
                    found[tensor.module] = shape
        return tuple(found.values())

    def linear_names(self) -> tuple[str, ...]:
        return tuple(shape.name for shape in self.linear_shapes())

    def linear(self, name: str) -> LinearShape:
        for shape in self.linear_shapes():
            if shape.name == name:
                return shape
        raise PlannerInputError("lora_targets", gettext_noop("“%(name)s” is not a linear layer of %(model)s; its "
                                                             "linear layers are %(layers)s."),
                                name=name, model=self.label, layers=", ".join(self.linear_names()))


# What a Llama-style LoRA target (or the "attention" and "mlp" groups) means in other layouts: Phi-3 fuses
# q/k/v and gate/up into one module each, DeepSeek's latent attention projects keys and values through
# kv_a_proj_with_mqa and kv_b_proj (and queries through q_a_proj and q_b_proj when it compresses them).
_EQUIVALENT_TARGETS = {
    "q_proj": ("qkv_proj", "q_a_proj", "q_b_proj"), "k_proj": ("qkv_proj", "kv_a_proj_with_mqa", "kv_b_proj"),
    "v_proj": ("qkv_proj", "kv_a_proj_with_mqa", "kv_b_proj"), "gate_proj": ("gate_up_proj",),
    "up_proj": ("gate_up_proj",),
}


def resolve_targets(spec: ModelSpec, targets: Any) -> Any:
    """LoRA targets as the modules of ``spec``: a Llama-style name the model does not have becomes the module
    that holds that projection in its layout (``q_proj`` becomes Phi-3's ``qkv_proj``). Names with no such
    module are left for validation to refuse; input that is not a tuple of names is returned as it is."""
    if not isinstance(targets, tuple) or not all(isinstance(t, str) for t in targets):
        return targets
    names = set(spec.linear_names())
    out: list[str] = []
    for target in targets:
        found = [target] if target in names or target not in _EQUIVALENT_TARGETS else [
            t for t in _EQUIVALENT_TARGETS[target] if t in names] or [target]
        out += [t for t in found if t not in out]
    return tuple(out)


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


def _float_or_none(config: Mapping[str, Any], key: str) -> float | None:
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise PlannerInputError(f"config.{key}", gettext_noop("“%(key)s” must be a positive number or null, "
                                                              "not %(value)s."), key=key, value=repr(value))
    return float(value)


SUPPORTED_FAMILIES: tuple[str, ...] = tuple(FAMILIES) + tuple(TEXT_TOWERS)
# More decoder layers than any published model has (the largest have about 130): a bound on the work a
# pasted config can ask for. The module-tree check uses the same bound.
MAX_LAYERS = 256


def model_spec_from_config(config: Any, *, name: str = "") -> ModelSpec:
    """Reads a Hugging Face ``config.json`` (already parsed) into a ``ModelSpec``.

    The families of ``architectures.FAMILIES`` are read by name; a multimodal wrapper of
    ``TEXT_TOWERS`` is planned for its text tower (its vision tower counted as frozen weights
    where ``vision_towers`` knows it). Anything else is refused here with the reason; with the
    ``ml`` extra installed, ``model_tree.spec_from_any_config`` tries the module tree instead."""
    if not isinstance(config, Mapping):
        raise PlannerInputError("config", gettext_noop("a model config must be a JSON object, not %(kind)s."),
                                kind=type(config).__name__)
    family = config.get("model_type")
    if family is None:
        raise PlannerInputError("config.model_type", gettext_noop("the config has no “model_type”, so the "
                                                                  "architecture is unknown; supported: "
                                                                  "%(supported)s."),
                                supported=", ".join(SUPPORTED_FAMILIES))
    name = name or str(config.get("_name_or_path") or "")
    if isinstance(family, str) and family in TEXT_TOWERS:
        return _text_tower(config, family, name)
    if not isinstance(family, str) or family not in FAMILIES:
        raise PlannerInputError("config.model_type", gettext_noop("the architecture “%(family)s” is not "
                                                                  "supported; supported: %(supported)s."),
                                family=family, supported=", ".join(SUPPORTED_FAMILIES))
    return _read(config, family, name)


def _text_tower(config: Mapping[str, Any], family: str, name: str) -> ModelSpec:
    from .vision_towers import vision_parameters

    text = config.get("text_config")
    if text is None:  # older Qwen2-VL style configs keep the text fields at the top level
        text = {k: v for k, v in config.items() if k not in {"vision_config", "model_type"}}
    if not isinstance(text, Mapping):
        raise PlannerInputError("config.text_config", gettext_noop("“text_config” must be a JSON object."))
    text = dict(text)
    text["model_type"] = TEXT_TOWERS[family]
    spec = _read(text, TEXT_TOWERS[family], name)  # the text tower first: its fields are checked there
    vision, note = vision_parameters(family, config)
    return dataclasses.replace(spec, extra_frozen_parameters=vision, notes=spec.notes + (note,))


def _common(config: Mapping[str, Any], traits) -> tuple[Common, int, int, int]:
    hidden = _int(config, "hidden_size")
    heads = _int(config, "num_attention_heads")
    kv_heads = _int(config, "num_key_value_heads", default=heads)
    vocab = _int(config, "vocab_size")
    layers = _int(config, "num_hidden_layers")
    if layers > MAX_LAYERS:  # checked before any reader lists the layers: a pasted config must stay cheap
        raise PlannerInputError("config.num_hidden_layers", gettext_noop("“num_hidden_layers” must be a whole "
                                                                         "number from 1 to %(most)s."),
                                most=MAX_LAYERS)
    intermediate = _int(config, "intermediate_size", required=traits.needs_intermediate)
    max_positions = _int(config, "max_position_embeddings")
    if traits.head_dim_required:
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
    return Common(hidden, heads, kv_heads, head_dim, layers, intermediate), vocab, max_positions, head_dim


def _read(config: Mapping[str, Any], family: str, name: str) -> ModelSpec:
    traits, reader = FAMILIES[family]
    common, vocab, max_positions, head_dim = _common(config, traits)
    layers = tuple(reader(config, common))
    first = layers[0]
    gemma2 = family == "gemma2"
    attn_cap = _float_or_none(config, "attn_logit_softcapping") if gemma2 else None
    final_cap = _float_or_none(config, "final_logit_softcapping") if family in {"gemma2", "gemma3_text"} else None
    windows = [layer.attention.sliding_window for layer in layers if layer.attention.sliding_window]
    dense = next((layer.mlp for layer in layers if not layer.mlp.is_moe), first.mlp)
    notes: tuple[str, ...] = ()
    if family == "gpt_oss":
        notes = ("gpt-oss is published with MXFP4 expert weights; the plan assumes they are loaded in bf16 for "
                 "training (transformers dequantises them unless a kernel keeps them in MXFP4).",)
    return ModelSpec(
        family=family, vocab_size=vocab, hidden_size=common.hidden, num_layers=common.layers,
        num_heads=common.heads, num_kv_heads=first.attention.num_kv_heads, head_dim=head_dim,
        intermediate_size=dense.intermediate_size, max_position_embeddings=max_positions,
        tie_word_embeddings=flag(config, "tie_word_embeddings", traits.tie),
        norm_kind=traits.norm, norms_per_layer=first.norms, mlp_kind=traits.mlp_act,
        qkv_bias=first.attention.q_bias, o_bias=first.attention.o_bias, mlp_bias=dense.bias,
        # transformers runs Gemma 2 with soft-capping in eager attention (SDPA cannot soft-cap).
        attention="eager" if attn_cap is not None else "sdpa",
        attn_logit_softcapping=attn_cap, final_logit_softcapping=final_cap,
        sliding_window=min(windows) if windows else None, name=name, layers=layers, notes=notes,
        config=dict(config),
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
    except (ValueError, RecursionError) as exc:  # a number of thousands of digits, or nesting too deep
        raise PlannerInputError("config", f"{path} cannot be read as a config ({exc.__class__.__name__}: "
                                          f"{str(exc)[:120] or 'nested too deeply'}).") from None
    if not isinstance(data, dict):
        raise PlannerInputError("config", f"{path} holds a JSON {type(data).__name__}, not an object.")
    return data
