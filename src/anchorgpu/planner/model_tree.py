"""The model's own module tree, on the meta device: what the planner's reading of a config is held to.

Needs torch and transformers (the ``ml`` extra). ``tree_tensors`` builds the
causal LM of a ``config.json`` on ``torch.device("meta")`` (no weights, no
hub) and lists every parameter by name and shape; ``compare`` sets it against
the planner's ``ModelSpec`` tensor for tensor; ``spec_from_any_config`` reads a
family the planner does not know by name through the standard config fields
and accepts the reading only when the module tree agrees to the tensor,
otherwise refusing with the parameters it could not account for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from anchorgpu.messages import gettext_noop

from .architectures import FAMILIES, TEXT_TOWERS
from .errors import PlannerInputError
from .layer_spec import layer_tensors
from .model_spec import MAX_LAYERS, ModelSpec, model_spec_from_config

MAX_TREE_LAYERS = MAX_LAYERS


def build_config(config: Mapping[str, Any]):
    """transformers' config object for ``config`` (its ``model_type`` picks the class); refusals worded as the
    simulation words them (``hf_build.auto_config``)."""
    from transformers import CONFIG_MAPPING

    from .hf_build import auto_config

    family = config.get("model_type")
    if not isinstance(family, str) or family not in CONFIG_MAPPING:
        raise PlannerInputError("config.model_type", gettext_noop("transformers cannot build a config of type "
                                                                  "“%(family)s”: it knows no such model type."),
                                family=family)
    return auto_config(dict(config))


def tree_tensors(config: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every parameter of the causal LM built from ``config`` on the meta device: name -> shape."""
    import torch
    from transformers import AutoModelForCausalLM

    from .hf_build import _CONFIG_REFUSED, _cannot_build

    built = build_config(config)
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(built)
    except (*_CONFIG_REFUSED, AssertionError, RuntimeError) as exc:
        raise _cannot_build(exc) from None
    return {name: tuple(p.shape) for name, p in model.named_parameters(remove_duplicate=True)}


def spec_tensors(spec: ModelSpec) -> dict[str, tuple[int, ...]]:
    """The planner's tensors of ``spec``, named as transformers names them (text model only)."""
    out = {"model.embed_tokens.weight": (spec.vocab_size, spec.hidden_size), "model.norm.weight": (spec.hidden_size,)}
    for index, layer in enumerate(spec.layers):
        for t in layer_tensors(layer, spec.hidden_size):
            out[f"model.layers.{index}.{t.name}"] = t.shape
    if not spec.tie_word_embeddings:
        out["lm_head.weight"] = (spec.vocab_size, spec.hidden_size)
    return out


@dataclass(frozen=True)
class Comparison:
    missing: tuple[str, ...]  # in the tree, not in the spec
    extra: tuple[str, ...]  # in the spec, not in the tree
    mismatched: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]  # (name, spec shape, tree shape)

    @property
    def agrees(self) -> bool:
        return not (self.missing or self.extra or self.mismatched)


def compare(spec: ModelSpec, tree: Mapping[str, tuple[int, ...]]) -> Comparison:
    mine = spec_tensors(spec)
    return Comparison(missing=tuple(sorted(set(tree) - set(mine))), extra=tuple(sorted(set(mine) - set(tree))),
                      mismatched=tuple((n, mine[n], tree[n]) for n in sorted(set(mine) & set(tree))
                                       if tuple(mine[n]) != tuple(tree[n])))


