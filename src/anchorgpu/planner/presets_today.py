"""Presets for the models most fine-tuned today: the memory-relevant keys of their published config.json.

Keys and values are copied from each repository's ``config.json`` (tokenizer
ids, rope scaling and generation settings left out: they do not change
memory). ``tests/planner/test_published_counts.py`` holds every one to the
parameter total its publisher states, and to the transformers module tree.
The tiny shapes are not real models: they have each family's features at a
size the simulation runs in seconds.
"""

from __future__ import annotations

from typing import Any

_SILU = {"hidden_act": "silu", "torch_dtype": "bfloat16"}


def _qwen3(hidden, intermediate, layers, heads, kv_heads, **more) -> dict[str, Any]:
    return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", **_SILU, "attention_bias": False,
            "head_dim": 128, "hidden_size": hidden, "intermediate_size": intermediate,
            "max_position_embeddings": 40960, "max_window_layers": layers, "num_attention_heads": heads,
            "num_hidden_layers": layers, "num_key_value_heads": kv_heads, "rms_norm_eps": 1e-06,
            "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": False,
            "use_sliding_window": False, "vocab_size": 151936, **more}


# (key, Hugging Face repository, config)
TODAY: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("qwen3-8b", "Qwen/Qwen3-8B", _qwen3(4096, 12288, 36, 32, 8)),
    ("qwen3-32b", "Qwen/Qwen3-32B", _qwen3(5120, 25600, 64, 64, 8)),
    ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", {
        **_qwen3(2048, 6144, 48, 32, 4), "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "decoder_sparse_step": 1, "mlp_only_layers": [], "moe_intermediate_size": 768, "norm_topk_prob": True,
        "num_experts": 128, "num_experts_per_tok": 8, "output_router_logits": False,
        "router_aux_loss_coef": 0.001}),
    ("gpt-oss-20b", "openai/gpt-oss-20b", {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "attention_bias": True, "head_dim": 64,
        "hidden_act": "silu", "hidden_size": 2880, "intermediate_size": 2880,
        "layer_types": ["sliding_attention", "full_attention"] * 12, "max_position_embeddings": 131072,
        "num_attention_heads": 64, "num_experts_per_tok": 4, "experts_per_token": 4, "num_hidden_layers": 24,
        "num_key_value_heads": 8, "num_local_experts": 32, "rms_norm_eps": 1e-05, "rope_theta": 150000,
        "sliding_window": 128, "swiglu_limit": 7.0, "tie_word_embeddings": False, "vocab_size": 201088}),
    ("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", {
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", **_SILU, "hidden_size": 4096,
        "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32,
        "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
        "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": None,
        "tie_word_embeddings": False, "vocab_size": 32000}),
    ("gemma-3-27b", "google/gemma-3-27b-pt", {
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "mm_tokens_per_image": 256,
        "text_config": {
            "model_type": "gemma3_text", "head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
            "max_position_embeddings": 131072, "num_attention_heads": 32, "num_hidden_layers": 62,
            "num_key_value_heads": 16, "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0,
                                                                                     "rope_type": "linear"},
            "sliding_window": 1024, "vocab_size": 262208},
        "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                          "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                          "patch_size": 14, "vision_use_head": False}}),
    ("deepseek-v2-lite", "deepseek-ai/DeepSeek-V2-Lite", {
        "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "attention_bias": False,
        "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 10944,
        "kv_lora_rank": 512, "max_position_embeddings": 163840, "moe_intermediate_size": 1408,
        "moe_layer_freq": 1, "n_routed_experts": 64, "n_shared_experts": 2, "norm_topk_prob": False,
        "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16,
        "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
        "routed_scaling_factor": 1.0, "tie_word_embeddings": False, "topk_method": "greedy", "v_head_dim": 128,
        "vocab_size": 102400}),
    ("phi-4", "microsoft/phi-4", {
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_act": "silu", "hidden_size": 5120,
        "intermediate_size": 17920, "max_position_embeddings": 16384, "num_attention_heads": 40,
        "num_hidden_layers": 40, "num_key_value_heads": 10, "original_max_position_embeddings": 16384,
        "rms_norm_eps": 1e-05, "rope_theta": 250000, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": 100352}),
    ("llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct", {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False, "mlp_bias": False,
        **_SILU, "hidden_size": 8192, "intermediate_size": 28672, "max_position_embeddings": 131072,
        "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0, "tie_word_embeddings": False, "vocab_size": 128256}),
    ("mistral-small-24b", "mistralai/Mistral-Small-24B-Base-2501", {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", **_SILU, "head_dim": 128,
        "hidden_size": 5120, "intermediate_size": 32768, "max_position_embeddings": 32768,
        "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
        "rope_theta": 100000000.0, "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 131072}),
    # Test shapes.
    ("tiny-qwen3", "", {"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 160, "head_dim": 16,
                        "max_position_embeddings": 1024, "num_attention_heads": 4, "num_hidden_layers": 2,
                        "num_key_value_heads": 2, "vocab_size": 512, "tie_word_embeddings": False}),
    ("tiny-qwen3-moe", "", {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 160,
                            "moe_intermediate_size": 48, "num_experts": 8, "num_experts_per_tok": 2,
                            "head_dim": 16, "max_position_embeddings": 1024, "num_attention_heads": 4,
                            "num_hidden_layers": 2, "num_key_value_heads": 2, "vocab_size": 512,
                            "norm_topk_prob": True, "tie_word_embeddings": False}),
    ("tiny-deepseek-v2", "", {"model_type": "deepseek_v2", "hidden_size": 64, "intermediate_size": 160,
                              "moe_intermediate_size": 32, "n_routed_experts": 8, "n_shared_experts": 1,
                              "num_experts_per_tok": 2, "first_k_dense_replace": 1, "kv_lora_rank": 32,
                              "q_lora_rank": None, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
                              "v_head_dim": 24, "max_position_embeddings": 1024, "num_attention_heads": 4,
                              "num_key_value_heads": 4, "num_hidden_layers": 3, "vocab_size": 512,
                              "tie_word_embeddings": False}),
    ("tiny-gemma3", "", {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 160, "head_dim": 16,
                         "max_position_embeddings": 1024, "num_attention_heads": 4, "num_hidden_layers": 3,
                         "num_key_value_heads": 2, "sliding_window": 64, "sliding_window_pattern": 3,
                         "vocab_size": 512}),
)
