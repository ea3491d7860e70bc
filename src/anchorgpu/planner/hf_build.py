"""Builds a Hugging Face model of a ``ModelSpec``'s shape on the meta device: no weights, no hub.

``to_hf_config`` turns a ``ModelSpec`` back into a ``config.json``
dictionary; ``build_meta_model`` makes the transformers model from it on
``torch.device("meta")`` (random-initialised in shape only, nothing
downloaded), in the dtype the setup keeps its base weights in, with LoRA
adapters (peft) and gradient checkpointing applied there, so that the
caller only has to ``to_empty`` it onto real or fake tensors.

Requires torch, transformers and peft (the ``ml`` extra).
"""

from __future__ import annotations

from typing import Any

import torch

from .errors import PlannerInputError
from .model_spec import ModelSpec
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


def base_dtype(setup: TrainingSetup) -> torch.dtype:
    """The dtype the model's own weights are kept in (as ``analytic._placements``)."""
    if setup.method == "full":
        return torch.bfloat16 if setup.precision == "bf16" else torch.float32
    return torch.float32 if setup.precision == "fp32" else torch.bfloat16


def build_meta_model(spec: ModelSpec, setup: TrainingSetup) -> torch.nn.Module:
    """The model of ``spec`` on the meta device, set up for ``setup`` (LoRA, checkpointing, dtypes)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    if setup.method == "qlora":
        raise PlannerInputError("method", "QLoRA's 4-bit weights need bitsandbytes, which cannot run on "
                                          "simulated tensors: not simulable; use the analytic engine.")
    if setup.optimizer == "adamw8bit":
        raise PlannerInputError("optimizer", "8-bit AdamW needs bitsandbytes, which cannot run on simulated "
                                             "tensors: not simulable; use the analytic engine.")
    hf = to_hf_config(spec)
    config = AutoConfig.for_model(hf.pop("model_type"), **hf)
    attention = "eager" if spec.attention == "eager" else "sdpa"
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation=attention, dtype=base_dtype(setup))
    model.config.use_cache = False
    if setup.is_lora:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(r=setup.lora_rank, lora_alpha=setup.lora_alpha, target_modules=list(setup.lora_targets),
                          lora_dropout=0.0, bias="none", task_type="CAUSAL_LM")
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
