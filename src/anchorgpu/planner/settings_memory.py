"""What the training settings beyond method and precision do to the device's memory, in closed form.

Gradient accumulation, CPU offload, DeepSpeed ZeRO, paged optimizers, the fused or chunked
cross-entropy and the QLoRA storage details each change a few of the analytic estimate's terms;
``device_state`` works those out once, and ``analytic.estimate`` adds them to its phases.
Sources (read at these commits):

* DeepSpeed deepspeedai/DeepSpeed@edaa722 ``deepspeed/runtime/zero/config.py``: reduce_bucket_size and
  allgather_bucket_size 5e8 elements, stage3 prefetch_bucket_size 5e7, max_live_parameters 1e9,
  param_persistence_threshold 1e5, contiguous_gradients on, overlap_comm on only for stage 3;
  ``stage_1_and_2.py`` allocates a reduce bucket of reduce_bucket_size elements in the 16-bit dtype at
  each backward's start (two with overlap_comm), the gradient partition in 16 bits, and an fp32 copy of
  the partition for the step; ``stage3.py`` allocates its reduce bucket at start-up and the gradient
  partitions in the model dtype (``engine.get_data_types``: grad_accum_dtype defaults to it).
* Liger-Kernel linkedin/Liger-Kernel@ead96b6 ``src/liger_kernel/ops/fused_linear_cross_entropy.py``:
  chunk_size = next_power_of_2(ceil(BT / ceil(V / H))); grad_input [BT, H] (and, for a trainable head,
  grad_weight [V, H]) made in the forward and kept for the backward; one [chunk, V] logits block at a time.
* torchtune pytorch/torchtune@bd2a0fc ``torchtune/training/_activation_offloading.py``: OffloadActivations
  (use_streams, max_fwd_stash_size 5, min_offload_size 1024 bytes; the output head is not offloaded);
  ``torchtune/modules/loss/ce_chunked_output_loss.py``: 8 chunks, each ``logits.float()`` then cross-entropy.
* torch 2.13 ``torch/distributed/fsdp/_fully_shard/_fsdp_param.py``: without gradient sync FSDP2 keeps
  ``unsharded_accumulated_grad`` in the reduce dtype for every parameter.
* bitsandbytes bitsandbytes-foundation/bitsandbytes@95f9af3: NF4 codes 4 bits, absmax per block of 64
  (fp32, or uint8 with an fp32 second level per 256 with double quantisation); MatMul4Bit saves only the
  packed weight and dequantises the whole weight for the forward and again for the input's gradient
  (training batches are past the fused kernels' row limit since 0.50, before that always);
  ``optim/optimizer.py`` get_state_buffer pages only tensors of 1e5 elements or more.
* peft huggingface/peft@5d602fd ``src/peft/tuners/lora/layer.py``: nn.Dropout when lora_dropout > 0 (else
  nn.Identity) on each target's input; Embedding adapters take no dropout; ``src/peft/utils/other.py``
  prepare_model_for_kbit_training casts every fp16/bf16 parameter that is not Params4bit to fp32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .setup import TrainingSetup

REDUCE_BUCKET_ELEMENTS = 500_000_000  # DeepSpeed reduce_bucket_size default
PREFETCH_BUCKET_ELEMENTS = 50_000_000  # ZeRO-3 stage3_prefetch_bucket_size default
MAX_LIVE_PARAMETERS = 1_000_000_000  # ZeRO-3 stage3_max_live_parameters default
PERSISTENCE_THRESHOLD = 100_000  # ZeRO-3 keeps parameters smaller than this gathered
CE_CHUNKS = 8  # torchtune's CEWithChunkedOutputLoss num_output_chunks
IN_FLIGHT_LAYERS = 2  # activation offloading: the running layer and one being copied, on the device


def nf4_bytes_per_param(setup: TrainingSetup) -> float:
    """Bytes per 4-bit weight: codes plus absmax (double quantised, or fp32 per block of 64)."""
    if setup.double_quant:
        return 0.5 + 1 / 64 + 4 / (64 * 256)
    return 0.5 + 4 / 64


def fused_ce_chunk(tokens: int, hidden: int, vocab: int) -> int:
    """Rows of Liger's fused linear cross-entropy block: next power of 2 of ceil(BT / ceil(V / H))."""
    rows = math.ceil(tokens / math.ceil(vocab / hidden))
    return min(1 << (rows - 1).bit_length(), tokens)


