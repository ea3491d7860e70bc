"""Builds a Hugging Face model of a ``ModelSpec``'s shape on the meta device: no weights, no hub.

``hf_config(spec)`` is the ``config.json`` dictionary the model is built
from: the config as read (``spec.config``, the text config of a multimodal
model) when the spec has one, else ``to_hf_config``, which rebuilds one
from the spec's fields (the five families of the first planner).
``build_meta_model`` makes the transformers model from it (or from a
reduced copy, see ``layer_sample.py``) on
``torch.device("meta")`` (random-initialised in shape only, nothing
downloaded), in the dtype the setup keeps its base weights in, with LoRA
adapters (peft) and gradient checkpointing applied there, so that the
caller only has to ``to_empty`` it onto real or fake tensors.

Requires torch, transformers and peft (the ``ml`` extra).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from huggingface_hub.errors import StrictDataclassError

from anchorgpu.messages import gettext_noop

from .errors import PlannerInputError
from .measured import not_simulated
from .model_spec import ModelSpec, resolve_targets
from .setup import TrainingSetup

_ACT = {"gated_silu": "silu", "gated_gelu_tanh": "gelu_pytorch_tanh"}


def to_hf_config(spec: ModelSpec) -> dict[str, Any]:
    """A transformers ``config.json`` dictionary with ``spec``'s shape (what memory depends on)."""
    config: dict[str, Any] = {
        "model_type": spec.family, "vocab_size": spec.vocab_size, "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size, "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads, "num_key_value_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim, "max_position_embeddings": spec.max_position_embeddings,
        "tie_word_embeddings": spec.tie_word_embeddings, "hidden_act": _ACT[spec.mlp_kind],
        "use_cache": False,
    }
    if spec.family in {"llama", "mistral", "gemma", "gemma2"}:
        config["attention_bias"] = spec.qkv_bias
    if spec.family == "llama":
        config["mlp_bias"] = spec.mlp_bias
    if spec.family == "qwen2":
        config["use_sliding_window"] = False
    if spec.family in {"gemma", "gemma2"}:
        config["hidden_activation"] = _ACT[spec.mlp_kind]
    if spec.family == "gemma2":
        config["attn_logit_softcapping"] = spec.attn_logit_softcapping
        config["final_logit_softcapping"] = spec.final_logit_softcapping
        config["query_pre_attn_scalar"] = spec.head_dim
    if spec.family in {"mistral", "gemma2"}:
        config["sliding_window"] = spec.sliding_window
    return config


# Keys of a config.json that say how a checkpoint was saved or loaded, not the model's shape: a model built
# from the config without weights must not act on them (a quantised checkpoint's config would otherwise ask
# for its quantiser; remote code is never run).
_NOT_SHAPE = ("quantization_config", "auto_map", "architectures", "_name_or_path", "transformers_version",
              "torch_dtype", "dtype", "attn_implementation", "_attn_implementation", "experts_implementation")


def hf_config(spec: ModelSpec) -> dict[str, Any]:
    """The config dictionary ``spec``'s model is built from: its own config when it has one, else rebuilt."""
    own = getattr(spec, "config", None)
    if not own:
        return to_hf_config(spec)
    config = {key: value for key, value in dict(own).items() if key not in _NOT_SHAPE}
    config["use_cache"] = False
    return config


def auto_config(config: dict[str, Any]):
    """The transformers config object of a config dictionary; one transformers cannot build is refused."""
    from transformers import AutoConfig

    values = dict(config)
    model_type = values.pop("model_type", None)
    try:
        return AutoConfig.for_model(model_type, **values)
    except (*_CONFIG_REFUSED, StrictDataclassError) as exc:  # the last: a config class's own validators
        raise _cannot_build(exc) from None


# What transformers raises for a config it cannot build a model from (an unknown activation, RoPE type or
# layer type, a shape that does not divide): each one the customer's input, not our fault.
_CONFIG_REFUSED = (ValueError, KeyError, TypeError, IndexError, AttributeError)


def _cannot_build(exc: Exception) -> PlannerInputError:
    if isinstance(exc, KeyError) and exc.args:
        reason = f"unknown name {exc.args[0]!r}"  # an activation or a kind transformers does not know
    else:
        reason = " ".join(str(exc).split()) or type(exc).__name__
    return PlannerInputError("config", gettext_noop("transformers cannot build a model from this config "
                                                    "(%(reason)s)."), reason=reason[:300])


