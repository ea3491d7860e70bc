"""Peak-memory figures that others measured on real GPUs and published with their recipes (issue 21).

Plain data for ``bench/planner_gpu_published.py``; nothing here was measured by us. Every figure is
copied, as the string printed in the source, from the file and commit named in its ``source``; every
setting is traced to the recipe, script or command named in ``recipe``.

Fields of a ``Row``:

* ``id``: short, stable name of the row (``tt-``: torchtune, ``fq-``: Answer.AI fsdp_qlora, ``lg-``: LitGPT).
* ``model``: the Hugging Face repository of the model; ``config`` a key of ``CONFIGS`` (the public
  ``config.json`` facts, each with where they were read).
* ``card``: a key of ``CARDS``; ``gpus``: how many took part (the figure is per GPU).
* ``settings``: the planner's setup fields (names as in ``TrainingSetup`` and issue 21's PLAN.md:
  method, lora_rank, lora_targets, lora_dropout, adapter_dtype, optimizer, precision, seq_len,
  micro_batch, grad_accumulation, grad_checkpointing, activation_offload, attention, packed,
  cross_entropy, parallel, gpus, offload, quantize_lm_head, double_quant; fsdp_version for FSDP rows:
  1 for ``FullyShardedDataParallel``, 2 for ``fully_shard``).
* ``extra``: settings of the run that the planner has no field for (torch.compile, torchtune's
  optimizer-in-backward, FSDP's NO_SHARD strategy, torchao's NF4); a row with one of them switched on is
  printed as "setting not modelled" and not judged.
* ``measure``: what the figure is: ``allocated`` (``torch.cuda.max_memory_allocated``), ``active``
  (the allocator's ``active_bytes.all.peak``), ``reserved`` (``max_memory_reserved``), ``nvidia-smi``
  (device-wide used memory), or ``oom`` (the run ran out of memory; no figure).
* ``figure`` and ``unit``: the published number as a string, exactly as printed, and ``GiB`` (2**30
  bytes) or ``GB`` (10**9 bytes), checked in the code that printed it (``unit_check``).
* ``scope``: what the peak covers: the training steps only, or the whole run (loading, evaluation and
  generation included).
* ``trust``: per setting, why we believe it (where it is stated, or how it is inferred).
* ``unknown``: settings the sources do not pin down; a row with any is kept apart and not judged.
* ``load_cache``: what loading and wrapping the model leave cached in PyTorch's allocator when the
  measurement starts (``planner/load_cache.py``); the reason is in ``trust["load_cache"]``.

Sources are quoted by place (file, section, row); the notes are our own words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

MEASURES = ("allocated", "active", "reserved", "nvidia-smi", "oom")
UNITS = {"GiB": 2**30, "GB": 10**9}
SETTINGS = ("method", "lora_rank", "lora_targets", "lora_dropout", "adapter_dtype", "optimizer", "precision",
            "seq_len", "micro_batch", "grad_accumulation", "grad_checkpointing", "activation_offload", "attention",
            "packed", "cross_entropy", "parallel", "gpus", "offload", "quantize_lm_head", "double_quant",
            "fsdp_version")
LORA_ONLY = ("lora_rank", "lora_targets", "lora_dropout", "adapter_dtype")
QLORA_ONLY = ("quantize_lm_head", "double_quant")
FSDP_ONLY = ("fsdp_version",)  # stated only by rows that run FSDP


@dataclass(frozen=True)
class Source:
    url: str
    repo: str  # owner/name on GitHub
    commit: str  # 40 hex digits
    path: str
    where: str  # the place in the file: section, table, row


@dataclass(frozen=True)
class Card:
    name: str
    memory_bytes: int  # per card: as sold ("24 GB" of GDDR is 24 GiB of DRAM), or what the driver exposes
    basis: str
    # The planner's card generation whose overheads apply (planner/device_memory.py): CUDA cards other than
    # compute capability 9.x get PyTorch's default cuBLAS workspace, as the A100 does, and the same context.
    generation: str = "a100"


@dataclass(frozen=True)
class Row:
    id: str
    model: str
    config: str
    card: str
    gpus: int
    settings: Mapping[str, Any]
    measure: str
    figure: str | None
    unit: str | None
    source: Source
    recipe: Source
    scope: str
    unit_check: str
    trust: Mapping[str, str]
    extra: Mapping[str, Any] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()
    notes: str = ""
    # What loading and wrapping the model leave in the allocator's cache when the figure's measurement starts
    # (planner/load_cache.py LOAD_PATHS): how the run measures, not a training setting.
    load_cache: str = "emptied"


CARDS: Mapping[str, Card] = MappingProxyType({
    "a100-80gb": Card("NVIDIA A100 80GB", 80 * 2**30, "80 GB HBM2e per card"),
    "rtx-3090": Card("NVIDIA GeForce RTX 3090", 24 * 2**30, "24 GB GDDR6X per card"),
    "rtx-4090": Card("NVIDIA GeForce RTX 4090", 24 * 2**30, "24 GB GDDR6X per card"),
    # Sold as 24 GB; with ECC on (AWS's default) nvidia-smi reports a total of 23028MiB, as public logs show.
    "a10g": Card("NVIDIA A10G (AWS)", 23028 * 2**20, "nvidia-smi total with ECC on: 23028MiB"),
})

# --- Model configs: config.json facts (memory-relevant keys only), each with where it was read ------------
_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False, "mlp_bias": False,
          "hidden_act": "silu", "rms_norm_eps": 1e-05}
_LITGPT_CONFIG = ("https://github.com/Lightning-AI/litgpt/blob/fd71063ce749008f77a991e07879d35d8d4ba4ed/"
                  "litgpt/config.py")

CONFIGS: Mapping[str, tuple[Mapping[str, Any], str]] = MappingProxyType({
    "llama-3.2-3b": ({**_LLAMA, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 28,
                      "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
                      "max_position_embeddings": 131072, "rope_theta": 500000.0, "tie_word_embeddings": True},
                     "torchtune 1814feb1 torchtune/models/llama3_2/_model_builders.py llama3_2_3b (vocab 128_256, "
                     "28 layers, 24 heads, 8 kv heads, embed 3072, intermediate 8192, max_seq_len 131072; tied "
                     "embeddings as the Llama 3.2 HF config states)"),
    "llama-2-7b": ({**_LLAMA, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
                    "max_position_embeddings": 4096, "rope_theta": 10000.0, "tie_word_embeddings": False},
                   f"{_LITGPT_CONFIG} entry Llama-2-7b{{}}-hf (vocab 32000, 32 layers, intermediate 11008; n_embd "
                   "4096, 32 heads and block_size 4096 are the Config defaults), citing the HF config.json"),
    "llama-2-70b": ({**_LLAMA, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
                     "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 32000,
                     "max_position_embeddings": 4096, "rope_theta": 10000.0, "tie_word_embeddings": False},
                    f"{_LITGPT_CONFIG} entry Llama-2-70b{{}}-hf (vocab 32000, 80 layers, 64 heads, n_embd 8192, "
                    "8 query groups, intermediate 28672)"),
    "llama-3-8b": ({**_LLAMA, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                    "max_position_embeddings": 8192, "rope_theta": 500000.0, "tie_word_embeddings": False},
                   f"{_LITGPT_CONFIG} entry Llama-3-8B{{}} (block_size 8192, padded vocab 128256, 32 layers, 32 "
                   "heads, 8 query groups, intermediate 14336, rope_base 500000)"),
    "yi-34b": ({**_LLAMA, "hidden_size": 7168, "intermediate_size": 20480, "num_hidden_layers": 60,
                "num_attention_heads": 56, "num_key_value_heads": 8, "vocab_size": 64000,
                "max_position_embeddings": 4096, "rope_theta": 5000000.0, "tie_word_embeddings": False},
               "https://apxml.com/models/yi-34b (hidden 7,168, 60 layers, 56 heads, 8 KV heads, FFN 20,480, "
               "vocabulary 64,000, RoPE theta 5,000,000, context 4K); Yi-34B loads as LlamaForCausalLM"),
    "mistral-7b-v0.2": ({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu",
                         "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                         "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
                         "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
                         "sliding_window": None, "tie_word_embeddings": False},
                        f"{_LITGPT_CONFIG} entry Mistral-7B-v0.2 (padded vocab 32000, block_size 32768, 32 layers, "
                        "8 query groups, intermediate 14336), citing unsloth/mistral-7b-v0.2's config.json; v0.2 "
                        "has no sliding window"),
    "gemma-7b": ({"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_act": "gelu_pytorch_tanh",
                  "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
                  "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256, "vocab_size": 256000,
                  "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "tie_word_embeddings": True},
                 f"{_LITGPT_CONFIG} entry Gemma-7b (vocab 256000, n_embd 3072, 28 layers, 16 heads, head_size "
                 "256, intermediate 24576), citing google/gemma-7b's config.json (8192 positions)"),
    "gemma-2-9b": ({"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "attention_bias": False,
                    "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "head_dim": 256,
                    "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
                    "hidden_size": 3584, "intermediate_size": 14336, "max_position_embeddings": 8192,
                    "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
                    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
                    "sliding_window": 4096, "vocab_size": 256000},
                   "google/gemma-2-9b config.json, as kept in src/anchorgpu/planner/presets.py"),
})

# LitGPT builds its own model from its own Config, and at these commits that model never ties the head to the
# embedding: GPT has an nn.Embedding ``transformer.wte`` and a separate ``lm_head`` (litgpt/model.py:25,28 and
# litgpt/lora.py:509-521 at 00af8b0d), its Config has no tie setting (config.py at fd71063c and 00af8b0d) and
# finetune/lora.py refuses ``train.tie_embeddings`` (validate_args, finetune/lora.py:451). When the Hugging Face
# checkpoint has no ``lm_head.weight`` (Gemma, Gemma 2), convert_hf_checkpoint copies the embedding into it
# (scripts/convert_hf_checkpoint.py:206-207 and 281-282), and load_state_dict copies that into the separate
# head parameter on the card. So the model LitGPT trains is the config.json with the embedding untied: one more
# vocab x hidden matrix (for Gemma 7B 256000 x 3072 = 786,432,000 parameters, 1.57 GB in bf16).
_LITGPT_UNTIED = ("; as LitGPT builds it: lm_head separate from the embedding (litgpt@00af8b0d model.py:25,28, "
                  "lora.py:509-521; scripts/convert_hf_checkpoint.py:206-207 and 281-282 copy the embedding "
                  "into lm_head.weight when the checkpoint has none)")
CONFIGS = MappingProxyType({
    **CONFIGS,
    "gemma-7b-litgpt": ({**CONFIGS["gemma-7b"][0], "tie_word_embeddings": False},
                        CONFIGS["gemma-7b"][1] + _LITGPT_UNTIED),
    "gemma-2-9b-litgpt": ({**CONFIGS["gemma-2-9b"][0], "tie_word_embeddings": False},
                          CONFIGS["gemma-2-9b"][1] + _LITGPT_UNTIED),
})

_ATTN_MLP = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# --- torchtune: README "Optimization flags" table (Llama 3.2 3B, one A100, batch 2, sequence 4096, bf16) ----
_TT = "1814feb17a9038e1a8053ce93111bd26774a8db6"
_TT_README = "https://github.com/pytorch/torchtune/blob/" + _TT + "/README.md"


def _tt_source(row: str) -> Source:
    return Source(_TT_README + "#optimization-flags", "pytorch/torchtune", _TT, "README.md",
                  f"section 'Optimization flags', column 'Peak Memory Active (GiB)', row '{row}'")


def _tt_recipe(config: str) -> Source:
    return Source(f"https://github.com/pytorch/torchtune/blob/{_TT}/recipes/configs/llama3_2/{config}.yaml",
                  "pytorch/torchtune", _TT, f"recipes/configs/llama3_2/{config}.yaml",
                  "the config, overridden as the README's table states (batch 2, sequence 4096, techniques in order)")


_TT_UNIT = ("torchtune/training/memory.py get_memory_stats at 1814feb1: active_bytes.all.peak / (1024**3), "
            "logged as peak_memory_active; the README heads the column 'GiB'")
_TT_SCOPE = ("training steps: the recipe logs get_memory_stats(reset_stats=True) every log_every_n_steps (1), "
             "so each logged peak covers the steps since the previous log, after model set-up")
_TT_FULL = {"method": "full", "optimizer": "adamw", "precision": "bf16", "seq_len": 4096, "micro_batch": 2,
            "grad_accumulation": 1, "grad_checkpointing": False, "activation_offload": False,
            "attention": "flash_attention_2", "packed": True, "cross_entropy": "standard", "parallel": "single",
            "gpus": 1, "offload": "none"}
_TT_TRUST = {
    "method": "stated: 'Baseline uses Recipe=full_finetune_single_device'",
    "precision": "stated: 'Precision=bf16'; torchtune's dtype bf16 keeps weights, gradients and AdamW state in bf16",
    "seq_len": "stated: 'Max sequence length=4096'; packed to exactly 4096 tokens per sample from '+ Packed Dataset' on",
    "micro_batch": "stated: 'Batch size=2'",
    "grad_accumulation": "stated in the README's reproduce command: gradient_accumulation_steps=1",
    "optimizer": "inferred: the table swaps in 8-bit AdamW only at its '+ 8-bit AdamW' row and the reproduce "
                 "command sets optimizer=torch.optim.AdamW (foreach on CUDA)",
    "grad_checkpointing": "inferred from the order: switched on at '+ Activation Checkpointing'",
    "activation_offload": "inferred from the order: switched on at '+ Activation Offloading'",
    "cross_entropy": "inferred from the order: CEWithChunkedOutputLoss arrives at '+ Chunked Cross Entropy'",
    "packed": "stated: '+ Packed Dataset' and every later row",
    "attention": "inferred: packed torchtune batches run flex attention with a document mask (no s x s matrix "
                 "kept), which the planner's FlashAttention 2 setting models",
    "parallel": "stated: a single-device recipe on one A100",
    "offload": "stated: nothing offloaded (single-device recipe without CPU offload)",
}
_TT_CARD = "the card is 'A100'; 80 GB inferred from the 60.0 GiB '+ Packed Dataset' figure"

_TT_LORA = {**_TT_FULL, "method": "lora", "lora_rank": 64, "lora_targets": ("q_proj", "v_proj", "o_proj",
            "gate_proj", "up_proj", "down_proj"), "lora_dropout": 0.0, "adapter_dtype": "bf16",
            "grad_checkpointing": True, "activation_offload": True, "cross_entropy": "chunked"}
_TT_LORA_TRUST = {**_TT_TRUST,
                  "lora_rank": "stated in 3B_lora_single_device.yaml: lora_rank: 64",
                  "lora_targets": "stated: lora_attn_modules ['q_proj', 'v_proj', 'output_proj'], "
                                  "apply_lora_to_mlp: True",
                  "lora_dropout": "stated: lora_dropout: 0.0",
                  "adapter_dtype": "stated: dtype: bf16 (the whole model, adapters included)",
                  "optimizer": "stated: 'LoRA and QLoRA ... do not use optimizer_in_bwd or AdamW8bit'; the "
                               "config's optimizer is torch.optim.AdamW",
                  "grad_checkpointing": "stated: LoRA rows keep the techniques above them except those two",
                  "activation_offload": "stated as above; the reproduce command sets enable_activation_offloading=True",
                  "cross_entropy": "stated as above; reproduce command: loss=CEWithChunkedOutputLoss"}

TORCHTUNE = (
    Row("tt-3b-full-baseline", "meta-llama/Llama-3.2-3B-Instruct", "llama-3.2-3b", "a100-80gb", 1,
        {**_TT_FULL, "packed": False, "attention": "sdpa"}, "active", "25.5", "GiB",
        _tt_source("Baseline"), _tt_recipe("3B_full_single_device"), _TT_SCOPE, _TT_UNIT,
        {**_TT_TRUST, "seq_len": "stated as a maximum only: unpacked Alpaca samples, each batch padded to its "
                                 "longest sample"},
        unknown=("seq_len: the unpacked batches' lengths depend on the data (max 4096, typically far shorter)",),
        notes=_TT_CARD),
    Row("tt-3b-full-packed", "meta-llama/Llama-3.2-3B-Instruct", "llama-3.2-3b", "a100-80gb", 1,
        _TT_FULL, "active", "60.0", "GiB", _tt_source("+ Packed Dataset"), _tt_recipe("3B_full_single_device"),
        _TT_SCOPE, _TT_UNIT, _TT_TRUST, extra={"torch_compile": False, "optimizer_in_backward": False},
        notes=_TT_CARD + "; torchtune's own Llama implementation, not transformers'"),
    Row("tt-3b-full-compile", "meta-llama/Llama-3.2-3B-Instruct", "llama-3.2-3b", "a100-80gb", 1,
        _TT_FULL, "active", "51.0", "GiB", _tt_source("+ Compile"), _tt_recipe("3B_full_single_device"),
        _TT_SCOPE, _TT_UNIT, _TT_TRUST, extra={"torch_compile": True}, notes=_TT_CARD),
    Row("tt-3b-full-ckpt", "meta-llama/Llama-3.2-3B-Instruct", "llama-3.2-3b", "a100-80gb", 1,
        {**_TT_FULL, "cross_entropy": "chunked", "grad_checkpointing": True}, "active", "24.9", "GiB",
        _tt_source("+ Activation Checkpointing"), _tt_recipe("3B_full_single_device"), _TT_SCOPE, _TT_UNIT,
        _TT_TRUST, extra={"torch_compile": True}, notes=_TT_CARD),
    Row("tt-3b-lora", "meta-llama/Llama-3.2-3B-Instruct", "llama-3.2-3b", "a100-80gb", 1,
        _TT_LORA, "active", "8.5", "GiB", _tt_source("LoRA"), _tt_recipe("3B_lora_single_device"),
        _TT_SCOPE, _TT_UNIT, _TT_LORA_TRUST, extra={"torch_compile": True}, notes=_TT_CARD),
    Row("tt-3b-qlora", "meta-llama/Llama-3.2-3B-Instruct", "llama-3.2-3b", "a100-80gb", 1,
        {**_TT_LORA, "method": "qlora", "quantize_lm_head": False, "double_quant": True}, "active", "4.6", "GiB",
        _tt_source("QLoRA"), _tt_recipe("3B_qlora_single_device"), _TT_SCOPE, _TT_UNIT,
        {**_TT_LORA_TRUST, "quantize_lm_head": "torchtune quantises only the LoRA-wrapped linears",
         "double_quant": "torchao's NF4 tensor, not bitsandbytes (its scaler layout differs)"},
        extra={"torch_compile": True, "nf4_library": "torchao (k_proj left in bf16: it has no adapter)"},
        notes=_TT_CARD),
)

# --- Answer.AI fsdp_qlora: benchmarks_03_2024.md (Llama-2 7B, Yi 34B, Llama-2 70B, Mistral 7B v0.2) --------
_FQ = "4cd69234f84de9f4f4933904b8824ab9f2c2a004"
_FQ_DOC = f"https://github.com/AnswerDotAI/fsdp_qlora/blob/{_FQ}/benchmarks_03_2024.md"
_FQ_RECIPE = Source(f"https://github.com/AnswerDotAI/fsdp_qlora/blob/{_FQ}/train.py", "AnswerDotAI/fsdp_qlora", _FQ,
                    "train.py", "the template command in benchmarks_03_2024.md 'Starting at 7B', with train.py's "
                                "defaults for the rest (fsdp_qlora signature)")


def _fq_source(where: str) -> Source:
    return Source(_FQ_DOC, "AnswerDotAI/fsdp_qlora", _FQ, "benchmarks_03_2024.md", where)


_FQ_UNIT = ("train.py at 4cd69234: max_memory_reserved(local_rank)/2**30 printed as 'GiB' (and "
            "max_memory_allocated likewise); the tables' column is 'Peak Memory (GiB)' and the text calls it "
            "'the reported peak reserved memory'")
_FQ_SCOPE = ("training steps: train.py calls reset_peak_memory_stats before the training loop and reads the peaks "
             "after the first epoch, on rank 0")
_FQ_LORA = {"method": "lora", "lora_rank": 64, "lora_targets": ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj",
            "down_proj"), "lora_dropout": 0.1, "adapter_dtype": "bf16", "optimizer": "adamw", "precision": "bf16",
            "seq_len": 2048, "micro_batch": 1, "grad_accumulation": 1, "grad_checkpointing": True,
            "activation_offload": False, "attention": "sdpa", "packed": False, "cross_entropy": "standard",
            "parallel": "fsdp", "gpus": 2, "offload": "none", "fsdp_version": 1}
_FQ_QLORA = {**_FQ_LORA, "method": "qlora", "quantize_lm_head": False, "double_quant": True}
_FQ_TRUST = {
    "method": "stated: --train_type qlora in the template; the LoRA tables say 'regular LoRA'",
    "seq_len": "stated: --context_length; --dataset dummy makes every sample one long output cut to the context "
               "length ('so we can control the context length')",
    "micro_batch": "stated: --batch_size (per GPU, train.py's help) in each table",
    "gpus": "stated: 'two 3090s' / 'dual 4090'; world_size -1 uses all GPUs",
    "grad_checkpointing": "stated: --use_gradient_checkpointing True --reentrant_checkpointing True",
    "offload": "stated: --use_cpu_offload False in the template, True where the table's 'CPU Offload' says so "
               "(FSDP CPUOffload(offload_params=True): parameters, gradients and the optimizer step on the CPU)",
    "lora_rank": "train.py default lora_rank: 64 (not overridden in the template)",
    "lora_targets": "train.py default lora_target_modules 'all' = k_proj, q_proj, v_proj, up_proj, down_proj, "
                    "gate_proj (no o_proj)",
    "lora_dropout": "train.py default lora_dropout: 0.1",
    "optimizer": "train.py default optimizer 'adamw' (torch.optim.AdamW)",
    "precision": "train.py default precision 'bf16': weights in bf16, FSDP MixedPrecision(bf16), no autocast",
    "adapter_dtype": "inferred: PEFT of early 2024 casts new adapters to the base weight's floating dtype "
                     "(peft v0.9.0 7e5335d093bef57ed332e6354282f84995700bb1 and v0.10.0 "
                     "8221246f2f48b665c853605e1d0ddaf1d0ce39c9, src/peft/tuners/lora/layer.py update_layer: "
                     "self.to(weight.device, dtype=weight.dtype)); the base is bf16, and the 4-bit weights are "
                     "stored with quant_storage=bf16",
    "grad_accumulation": "train.py default gradient_accumulation_steps: 1",
    "attention": "stated in train.py: attn_impl = \"sdpa\"",
    "packed": "every sample is exactly the context length: no padding, no packing needed",
    "cross_entropy": "the transformers model's own loss (labels passed to the model)",
    "parallel": "train.py default sharding_strategy 'full_shard' (FSDP1, flat parameters)",
    "fsdp_version": "stated in train.py: FullyShardedDataParallel(...) (FSDP1: flat parameters, use_orig_params "
                    "False, limit_all_gathers True, backward_prefetch BACKWARD_PRE by default)",
    "activation_offload": "train.py default use_activation_cpu_offload False",
    "quantize_lm_head": "stated in train.py: replace_linear(..., skip_modules=['lm_head'])",
    "double_quant": "inferred: bitsandbytes Linear4bit's default compress_statistics=True; train.py does not pass it",
    "load_cache": "stated in train.py: low_memory True by default (line 1011): rank 0 loads the model to the CPU "
                  "(lines 541-549; QLoRA: quantised on the GPU, then moved to the CPU, lines 618-628), "
                  "torch.cuda.empty_cache() after the load loop (line 634) but not after FSDP(..., "
                  "sync_module_states=True, device_id=...) (lines 717-738); reset_peak_memory_stats at line 809 "
                  "keeps what the wrap left reserved. The write-up quotes 3.72 GiB reserved after the wrap of the "
                  "7B QLoRA run ('see reserved_after_model_wrap')",
}
_FQ_NOTE = ("measured with FSDP1 (flat parameters, BACKWARD_PRE prefetch, limit_all_gathers), planned with "
            "fsdp_version=1. The runs were done in February-March 2024, before this commit of the write-up")


def _fq(id_, model, config, card, settings, measure, figure, where, *, extra=None, unknown=(), notes=""):
    return Row(id_, model, config, card, settings["gpus"], settings, measure, figure, "GiB" if figure else None,
               _fq_source(where), _FQ_RECIPE, _FQ_SCOPE, _FQ_UNIT, _FQ_TRUST, extra=extra or {},
               unknown=unknown, notes=_FQ_NOTE + (f"; {notes}" if notes else ""),
               load_cache="fsdp1_sync_module_states")


_L2 = "meta-llama/Llama-2-7b-hf"
FSDP_QLORA = (
    _fq("fq-7b-qlora-512", _L2, "llama-2-7b", "rtx-3090", {**_FQ_QLORA, "seq_len": 512}, "reserved", "4.98",
        "'Starting at 7B', first table, row QLoRA / 512"),
    _fq("fq-7b-qlora-2048", _L2, "llama-2-7b", "rtx-3090", _FQ_QLORA, "reserved", "5.21",
        "'Starting at 7B', first table, row QLoRA / 2048"),
    _fq("fq-7b-lora-512", _L2, "llama-2-7b", "rtx-3090", {**_FQ_LORA, "seq_len": 512}, "reserved", "10.24",
        "'Starting at 7B', second table, row LoRA / 512"),
    _fq("fq-7b-lora-512-alloc", _L2, "llama-2-7b", "rtx-3090", {**_FQ_LORA, "seq_len": 512}, "allocated", "8.28",
        "'Starting at 7B', the NB under the second table: 'the peak allocated memory is 8.28 GiB vs 9.16 GiB'"),
    _fq("fq-7b-lora-2048", _L2, "llama-2-7b", "rtx-3090", _FQ_LORA, "reserved", "10.22",
        "'Starting at 7B', second table, row LoRA / 2048"),
    _fq("fq-7b-lora-2048-alloc", _L2, "llama-2-7b", "rtx-3090", _FQ_LORA, "allocated", "9.16",
        "'Starting at 7B', the NB under the second table (2048 context)"),
    _fq("fq-7b-qlora-b4", _L2, "llama-2-7b", "rtx-3090", {**_FQ_QLORA, "micro_batch": 4}, "reserved", "11.22",
        "'Starting at 7B', third table, row QLoRA / 4"),
    _fq("fq-7b-qlora-b10", _L2, "llama-2-7b", "rtx-3090", {**_FQ_QLORA, "micro_batch": 10}, "reserved", "20.97",
        "'Starting at 7B', third table, row QLoRA / 10"),
    _fq("fq-7b-lora-b4", _L2, "llama-2-7b", "rtx-3090", {**_FQ_LORA, "micro_batch": 4}, "reserved", "16.14",
        "'Starting at 7B', third table, row LoRA / 4"),
    _fq("fq-7b-lora-b6", _L2, "llama-2-7b", "rtx-3090", {**_FQ_LORA, "micro_batch": 6}, "reserved", "21.35",
        "'Starting at 7B', third table, row LoRA / 6"),
    _fq("fq-7b-qlora-noshard-b8", _L2, "llama-2-7b", "rtx-3090", {**_FQ_QLORA, "micro_batch": 8}, "reserved", "20.94",
        "'Starting at 7B', fourth table, row QLoRA / DDP True / 8", extra={"fsdp_sharding": "NO_SHARD"},
        notes="--sharding_strategy ddp is FSDP's NO_SHARD (footnote: 'not DistributedDataParallel')"),
    _fq("fq-34b-qlora-b2", "01-ai/Yi-34B", "yi-34b", "rtx-3090", {**_FQ_QLORA, "micro_batch": 2}, "reserved", "23.05",
        "'What About CPU Offloading?', table, row QLoRA / False / 2"),
    _fq("fq-34b-qlora-offload-b4", "01-ai/Yi-34B", "yi-34b", "rtx-3090",
        {**_FQ_QLORA, "micro_batch": 4, "offload": "optimizer_and_params"}, "reserved", "22.98",
        "'What About CPU Offloading?', table, row QLoRA / True / 4"),
    _fq("fq-70b-qlora-offload-b2", "meta-llama/Llama-2-70b-hf", "llama-2-70b", "rtx-3090",
        {**_FQ_QLORA, "micro_batch": 2, "offload": "optimizer_and_params"}, "reserved", "14.92",
        "'Llama 70B' (dual 3090), table, row QLoRA / True / 2"),
    _fq("fq-7b-lora-offload-b10", _L2, "llama-2-7b", "rtx-4090",
        {**_FQ_LORA, "micro_batch": 10, "offload": "optimizer_and_params"}, "reserved", "22.69",
        "'Case Study: A Dual 4090', 'Llama-2 7B' table, row LoRA / True / False / 10",
        notes="the 4090 section runs 'a subset of the tests' of the 3090 template: settings inferred to match"),
    _fq("fq-7b-qlora-offload-b12", _L2, "llama-2-7b", "rtx-4090",
        {**_FQ_QLORA, "micro_batch": 12, "offload": "optimizer_and_params"}, "reserved", "22.38",
        "'Case Study: A Dual 4090', 'Llama-2 7B' table, row QLoRA / True / False / 12",
        notes="the 4090 section runs 'a subset of the tests' of the 3090 template: settings inferred to match"),
    _fq("fq-mistral-qlora-offload-24k", "Mistral 7B v0.2 Base", "mistral-7b-v0.2", "rtx-4090",
        {**_FQ_QLORA, "micro_batch": 1, "seq_len": 24576, "offload": "optimizer_and_params"}, "reserved", "22.54",
        "'Bonus: Mistral 7B', table, row QLoRA / True / 1 / 24,576",
        notes="the repository of the 'Mistral 7B v0.2 Base' weights is not named; the config is v0.2's"),
    _fq("fq-mistral-qlora-32k-oom", "Mistral 7B v0.2 Base", "mistral-7b-v0.2", "rtx-4090",
        {**_FQ_QLORA, "micro_batch": 1, "seq_len": 32768, "offload": "optimizer_and_params"}, "oom", None,
        "'Bonus: Mistral 7B': '24GB of memory per GPU isn't quite enough to finetune at the full context "
        "length even using QLoRA'",
        unknown=("which options were tried at 32K (CPU offload, batch) is not stated",)),
)

# --- LitGPT: config_hub/finetune/README.md (A10G, Alpaca2k, max_seq_length 512) --------------------------------
_LG = "00af8b0d9b43eaa3f8c812e3e8bd53ef38cbb49d"
_LG_UNIT = "no figure (OOM)"
_LG_SCOPE = ("the whole run: litgpt prints torch.cuda.max_memory_allocated() / 1e9 as 'Memory used: ... GB' after "
             "fit(), with loading, validation and sample generation inside; an OOM may happen in any of them")


def _lg_source(config: str, machine: str) -> Source:
    return Source(f"https://github.com/Lightning-AI/litgpt/blob/{_LG}/config_hub/finetune/README.md",
                  "Lightning-AI/litgpt", _LG, "config_hub/finetune/README.md",
                  f"table, row '{config}' / {machine} (Peak memory: OOM)")


def _lg_recipe(config: str) -> Source:
    return Source(f"https://github.com/Lightning-AI/litgpt/blob/{_LG}/config_hub/finetune/{config}",
                  "Lightning-AI/litgpt", _LG, f"config_hub/finetune/{config}",
                  "the YAML, with litgpt/finetune/full.py or lora.py at the same commit")


_LG_FULL = {"method": "full", "optimizer": "adamw", "precision": "bf16", "seq_len": 512, "micro_batch": 4,
            "grad_accumulation": 4, "grad_checkpointing": True, "activation_offload": False, "attention": "sdpa",
            "packed": False, "cross_entropy": "chunked", "parallel": "fsdp", "gpus": 4, "offload": "none",
            "fsdp_version": 1}
_LG_TRUST = {
    "method": "stated: finetune/full.yaml (litgpt finetune_full) or lora.yaml",
    "precision": "stated: precision: bf16-true (weights, gradients and AdamW state in bf16)",
    "optimizer": "stated: optimizer class_path: torch.optim.AdamW",
    "seq_len": "stated as a cap: max_seq_length: 512; batches are padded to their longest sample, and Alpaca2k "
               "reaches 512 with phi-2's tokenizer (tutorials/0_to_litgpt.md log: 'The longest sequence length in "
               "the train data is 512'); the OOM verdict hardly depends on it",
    "micro_batch": "stated: micro_batch_size in the YAML and the table",
    "grad_accumulation": "derived: litgpt/args.py gradient_accumulation_iters = (global_batch_size // devices) // "
                         "micro_batch_size; gradients accumulate under fabric.no_backward_sync",
    "grad_checkpointing": "stated in full.py/lora.py: FSDPStrategy(activation_checkpointing_policy={Block}) when "
                          "devices > 1; none on one device",
    "attention": "litgpt's CausalSelfAttention calls F.scaled_dot_product_attention (SDPA)",
    "cross_entropy": "stated: chunked_cross_entropy (chunks of 128; lora.py also runs the head in chunks, "
                     "lm_head_chunk_size=128)",
    "parallel": "stated: FSDPStrategy (full shard, FSDP1) when devices > 1",
    "fsdp_version": "stated: Lightning's FSDPStrategy wraps the model in FullyShardedDataParallel (FSDP1)",
    "gpus": "stated: the table's machine column (and devices: in the YAML where they agree)",
    "offload": "stated: FSDPStrategy(cpu_offload=False)",
    "packed": "no packing: padded batches",
    "activation_offload": "none in litgpt's finetune scripts",
}
_LG_LORA = {"method": "lora", "lora_rank": 16, "lora_targets": _ATTN_MLP + ("lm_head",), "lora_dropout": 0.1,
            "adapter_dtype": "bf16", "optimizer": "adamw", "precision": "bf16", "seq_len": 512, "micro_batch": 1,
            "grad_accumulation": 6, "grad_checkpointing": False, "activation_offload": False, "attention": "sdpa",
            "packed": False, "cross_entropy": "chunked", "parallel": "single", "gpus": 1, "offload": "none"}
_LG_LORA_TRUST = {**_LG_TRUST, "lora_rank": "stated: lora_r: 16",
                  "lora_targets": "stated: lora_query, lora_key, lora_value, lora_projection, lora_mlp, lora_head: "
                                  "true (litgpt's fused qkv maps to q/k/v)",
                  "lora_dropout": "stated: lora_dropout: 0.1",
                  "adapter_dtype": "bf16-true puts the adapters in bf16 too"}


_LG_UNTIED_NOTE = ("the model is LitGPT's, with lm_head separate from the embedding (the '-litgpt' config): one "
                   "more vocab x hidden matrix than the tied Hugging Face model")
# The table's machine column names the machine, not the devices the run used: every LoRA YAML listed on both
# 1xA10G and 4xA10G shows the same peak and the same runtime on both (config_hub/finetune/README.md at 00af8b0d,
# lines 12-13, 17-18, 33-34, 38-39, 54-55, 58-59, 63-64, 72-73: falcon-7b 24.84/24.94 min and 16.69/16.69 GB,
# gemma-2b 9.41/9.41 min and 12.62/12.62 GB, llama-2-7b 32.82/32.83 min and 19.77/19.77 GB, and so on), at
# 2.5-3 times the cost. Run over 4 devices with FSDP, each device would take a quarter of the samples and hold
# a quarter of the weights: neither the time nor the peak could stay the same. So the 4xA10G LoRA runs ran the
# YAML's devices: 1 (gemma-7b/lora.yaml line 15) on one GPU of a 4-GPU machine: no FSDP, no checkpointing.
_LG_ONE_OF_FOUR = ("inferred: one device. The YAML says devices: 1, and the table's 8 LoRA YAMLs listed on both "
                   "1xA10G and 4xA10G show the same peak memory and runtime on both (README.md lines 12-13, 17-18, "
                   "33-34, 38-39, 54-55, 58-59, 63-64, 72-73), so '4xA10G' is the machine, not the devices used")


def _lg(id_, model, config, card_gpus, settings, yaml, machine, trust, *, unknown=(), notes=""):
    return Row(id_, model, config, "a10g", card_gpus, settings, "oom", None, None, _lg_source(yaml, machine),
               _lg_recipe(yaml), _LG_SCOPE, _LG_UNIT, trust, unknown=unknown,
               notes="litgpt's own model code, not transformers'" + (f"; {notes}" if notes else ""))


LITGPT = (
    _lg("lg-llama2-7b-full-4xa10g-oom", _L2, "llama-2-7b", 4, _LG_FULL, "llama-2-7b/full.yaml", "4xA10G", _LG_TRUST),
    _lg("lg-llama3-8b-full-4xa10g-oom", "meta-llama/Meta-Llama-3-8B", "llama-3-8b", 4, _LG_FULL,
        "llama-3-8b/full.yaml", "4xA10G", _LG_TRUST),
    _lg("lg-gemma-7b-lora-1xa10g-oom", "google/gemma-7b", "gemma-7b-litgpt", 1, _LG_LORA, "gemma-7b/lora.yaml",
        "1xA10G", _LG_LORA_TRUST, notes=_LG_UNTIED_NOTE),
    _lg("lg-gemma-7b-lora-4xa10g-oom", "google/gemma-7b", "gemma-7b-litgpt", 1, _LG_LORA, "gemma-7b/lora.yaml",
        "4xA10G", {**_LG_LORA_TRUST, "gpus": _LG_ONE_OF_FOUR, "parallel": _LG_ONE_OF_FOUR,
                   "grad_checkpointing": _LG_ONE_OF_FOUR},
        notes=_LG_UNTIED_NOTE + "; the machine had 4 A10Gs, the run used one of them (see the trust note on gpus)"),
    _lg("lg-gemma2-9b-lora-1xa10g-oom", "google/gemma-2-9b", "gemma-2-9b-litgpt", 1, {**_LG_LORA, "attention": "eager"},
        "gemma2-9b/lora.yaml", "1xA10G",
        {**_LG_LORA_TRUST, "attention": "stated in litgpt/model.py: 'with softcapping we cannot use SDPA': the "
                                        "soft-capped scores are computed by hand (eager)"}, notes=_LG_UNTIED_NOTE),
    _lg("lg-llama31-8b-full-oom", "meta-llama/Meta-Llama-3.1-8B", "llama-3-8b", 1,
        {**_LG_FULL, "parallel": "single", "gpus": 1, "grad_accumulation": 16, "grad_checkpointing": False},
        "llama-3.1-8b/full.yaml", "1xA10G", _LG_TRUST,
        unknown=("gpus: the table says 1xA10G but llama-3.1-8b/full.yaml says devices: 4",),
        notes="Llama 3.1 8B has Llama 3 8B's shapes; 131072 positions instead of 8192 do not change the step"),
)

ROWS: tuple[Row, ...] = TORCHTUNE + FSDP_QLORA + LITGPT
