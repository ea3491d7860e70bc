"""Built-in model presets: the memory-relevant part of published config.json files.

Each preset carries the Hugging Face repository its ``config.json`` comes
from. The dictionaries keep the published keys and values (tokenizer ids and
rope scaling left out: they do not change memory), so they go through the
same ``model_spec_from_config`` as an uploaded config. The tiny shapes are
not real models: they are small enough for tests and for the simulation
engine to run in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from anchorgpu.messages import gettext_noop

from .errors import PlannerInputError
from .model_spec import ModelSpec, model_spec_from_config
from .presets_today import TODAY


@dataclass(frozen=True)
class Preset:
    key: str
    repo: str  # Hugging Face repository the config comes from ("" for the test shapes)
    config: Mapping[str, Any]

    @property
    def source(self) -> str:
        return f"https://huggingface.co/{self.repo}/blob/main/config.json" if self.repo else "test shape"

    def spec(self) -> ModelSpec:
        return model_spec_from_config(dict(self.config), name=self.repo or self.key)


def _llama(hidden, intermediate, layers, heads, kv_heads, *, tie, head_dim=None, max_positions=131072):
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
              "mlp_bias": False, "hidden_act": "silu", "hidden_size": hidden, "intermediate_size": intermediate,
              "max_position_embeddings": max_positions, "num_attention_heads": heads, "num_hidden_layers": layers,
              "num_key_value_heads": kv_heads, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
              "tie_word_embeddings": tie, "torch_dtype": "bfloat16", "vocab_size": 128256}
    if head_dim is not None:  # the Llama 3.2 configs state head_dim; the 3.1 configs leave it implied
        config["head_dim"] = head_dim
    return config


def _qwen25(hidden, intermediate, layers, heads, kv_heads):
    return {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
            "hidden_size": hidden, "intermediate_size": intermediate, "max_position_embeddings": 131072,
            "max_window_layers": layers, "num_attention_heads": heads, "num_hidden_layers": layers,
            "num_key_value_heads": kv_heads, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
            "sliding_window": 131072, "use_sliding_window": False, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16", "vocab_size": 152064}


_PRESETS = (
    Preset("llama-3.2-1b", "meta-llama/Llama-3.2-1B", _llama(2048, 8192, 16, 32, 8, tie=True, head_dim=64)),
    Preset("llama-3.2-3b", "meta-llama/Llama-3.2-3B", _llama(3072, 8192, 28, 24, 8, tie=True, head_dim=128)),
    Preset("llama-3.1-8b", "meta-llama/Llama-3.1-8B", _llama(4096, 14336, 32, 32, 8, tie=False)),
    Preset("llama-3.1-70b", "meta-llama/Llama-3.1-70B", _llama(8192, 28672, 80, 64, 8, tie=False)),
    Preset("mistral-7b-v0.3", "mistralai/Mistral-7B-v0.3", {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu",
        "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
        "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": 32768}),
    Preset("qwen2.5-7b", "Qwen/Qwen2.5-7B", _qwen25(3584, 18944, 28, 28, 4)),
    Preset("qwen2.5-72b", "Qwen/Qwen2.5-72B", _qwen25(8192, 29568, 80, 64, 8)),
    # The Gemma 2 config does not state tie_word_embeddings: the family ties them by default.
    Preset("gemma-2-9b", "google/gemma-2-9b", {
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "attention_bias": False,
        "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "head_dim": 256,
        "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584,
        "intermediate_size": 14336, "max_position_embeddings": 8192, "num_attention_heads": 16,
        "num_hidden_layers": 42, "num_key_value_heads": 8, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
        "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32", "vocab_size": 256000}),
    # Test shapes: a few layers, small widths, every feature the real families have.
    Preset("tiny-llama", "", {
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "max_position_embeddings": 1024,
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "vocab_size": 512,
        "tie_word_embeddings": False}),
    Preset("tiny-qwen2", "", {
        "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 160, "max_position_embeddings": 1024,
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "vocab_size": 512,
        "tie_word_embeddings": True}),
    Preset("tiny-gemma2", "", {
        "model_type": "gemma2", "hidden_size": 64, "intermediate_size": 160, "max_position_embeddings": 1024,
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "head_dim": 32,
        "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "sliding_window": 256,
        "vocab_size": 512}),
)

_PRESETS += tuple(Preset(key, repo, config) for key, repo, config in TODAY)

PRESETS: Mapping[str, Preset] = MappingProxyType({p.key: p for p in _PRESETS})


def preset(name: str) -> Preset:
    """Finds a preset by its key or its Hugging Face repository, ignoring case."""
    wanted = str(name).strip().lower()
    for item in _PRESETS if wanted else ():
        if wanted in {item.key, item.repo.lower()}:
            return item
    raise PlannerInputError("model", gettext_noop("there is no preset “%(name)s”; presets: %(presets)s."),
                            name=name, presets=", ".join(PRESETS))


def preset_spec(name: str) -> ModelSpec:
    return preset(name).spec()