@dataclass(frozen=True)
class DeviceState:
    """Model state on the device under the settings, and what the phases add for them (bytes per device)."""

    weights: float  # the parameters kept on the device (sharded or not)
    optimizer: float  # optimizer state on the device (0 when offloaded)
    optimizer_temp: float  # the step's temporaries on the device
    grads_end: float  # gradients at the backward's end and at the step
    master: float = 0.0  # ZeRO: the fp32 master partition (on the device unless offloaded)
    accumulated: float = 0.0  # gradients alive through the forward and backward of micro-batches 2..n
    accumulated_what: str = ""
    bucket: float = 0.0  # ZeRO: the reduce bucket
    bucket_always: bool = False  # ZeRO-3 allocates it at start-up, ZeRO-2 at each backward's start
    gathered: float = 0.0  # ZeRO-3: parameters gathered for the layers in flight and the persistent ones
    step_extra: float = 0.0  # ZeRO: the fp32 copy of the gradient partition the step makes
    paged: bool = False  # optimizer state in CUDA unified memory (bitsandbytes paged optimizers)


def device_state(setup: TrainingSetup, *, placed, trainable, weights: float, grads_all: float, optimizer: float,
                 optimizer_temp: float, compute: int, layer_params: float, reduced_grads: float) -> DeviceState:
    """``weights`` ... ``optimizer_temp``: the estimate's figures without these settings (FSDP already sharded);
    ``layer_params``: elements of one decoder layer; ``reduced_grads``: the trainable parameters' bytes in
    FSDP's reduce dtype (what no_sync accumulates unsharded)."""
    ga = setup.grad_accumulation > 1
    offload = setup.offload
    if setup.is_zero:
        return _zero(setup, placed, trainable, optimizer, optimizer_temp, compute, layer_params)
    accumulated, what = 0.0, ""
    if ga and setup.parallel == "fsdp":
        accumulated = reduced_grads
        what = "FSDP no_sync: unsharded gradients accumulated over the micro-batches"
    elif ga:
        accumulated, what = grads_all, "accumulated over the micro-batches"
    grads_end = grads_all
    if offload == "optimizer":  # optimizer state and its step on the CPU; parameters and gradients stay
        optimizer = optimizer_temp = 0.0
    elif offload == "optimizer_and_params":  # FSDP2 CPUOffloadPolicy: sharded params, grads, state on the CPU
        weights = optimizer = optimizer_temp = grads_end = 0.0
        if accumulated:
            what = "FSDP no_sync: unsharded gradients accumulated over the micro-batches (kept on the device)"
    return DeviceState(weights=weights, optimizer=optimizer, optimizer_temp=optimizer_temp, grads_end=grads_end,
                       accumulated=accumulated, accumulated_what=what, paged=setup.is_paged and optimizer > 0)


def _zero(setup, placed, trainable, optimizer, optimizer_temp, compute, layer_params) -> DeviceState:
    """DeepSpeed ZeRO-2/3 in its bf16 mode: the module in 16 bits, fp32 masters and state partitioned."""
    n, zero3 = setup.gpus, setup.parallel == "zero3"
    low = 4 if setup.precision == "fp32" else 2
    trainable_elements = sum(p.tensor.total for p in trainable)
    frozen = sum(p.tensor.total * p.stored for p in placed if not p.trainable)
    params = frozen + trainable_elements * low
    master = trainable_elements * 4 / n if setup.precision == "bf16_mixed" else 0.0
    # ``optimizer`` came in unsharded (stored dtype: fp32 masters under bf16_mixed): ZeRO partitions it.
    optimizer, optimizer_temp = optimizer / n, optimizer_temp / n
    partition = trainable_elements * low / n
    step_extra = trainable_elements * 4 / n if low != 4 else 0.0
    gathered = 0.0
    if zero3:
        persistent = sum(p.tensor.total for p in placed if p.tensor.numel < PERSISTENCE_THRESHOLD)
        in_flight = min(layer_params + min(layer_params, PREFETCH_BUCKET_ELEMENTS), MAX_LIVE_PARAMETERS)
        gathered = (persistent + in_flight) * low
        params = params / n
    if setup.offload in {"optimizer", "optimizer_and_params"}:  # ZeRO-Offload: masters, state, grads on the CPU
        master = optimizer = optimizer_temp = partition = step_extra = 0.0
    if setup.offload == "optimizer_and_params":  # ZeRO-3 offload_param: the partitions live on the CPU
        params = 0.0
    accumulated = partition if setup.grad_accumulation > 1 else 0.0
    return DeviceState(weights=params, optimizer=optimizer, optimizer_temp=optimizer_temp, grads_end=partition,
                       master=master, accumulated=accumulated,
                       accumulated_what="ZeRO: gradient partition, kept over the micro-batches",
                       bucket=REDUCE_BUCKET_ELEMENTS * low, bucket_always=zero3, gathered=gathered,
                       step_extra=step_extra, paged=setup.is_paged and optimizer > 0)