def attention_implementation(spec: ModelSpec, setup: TrainingSetup, model_class=None) -> tuple[str, str | None]:
    """The attention kernel the simulated step uses for ``setup.attention``, with a note where it stands in.

    ``auto`` is what transformers picks: SDPA, or eager where the model needs it (Gemma 2's soft-capping) or
    has no SDPA path (gpt-oss's attention sinks). FlashAttention 2/3 are GPU kernels: on the CPU the step runs
    SDPA's flash kernel, which keeps the same tensors for backward (the output and one fp32 log-sum-exp per
    query and head), so the live bytes are the same."""
    wanted = getattr(setup, "attention", "auto") or "auto"
    supports_sdpa = getattr(model_class, "_supports_sdpa", True) if model_class is not None else True
    if wanted == "eager" or (wanted == "auto" and getattr(spec, "attention", "sdpa") == "eager"):
        return "eager", None
    if not supports_sdpa:
        note = None if wanted in ("auto", "eager") else (
            f"{model_class.__name__} has no SDPA path: simulated with eager attention in place of {wanted}.")
        return "eager", note
    if wanted.startswith("flash_attention"):
        return "sdpa", (f"{wanted} simulated with SDPA's flash kernel on the CPU: it keeps the same tensors for "
                        "backward (output and log-sum-exp).")
    return "sdpa", None


def base_dtype(setup: TrainingSetup) -> torch.dtype:
    """The dtype the model's own weights are kept in (as ``analytic._placements``)."""
    if setup.method == "full":
        return torch.bfloat16 if setup.precision == "bf16" else torch.float32
    return torch.float32 if setup.precision == "fp32" else torch.bfloat16


def build_meta_model(spec: ModelSpec, setup: TrainingSetup, *, config: dict[str, Any] | None = None,
                     notes: list[str] | None = None) -> torch.nn.Module:
    """The model of ``spec`` on the meta device, set up for ``setup`` (LoRA, checkpointing, dtypes).

    ``config`` replaces ``hf_config(spec)`` (the layer sampler passes a copy with fewer layers); what the
    build had to stand in for is appended to ``notes``."""
    from transformers import AutoModelForCausalLM

    refused = not_simulated(setup)
    if refused is not None:
        raise PlannerInputError(*refused)
    hf_object = auto_config(config if config is not None else hf_config(spec))
    model_class = AutoModelForCausalLM._model_mapping.get(type(hf_object), None)
    if model_class is None:
        raise PlannerInputError("config", gettext_noop("transformers has no causal language model for the "
                                                       "architecture “%(family)s”."),
                                family=getattr(hf_object, "model_type", "?"))
    attention, note = attention_implementation(spec, setup, model_class)
    if note and notes is not None:
        notes.append(note)
    extra = {"experts_implementation": "grouped_mm"} if _has_experts(model_class) else {}
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf_object, attn_implementation=attention,
                                                     dtype=base_dtype(setup), **extra)
    except _CONFIG_REFUSED as exc:
        raise _cannot_build(exc) from None
    model.config.use_cache = False
    if setup.is_lora:
        from peft import LoraConfig, get_peft_model

        targets = [t for t in resolve_targets(spec, setup.lora_targets) if t != "experts"]
        # "experts": peft's LoRA on the fused expert parameters (``target_parameters``; one adapter pair per
        # parameter, rank x experts wide), next to the linear modules named.
        parameters = _expert_parameters(model) if "experts" in setup.lora_targets else []
        lora = LoraConfig(r=setup.lora_rank, lora_alpha=setup.lora_alpha, target_modules=targets,
                          target_parameters=parameters or None,
                          lora_dropout=float(getattr(setup, "lora_dropout", 0.0) or 0.0), bias="none",
                          task_type="CAUSAL_LM")
        model = get_peft_model(model, lora, autocast_adapter_dtype=False)
        adapter = torch.float32 if setup.adapter_dtype == "fp32" else torch.bfloat16
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.data = param.data.to(adapter)
    if setup.grad_checkpointing:
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers 5 renamed it
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    model.train()
    return model


def _expert_parameters(model: torch.nn.Module) -> list[str]:
    """The fused expert parameters of a model as peft's ``target_parameters`` names (``experts.gate_up_proj``)."""
    names: list[str] = []
    for path, module in model.named_modules():
        if not (hasattr(module, "_is_expert_parallel") and hasattr(module, "has_gate")):
            continue
        for name, param in module.named_parameters(recurse=False):
            target = f"{path.rsplit('.', 1)[-1]}.{name}"
            if param.dim() == 3 and target not in names:
                names.append(target)
    return names


@functools.cache
def _has_experts(model_class) -> bool:
    """Whether the model's experts run through transformers' experts interface (fused expert parameters).

    The step then uses ``grouped_mm``, transformers' default on the GPUs it supports (compute capability 8.0
    and up): one grouped matrix product over all routed tokens, whose tensors have the same sizes however the
    tokens are routed (see ``moe_routing.py``)."""
    import inspect
    import sys

    module = sys.modules.get(model_class.__module__)
    try:
        return module is not None and "@use_experts_implementation" in inspect.getsource(module)
    except (OSError, TypeError):
        return False