def _checked(spec: ModelSpec, config: Mapping[str, Any]) -> ModelSpec:
    """A named family's reading, held to the model transformers builds from the same config when the ``ml``
    extra is installed: a config transformers refuses (an unknown activation, malformed layer types) is
    refused here too, and a reading that differs from the built model by one tensor is not planned."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return spec
    text = config.get("text_config") if config.get("model_type") in TEXT_TOWERS else None
    tower = dict(text) if isinstance(text, Mapping) else None
    if tower is not None:
        tower["model_type"] = TEXT_TOWERS[config["model_type"]]
    if spec.num_layers > MAX_TREE_LAYERS:
        raise PlannerInputError("config.num_hidden_layers", gettext_noop("“num_hidden_layers” must be a whole "
                                                                         "number from 1 to %(most)s."),
                                most=MAX_TREE_LAYERS)
    result = compare(spec, tree_tensors(tower if tower is not None else config))
    if not result.agrees:
        differ = [re.sub(r"\.\d+\.", ".N.", n) for n in result.missing + result.extra
                  + tuple(m[0] for m in result.mismatched)]
        raise PlannerInputError("config", gettext_noop("the planner's reading of this %(family)s config differs "
                                                       "from the model transformers builds from it (%(tensors)s): "
                                                       "it is not planned on a guess."),
                                family=spec.family, tensors=", ".join(sorted(set(differ))[:6]))
    return spec


# The readers a family the planner does not name may share: tried in this order.
_GENERIC_READERS = ("llama", "qwen3", "mistral", "qwen2", "gemma3_text", "olmo2", "qwen3_moe", "mixtral",
                    "deepseek_v3", "phi3")


def spec_from_any_config(config: Mapping[str, Any], *, name: str = "") -> ModelSpec:
    """A ``ModelSpec`` for any decoder-only causal LM transformers builds from ``config``.

    Families the planner names are read directly. Another family is read with each known layout in turn
    (its standard field names); the first reading whose tensors equal the module tree's, name for name and
    shape for shape, is used, with a note saying so. If none agrees, the config is refused with the
    parameters no reading accounts for: a model is never planned on a guess."""
    family = config.get("model_type") if isinstance(config, Mapping) else None
    if not isinstance(family, str) or family in FAMILIES or family in TEXT_TOWERS:
        return _checked(model_spec_from_config(config, name=name), config)
    layers = config.get("num_hidden_layers")
    if not isinstance(layers, int) or isinstance(layers, bool) or not 0 < layers <= MAX_TREE_LAYERS:
        # Building the module tree costs time per layer: a pasted config must not make the server build
        # a million of them. Real models have a few hundred layers at most.
        raise PlannerInputError("config.num_hidden_layers", gettext_noop("the planner does not name the "
                                                                         "architecture “%(family)s”; to read it "
                                                                         "from its module tree, "
                                                                         "“num_hidden_layers” must be a whole "
                                                                         "number from 1 to %(most)s."),
                                family=family, most=MAX_TREE_LAYERS)
    try:
        tree = tree_tensors(config)
    except ImportError:
        raise PlannerInputError("config.model_type", gettext_noop("the architecture “%(family)s” is not one the "
                                                                  "planner names; reading it from its module "
                                                                  "tree needs the ml extra (pip install "
                                                                  "'anchorgpu[ml]')."), family=family) from None
    closest = None
    for reader in _GENERIC_READERS:
        try:
            spec = model_spec_from_config({**config, "model_type": reader}, name=name)
        except PlannerInputError:
            continue
        result = compare(spec, tree)
        if result.agrees:
            note = (f"“{family}” is read with the {reader} layout: every one of its parameter tensors matches the "
                    "model transformers builds from the config.")
            return replace(spec, family=family, notes=spec.notes + (note,), config=dict(config))
        score = len(result.missing) + len(result.extra) + len(result.mismatched)
        if closest is None or score < closest[0]:
            closest = (score, reader, result)
    unknown = sorted({re.sub(r"\.\d+\.", ".N.", n) for n in (closest[2].missing if closest else tree)})[:6]
    raise PlannerInputError("config.model_type", gettext_noop("the architecture “%(family)s” cannot be planned: "
                                                              "transformers builds it, but no layout the planner "
                                                              "knows accounts for its parameters (%(unknown)s)."),
                            family=family, unknown=", ".join(unknown) or "?")