def settings_notes(setup: TrainingSetup, attention: str) -> list[str]:
    """Plain sentences on what the estimate assumes for each setting that differs from its default."""
    notes = []
    if setup.grad_accumulation > 1:
        notes.append(f"Gradient accumulation over {setup.grad_accumulation} micro-batches: from the second on, "
                     "every gradient is alive through the forward and the backward"
                     + ("; under FSDP the micro-batches run in no_sync (set_requires_gradient_sync(False), "
                        "accelerate's default), which keeps every layer's gradients unsharded, in the reduce dtype."
                        if setup.parallel == "fsdp" else "."))
    if attention == "eager" and setup.attention != "auto":
        notes.append("Eager attention: the attention matrix (scores and fp32 softmax) is stored for each layer, "
                     "and a [b,1,s,s] mask is built.")
    if attention in {"flash_attention_2", "flash_attention_3"}:
        notes.append("FlashAttention keeps q, k, v, the output and an fp32 log-sum-exp per head and token, "
                     "and needs no mask (sliding windows are done in the kernel).")
    if setup.packed:
        notes.append("Packed batches: no padding; "
                     + ("FlashAttention's variable-length kernel takes cu_seqlens, no mask."
                        if attention in {"flash_attention_2", "flash_attention_3"}
                        else "transformers builds a block-diagonal [b,1,s,s] mask for the packed sequences."))
    if setup.cross_entropy == "chunked":
        notes.append(f"Chunked cross-entropy (torchtune's CEWithChunkedOutputLoss, {CE_CHUNKS} chunks): the logits "
                     "are upcast to fp32 one chunk at a time; the fp32 log-probabilities of every chunk are still "
                     "kept for the backward.")
    if setup.cross_entropy == "fused_linear":
        notes.append("Liger's fused linear cross-entropy: the logits are never whole; blocks of "
                     "next_power_of_2(tokens / ceil(vocab / hidden)) rows are computed at a time, and the "
                     "gradient of the head's input (and of a trainable head's weight) is computed in the forward "
                     "and kept until the backward.")
    if setup.activation_offload:
        notes.append(f"Activation offloading (torchtune's OffloadActivations): saved tensors of 1 KiB or more go "
                     "to pinned host memory (up to 5 stay in the forward stash, the output head's are never "
                     f"offloaded); {IN_FLIGHT_LAYERS} layers' worth is assumed on the device in flight (the layer "
                     "whose backward runs and the one being brought back): an assumption, to be measured.")
    if setup.offload == "optimizer":
        notes.append("Optimizer offload: optimizer state (and under ZeRO the fp32 masters and the gradient "
                     "partition) are in host memory and the step runs on the CPU.")
    if setup.offload == "optimizer_and_params":
        notes.append("Parameter offload (FSDP2 CPUOffloadPolicy, ZeRO-3 offload_param): sharded parameters, "
                     "gradients and optimizer state are in host memory; only the layers being gathered are on "
                     "the device.")
    if setup.is_zero:
        notes.append(f"DeepSpeed {setup.parallel.upper()} (defaults of deepspeed/runtime/zero/config.py): the "
                     f"module in 16 bits, fp32 masters and optimizer state divided by {setup.gpus}, a reduce "
                     f"bucket of {REDUCE_BUCKET_ELEMENTS:.0e} elements"
                     + ("; parameters partitioned too, one layer and a prefetch of up to "
                        f"{PREFETCH_BUCKET_ELEMENTS:.0e} elements gathered, parameters under "
                        f"{PERSISTENCE_THRESHOLD:.0e} elements kept whole." if setup.parallel == "zero3" else "."))
    if setup.is_paged:
        notes.append("Paged optimizer (bitsandbytes): the state lives in CUDA unified memory outside PyTorch's "
                     "allocator: on the device unless evicted under pressure, so nvidia-smi shows it but "
                     "torch.cuda.max_memory_allocated does not.")
    if setup.is_lora and setup.lora_dropout > 0:
        notes.append("LoRA dropout (peft's nn.Dropout on each adapter's input): each target keeps a dropout mask "
                     "and the dropped copy of its input.")
    if setup.method == "qlora":
        notes.append("QLoRA (bitsandbytes): MatMul4Bit keeps only the packed weight for the backward and "
                     "dequantises the whole weight to bf16 for the forward and again for the input's gradient; "
                     + ("the lm_head in 4 bits too." if setup.quantize_lm_head else
                        "the lm_head is not quantised (transformers skips it: llm_int8_skip_modules).")
                     + (" Without double quantisation the absmax of each block of 64 is fp32."
                        if not setup.double_quant else ""))
        if setup.prepare_kbit_training:
            notes.append("peft's prepare_model_for_kbit_training casts every weight not in 4 bits (embeddings, "
                         "head, norms) to fp32: this note overrides the bf16 above. The residual stream and the "
                         "norms' outputs are then fp32, bitsandbytes' Linear4bit returns its input's dtype (so "
                         "the MLP's outputs are fp32), each adapter keeps an autocast bf16 copy of its input, and "
                         "autocast's bf16 copy of the fp32 head is kept for the head's backward.")
    return notes
