"""The analytic memory estimate: peak bytes per device of one training step, in closed form.

A step goes through a few moments where memory can peak; the estimate
computes the live bytes at each and reports the largest, broken down into
weights, gradients, optimizer state, activations, temporaries and the
framework's reserve:

* forward, at the loss: every layer's saved activations, the logits and
  their fp32 copy;
* backward, at the loss: the same, with the loss's gradients instead;
* backward, last layer: the head's gradients exist (what the head and the final
  norm kept is freed), one layer's backward runs (with checkpointing: after
  recomputing that layer); its attention's backward runs after the MLP's has
  freed what the MLP and the later norms kept;
* backward, end: all gradients, activations gone;
* optimizer step: all gradients, the optimizer state, the optimizer's
  temporaries (a foreach AdamW makes one full-size temporary; under ZeRO DeepSpeed's FusedAdam
  updates in place and makes none).

The steady state is meant (optimizer state exists; step 1 peaks lower), with
the gradients set to ``None`` after each step and no gradient accumulation.
Parameter counts are exact; bytes per parameter follow the dtypes; the
activation terms come from ``ACTIVATION_COEFFICIENTS`` (derived per operator, held to the
simulation by ``bench/planner_accuracy.py``); the
reserve is an allowance (``Reserve``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from . import device_memory, load_cache, other_peaks
from .activations import ACTIVATION_COEFFICIENTS, activation_dtypes, activation_profile
from .layer_spec import layer_tensors
from .model_spec import ModelSpec
from .params import ParamTensor, lora_tensors, model_tensors
from .settings_memory import (
    IN_FLIGHT_LAYERS,
    PERSISTENCE_THRESHOLD,
    device_state,
    fused_ce_chunk,
    nf4_bytes_per_param,
    settings_notes,
)
from .setup import TrainingSetup

MiB = 1024**2
GiB = 1024**3

# NF4 as QLoRA stores it: 4-bit codes, one 8-bit absmax per block of 64
# weights, one fp32 constant per 256 of those (double quantisation).
NF4_BYTES_PER_PARAM = 0.5 + 1 / 64 + 4 / (64 * 256)
# bitsandbytes 8-bit optimizers: two uint8 states with an fp32 absmax per
# block of 256; tensors under 4096 elements keep fp32 states.
ADAM8BIT_BLOCK = 256
ADAM8BIT_MIN_NUMEL = 4096
PAGED_MIN_NUMEL = 100_000  # bitsandbytes pages the state of tensors this large or larger

QUANT_STATE = "4-bit quantisation state (bitsandbytes; whole on every device)"
PREFETCHED = "FSDP: the next layer gathered (prefetched)"
OFFLOAD_COPY = "FSDP: the shard copied to the device for its all-gather (CPU offload)"
OFFLOAD_COPY_ROOT = "FSDP: the root's shard copied to the device for its all-gather (CPU offload)"
COMPONENTS = ("weights", "gradients", "optimizer", "activations", "temporaries", "reserve")


@dataclass(frozen=True)
class Reserve:
    """What the planner adds to the live tensors, from PyTorch's allocator up to what nvidia-smi shows.

    ``allocator``: model PyTorch's caching allocator (each request's rounding,
    segments, blocks cached between the moments of the step: see
    ``device_memory``); off, allocated and reserved equal the live bytes.
    ``workspaces``: the cuBLAS/hipBLAS(Lt) workspaces, allocated through that
    allocator, per card generation. ``cuda_context`` and ``nccl_buffers``:
    outside the allocator, allowances stated in ``device_memory``; None takes
    the card's allowance. ``load_cache``: what loading and wrapping the model
    left in the allocator's cache when the measurement starts
    (``load_cache.LOAD_PATHS``; "emptied", the default: nothing).
    DDP's gradient buckets are not part of the reserve:
    they are allocated tensors (a copy of the gradients, as
    ``gradient_as_bucket_view=False`` is DDP's default), counted with the gradients.
    """

    allocator: bool = True
    workspaces: bool = True
    cuda_context: int | None = None
    nccl_buffers: int | None = None
    load_cache: str = "emptied"


NO_RESERVE = Reserve(allocator=False, workspaces=False, cuda_context=0, nccl_buffers=0)


@dataclass(frozen=True)
class Breakdown:
    """Bytes per device at the peak; ``peak`` is their sum.

    ``peak`` is ``device_used_bytes`` on the most demanding of the shop's card
    generations: the live tensors (weights ... temporaries) plus ``reserve``,
    everything from the allocator's rounding to the CUDA context. The three
    named measures per card generation come from ``measures(card)``.
    """

    weights: int
    gradients: int
    optimizer: int
    activations: int
    temporaries: int
    reserve: int
    phase: str  # the moment of the step the peak falls on
    parts: tuple[tuple[str, str, int], ...] = ()  # (component, what, bytes) at that moment
    phases: tuple[tuple[str, int], ...] = ()  # live bytes (no reserve) at each moment considered
    notes: tuple[str, ...] = field(default=(), compare=False)
    step: device_memory.StepPeaks | None = field(default=None, compare=False)  # None: built by hand
    reserve_with: Reserve = field(default=Reserve(), compare=False)
    other_peaks: tuple = field(default=(), compare=False)  # other_peaks.OtherPeak: loading, saving, evaluation

    @property
    def peak(self) -> int:
        return sum(self.components().values())

    @property
    def live(self) -> int:
        return self.peak - self.reserve

    def components(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COMPONENTS}

    def measures(self, card: str | None = None) -> device_memory.DeviceMeasures:
        """allocated / reserved / device-used peaks on a card of generation ``card`` (None: the largest)."""
        if self.step is None:  # a breakdown given by hand: its reserve stands for everything above the live bytes
            return device_memory.DeviceMeasures("any card", self.live, self.live, self.peak,
                                                (("reserve", self.reserve),))
        r = self.reserve_with
        return device_memory.measures(self.step, card, context=r.cuda_context, nccl=r.nccl_buffers,
                                      workspaces=r.workspaces)

    @property
    def allocated_peak_bytes(self) -> int:
        return self.measures().allocated_peak_bytes

    @property
    def reserved_peak_bytes(self) -> int:
        return self.measures().reserved_peak_bytes

    @property
    def device_used_bytes(self) -> int:
        return self.measures().device_used_bytes


@dataclass(frozen=True)
class _Placed:
    tensor: ParamTensor
    stored: float  # bytes per element as kept on the device
    trainable: bool


def _placements(spec: ModelSpec, setup: TrainingSetup) -> list[_Placed]:
    placed = []
    for tensor in model_tensors(spec):
        if tensor.group == "vision":  # a multimodal model's vision tower: loaded, frozen, in the compute dtype
            placed.append(_Placed(tensor, 4 if setup.precision == "fp32" else 2, False))
        elif setup.method == "full":
            placed.append(_Placed(tensor, 2 if setup.precision == "bf16" else 4, True))
        elif setup.method == "qlora" and (tensor.is_linear_weight or (
                setup.quantize_lm_head and tensor.group == "lm_head")):
            placed.append(_Placed(tensor, nf4_bytes_per_param(setup), False))
        elif setup.method == "qlora" and setup.prepare_kbit_training:  # peft casts what is not 4-bit to fp32
            placed.append(_Placed(tensor, 4, False))
        else:
            placed.append(_Placed(tensor, 4 if setup.precision == "fp32" else 2, False))
    adapter = 4 if setup.adapter_dtype == "fp32" else 2
    placed += [_Placed(t, adapter, True) for t in lora_tensors(spec, setup)]
    return placed


def _codes_bytes(p: _Placed, setup: TrainingSetup) -> float:
    """Bytes per element of ``p`` in the parameter itself: a 4-bit weight's packed codes (half a byte), not its
    quantisation state; every other tensor as stored."""
    return 0.5 if _is_4bit(p, setup) else p.stored


def _is_4bit(p: _Placed, setup: TrainingSetup) -> bool:
    return setup.method == "qlora" and not p.trainable and p.stored < 1


def _quant_state_bytes(placed: list[_Placed], setup: TrainingSetup) -> float:
    """The 4-bit weights' quantisation state (absmax and its second level), bytes per device, all of it."""
    return sum(p.tensor.total * (p.stored - 0.5) for p in placed if _is_4bit(p, setup))


def _last_kind(spec: ModelSpec) -> int:
    """The index in ``spec.layer_kinds()`` of the last decoder layer's kind (the first whose backward runs)."""
    return [layer for layer, _count in spec.layer_kinds()].index(spec.layers[-1])


def _layer_share(p: _Placed, spec: ModelSpec) -> float:
    """Elements of ``p`` in one decoder layer: the last layer, where models mix layer kinds."""
    return p.tensor.numel if p.tensor.per_layer and p.tensor.kind == _last_kind(spec) else 0


@dataclass(frozen=True)
class _Merged:
    all: float  # every MoE layer's merged expert weights
    last: float  # the last layer's (what a checkpointed backward recomputes at a time)


def _merged_expert_weights(spec: ModelSpec, setup: TrainingSetup, compute: int) -> _Merged | None:
    """LoRA on transformers' fused expert weights goes through peft's ``ParamWrapper``: in each forward it
    parametrises the 3-D weight as base + B·A, so a merged copy of every adapted expert weight is built, and
    the experts' matmuls keep slices of it (views of the whole copy) for their backward (peft 0.21,
    tuners/lora/layer.py ``ParamWrapper._activate_lora``). Per MoE layer: its experts' weights once more, in the
    compute dtype."""
    if not setup.is_lora or "experts" not in setup.lora_targets:
        return None
    sizes = [(sum(t.numel for t in layer_tensors(layer, spec.hidden_size) if t.group == "experts"
                  and not t.name.endswith("_bias")) * compute, count) for layer, count in spec.layer_kinds()]
    last = sum(t.numel for t in layer_tensors(spec.layers[-1], spec.hidden_size)
               if t.group == "experts" and not t.name.endswith("_bias")) * compute
    return _Merged(all=sum(size * count for size, count in sizes), last=last)


def _optimizer_state(p: _Placed, optimizer: str) -> float:
    t, state = p.tensor, p.stored
    if optimizer == "adamw":
        return 2 * t.numel * state * t.copies
    if optimizer == "paged_adamw":  # bitsandbytes' 32-bit state: fp32 whatever the parameter's dtype
        return 2 * t.numel * 4 * t.copies
    if optimizer in {"adamw8bit", "paged_adamw8bit"}:
        if t.numel < ADAM8BIT_MIN_NUMEL:
            return 2 * t.numel * 4 * t.copies
        return (2 * t.numel + 2 * 4 * math.ceil(t.numel / ADAM8BIT_BLOCK)) * t.copies
    if optimizer == "sgd_momentum":
        return t.numel * state * t.copies
    if optimizer == "adafactor":  # factored second moment: one row and one column statistic per matrix
        return ((t.rows + t.cols) if t.is_matrix else t.numel) * state * t.copies
    return 0.0  # plain SGD keeps nothing


def _optimizer_temporary(p: _Placed, optimizer: str) -> float:
    # foreach AdamW (the default on a GPU) builds sqrt(exp_avg_sq) for every parameter at once;
    # Adafactor's update is assumed to need one full-size buffer as well (to be measured).
    if optimizer in {"adamw", "adafactor"}:
        return p.tensor.total * p.stored
    return 0.0


class _Phase:
    def __init__(self, name: str):
        self.name = name
        self.parts: list[tuple[str, str, float]] = []

    def add(self, component: str, what: str, amount: float) -> _Phase:
        if amount:
            self.parts.append((component, what, amount))
        return self

    @property
    def live(self) -> float:
        return sum(amount for _c, _w, amount in self.parts)


def trainable_parameters(spec: ModelSpec, setup: TrainingSetup) -> int:
    return sum(p.tensor.total for p in _placements(spec, setup) if p.trainable)


def estimate(spec: ModelSpec, setup: TrainingSetup, reserve: Reserve = Reserve(),
             coefficients=ACTIVATION_COEFFICIENTS) -> Breakdown:
    """Peak memory per device of one training step of ``spec`` under ``setup``."""
    setup.validate(spec)
    n, fsdp = setup.gpus, setup.parallel == "fsdp"
    dtypes = activation_dtypes(spec, setup)
    compute = dtypes.compute
    placed = _placements(spec, setup)
    trainable = [p for p in placed if p.trainable]
    shard = (lambda x: x / n) if fsdp else (lambda x: x)

    # bitsandbytes keeps each 4-bit weight's quantisation state (absmax, nested absmax, code) in a QuantState
    # object beside the parameter, not in it: FSDP flattens and shards (and offloads) only the packed codes, so
    # every device holds the whole state (fsdp_qlora train.py@4cd69234 load_and_quantize, lines 204-208:
    # "FSDP only syncs parameters and buffers, so the quant_state isn't copied"; bitsandbytes 0.43.0
    # nn/modules.py Params4bit._quantize stores quant_state on the parameter and its Linear4bit, and
    # Linear4bit.forward puts it back on the weight FSDP hands it).
    quant_state = _quant_state_bytes(placed, setup) if fsdp else 0.0
    weights = shard(sum(p.tensor.total * p.stored for p in placed) - quant_state)
    grads_all = shard(sum(p.tensor.total * p.stored for p in trainable))
    optimizer = shard(sum(_optimizer_state(p, setup.optimizer) for p in trainable))
    optimizer_temp = shard(sum(_optimizer_temporary(p, setup.optimizer) for p in trainable))
    grads_layer = sum(_layer_share(p, spec) * p.stored for p in trainable)
    head = [p for p in trainable if p.tensor.group == "lm_head" or (
        spec.tie_word_embeddings and p.tensor.group == "embedding") or p.tensor.name == "final_norm"]
    grads_head = sum(p.tensor.total * p.stored for p in head)

    # autocast keeps a bf16 copy of every fp32 trainable weight until that weight's backward.
    copies = [p for p in trainable if p.stored == 4] if dtypes.autocast else []
    copies_all = sum(p.tensor.total * 2 for p in copies)
    copies_backward = copies_all if not setup.grad_checkpointing else (
        sum(p.tensor.total * 2 for p in copies if p in head) + sum(_layer_share(p, spec) * 2 for p in copies))

    tokens = setup.tokens_per_step
    # Each kind of layer keeps its own activations; the ends (norm, head, loss) are the same in every profile,
    # and ``profile`` (the last layer's) is the one whose backward runs first.
    kinds = [(activation_profile(spec, setup, coefficients, layer), count) for layer, count in spec.layer_kinds()]
    profile = kinds[_last_kind(spec)][0]
    layers = tokens * sum(count * (p.checkpoint if setup.grad_checkpointing else p.layer) for p, count in kinds)
    model, loss = profile.model * tokens, profile.loss * tokens
    recomputed = profile.layer * tokens if setup.grad_checkpointing else 0.0
    merged = _merged_expert_weights(spec, setup, compute)
    if merged:  # peft's LoRA on fused experts: each layer's merged expert weights stay until its backward
        layers += merged.last if setup.grad_checkpointing else merged.all
        recomputed += merged.last if setup.grad_checkpointing else 0.0
    if setup.activation_offload:  # saved tensors go to host memory; a few layers' worth stays in flight
        layers *= min(IN_FLIGHT_LAYERS, spec.num_layers) / spec.num_layers
    dequant = 0.0
    if setup.method == "qlora":
        dequant = max(p.tensor.numel for p in placed if p.tensor.is_linear_weight) * compute

    gathered_root = gathered_layer = grads_head_full = grads_root_end = 0.0
    grads_layer_unsharded = reduce_layer = offload_copy_root = offload_copy_layer = 0.0
    fsdp1 = fsdp and setup.fsdp_version == 1
    if fsdp:
        # What FSDP2 (``fully_shard`` on each decoder layer, then the root) holds, as the simulation measures it.
        # bf16_mixed runs FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): trainable weights
        # are gathered (and their gradients produced) in bf16, then reduced in fp32; frozen weights are gathered
        # as stored. Other precisions gather and reduce in the stored dtype.
        def gathered(p: _Placed) -> float:  # a 4-bit weight is gathered as its codes (its state stays whole)
            return compute if p.trainable else _codes_bytes(p, setup)

        def reduced(p: _Placed) -> float:
            return 4 if setup.precision == "bf16_mixed" else p.stored
        root = [p for p in placed if p.tensor.group in {"embedding", "lm_head"} or p.tensor.name == "final_norm"]
        gathered_root = sum(p.tensor.total * gathered(p) for p in root)
        gathered_layer = sum(_layer_share(p, spec) * gathered(p) for p in placed)
        # The root group (embedding, head, final norm) reduce-scatters its grads only when the backward
        # ends: until then they stay unsharded in compute dtype, plus the copy in reduce dtype the reduction makes.
        grads_head_full = sum(p.tensor.total * compute for p in head)
        grads_root_end = sum(p.tensor.total * (compute + (reduced(p) if reduced(p) != compute else 0))
                             for p in root if p.trainable)
        grads_layer_unsharded = sum(_layer_share(p, spec) * gathered(p) for p in trainable)
        reduce_layer = sum(_layer_share(p, spec) * reduced(p) for p in trainable)
        if setup.offload == "optimizer_and_params":
            # Offloaded, each unit's shard is copied to the device for its all-gather and dropped after it: FSDP1
            # ``FlatParamHandle.pre_unshard`` (``flat_param_to(device)``), FSDP2 ``FSDPParam.all_gather_inputs``
            # (``sharded_param_data.to(device)``); see ``_fsdp_streams`` for where.
            offload_copy_root, offload_copy_layer = gathered_root / n, gathered_layer / n

    embedding_grad = 0.0
    if spec.tie_word_embeddings and setup.method == "full":  # the lookup's grad, before it joins the head's
        embedding_grad = spec.vocab_size * spec.hidden_size * (compute if fsdp else head[0].stored)

    # The settings beyond method and precision (settings_memory.py): accumulation, offload, ZeRO, paged state.
    state = device_state(
        setup, placed=placed, trainable=trainable, weights=weights, grads_all=grads_all, optimizer=optimizer,
        optimizer_temp=optimizer_temp, compute=compute, layer_params=sum(_layer_share(p, spec) for p in placed),
        reduced_grads=sum(p.tensor.total * (4 if setup.precision == "bf16_mixed" else p.stored) for p in trainable))
    weights, optimizer, optimizer_temp = state.weights, state.optimizer, state.optimizer_temp

    def weighed(name: str) -> _Phase:  # a moment of the step, with the parameters the device keeps
        return _Phase(name).add("weights", "parameters", weights).add("weights", QUANT_STATE, quant_state)
    if setup.is_zero and setup.optimizer == "adamw":
        # DeepSpeed builds the Adam/AdamW its config names itself (engine._configure_basic_optimizer; torch_adam
        # is off by default): FusedAdam (deepspeed/ops/adam/fused_adam.py), whose multi-tensor-apply kernel
        # updates the fp32 partition and both moments in place, chunk by chunk: none of the full-size
        # temporaries torch's foreach AdamW makes. Offloaded, DeepSpeedCPUAdam steps on the host.
        # (A torch AdamW handed in as the client optimizer would make them again: not the default, not figured.)
        optimizer_temp = 0.0
    # bitsandbytes pages the state of tensors of 1e5 elements or more (get_state_buffer); smaller ones, as most
    # LoRA adapters, get ordinary allocations.
    paged = 0.0
    if state.paged:  # the paged share of the state, however the state is sharded
        each = [(_optimizer_state(p, setup.optimizer), p.tensor.numel >= PAGED_MIN_NUMEL) for p in trainable]
        paged = optimizer * sum(b for b, big in each if big) / sum(b for b, _big in each)

    def add_optimizer(phase: _Phase) -> _Phase:
        return phase.add("optimizer", "state", optimizer - paged).add(
            "optimizer", "paged state (CUDA unified memory)", paged)
    zero = setup.is_zero
    # Liger's fused linear cross-entropy: one [chunk, vocab] block of logits at a time, and a trainable head's
    # gradient made in the forward. A 4-bit head (QLoRA) is dequantised whole for its forward and backward.
    ce_block = ce_head_grad = head_dequant = 0.0
    if setup.cross_entropy == "fused_linear":
        ce_block = fused_ce_chunk(tokens, spec.hidden_size, spec.vocab_size) * spec.vocab_size * compute
        ce_head_grad = grads_head_full if fsdp else sum(p.tensor.total * p.stored for p in head
                                                        if p.tensor.name != "final_norm")
    if setup.method == "qlora" and setup.quantize_lm_head and not spec.tie_word_embeddings:
        head_dequant = spec.vocab_size * spec.hidden_size * compute
    # After peft's k-bit preparation the head is a frozen fp32 weight: autocast casts it to bf16 for the matmul
    # and that copy is kept for the input's gradient (no cast cache for weights without grad).
    head_cast = 0.0
    if setup.method == "qlora" and setup.prepare_kbit_training and dtypes.autocast and not head_dequant:
        head_cast = spec.vocab_size * spec.hidden_size * 2

    def add_state(phase: _Phase, backward: bool) -> _Phase:
        phase.add("weights", "ZeRO: fp32 master partition", state.master)
        phase.add("weights", "ZeRO-3: gathered layers and persistent parameters", state.gathered)
        phase.add("gradients", state.accumulated_what, state.accumulated)
        if backward or state.bucket_always:
            phase.add("gradients", "ZeRO: reduce bucket", state.bucket)
        return phase

    stored_acts = (("activations", "stored per layer" + (" (checkpointed inputs)" if setup.grad_checkpointing
                                                          else "") + (" (in flight; the rest offloaded)"
                                                                      if setup.activation_offload else ""), layers),
                   ("activations", "final norm, RoPE tables, masks", model))
    phases = []
    for name, temporaries in (("forward, at the loss", ("logits and their fp32 copy", profile.loss_forward)),
                              ("backward, at the loss", ("gradients of the logits", profile.loss_backward))):
        phase = weighed(name).add("weights", "bf16 autocast copies", copies_all)
        phase.add("weights", "FSDP: gathered embedding and head", gathered_root)
        # FSDP2 frees a forward all-gather's flat buffer only at the next forward all-gather: the last layer's
        # stays until the next step. FSDP1 gathers into the flat parameter itself (no buffer) and frees a
        # layer's after its forward (``_post_forward_reshard``; the root's is kept for the backward).
        phase.add("weights", "FSDP: the last layer's all-gather buffer", 0 if fsdp1 else gathered_layer)
        add_optimizer(phase)
        for part in stored_acts:
            phase.add(*part)
        phase.add("activations", "log-probabilities kept by the loss", loss)
        phase.add("temporaries", temporaries[0], temporaries[1] * tokens)
        phase.add("gradients", "Liger: the head's gradient, made in the forward", ce_head_grad)
        phase.add("weights", "autocast's bf16 copy of the fp32 head, kept for its backward", head_cast)
        # ZeRO-3 gathers the head (a parameter far above the persistence threshold) for its forward and backward.
        phase.add("weights", "ZeRO-3: the gathered head", spec.vocab_size * spec.hidden_size * (
            4 if setup.precision == "fp32" else 2) if setup.parallel == "zero3" else 0)
        phase.add("temporaries", "Liger: one block of logits", ce_block)
        phases.append(add_state(phase, name.startswith("backward")))
    if head_dequant:  # the 4-bit head's matmuls, forward and backward: its weight dequantised whole
        for name, what in (("forward, the head's matmul", "logits as the head returns them"),
                           ("backward, the head's matmul", "gradient of the logits")):
            phase = weighed(name).add("weights", "bf16 autocast copies", copies_all)
            add_optimizer(phase)
            for part in stored_acts:
                phase.add(*part)
            phase.add("temporaries", what, spec.vocab_size * compute * tokens)
            phase.add("temporaries", "dequantised 4-bit head", head_dequant)
            phases.append(add_state(phase, name.startswith("backward")))

    if fsdp:
        # The first layer's forward: under FSDP2 the root's all-gather buffer is still held (freed after the next
        # copy-out) while the first layer is gathered into its buffer and copied out; few activations exist yet.
        # FSDP1 has no buffers: the root and the first layer are gathered into their flat parameters.
        first = weighed("forward, first layer")
        first.add("weights", "FSDP: gathered embedding and head", gathered_root)
        first.add("weights", "FSDP: the root's all-gather buffer", 0 if fsdp1 else gathered_root)
        first.add("weights", "FSDP: the first layer gathered", gathered_layer)
        first.add("weights", "FSDP: the first layer's all-gather buffer", 0 if fsdp1 else gathered_layer)
        first.add("weights", OFFLOAD_COPY_ROOT, offload_copy_root)
        first.add("weights", OFFLOAD_COPY, offload_copy_layer)
        add_optimizer(first)
        first.add("activations", "RoPE tables, masks", model - profile.head * tokens)
        phases.insert(0, add_state(first, False))

    # One layer's backward, the last one and (FSDP) the one before it, where the last layer's reduce-scatter
    # buffers and sharded grads exist but one layer less of activations.
    for name, behind in (("backward, last layer", 0), ("backward, next-to-last layer", 1)):
        if behind and not fsdp:
            continue
        phase = weighed(name)
        phase.add("weights", "bf16 autocast copies", copies_backward)
        phase.add("weights", "FSDP: gathered embedding and head", gathered_root)
        # The layer running and the one prefetched for the backward (FSDP2: its all-gather buffer until its
        # copy-out; FSDP1, BACKWARD_PRE: its flat parameter), with its shard on the device when offloaded.
        phase.add("weights", "FSDP: this layer gathered", gathered_layer)
        phase.add("weights", PREFETCHED, gathered_layer)
        phase.add("weights", OFFLOAD_COPY, offload_copy_layer)
        if fsdp:
            phase.add("gradients", "FSDP: unsharded head grads", grads_head_full)
            phase.add("gradients", "FSDP: this layer's unsharded grads", grads_layer_unsharded)
            phase.add("gradients", "FSDP: the later layer's reduce-scatter input", behind * reduce_layer)
            phase.add("gradients", "sharded grads of the later layer", behind * shard(grads_layer))
        elif not (state.accumulated and not zero):  # accumulating: these are part of the accumulated grads
            phase.add("gradients", "head and last layer", grads_head + grads_layer)
        add_optimizer(phase)
        # The head's and the final norm's backward have run: what they kept is freed.
        kept = layers - behind * layers / spec.num_layers
        phase.add(stored_acts[0][0], stored_acts[0][1], kept)
        phase.add("activations", "RoPE tables, masks", model - profile.head * tokens)
        phase.add("activations", "recomputed layer", recomputed)
        phase.add("temporaries", "one layer's backward", profile.layer_backward * tokens)
        phase.add("temporaries", "dequantised 4-bit weight", dequant)
        phases.append(add_state(phase, True))

    # At the end and at the step the accumulated gradients are the gradients ("all"), not on top of them.
    state = dataclasses.replace(state, accumulated=0.0)
    end = weighed("backward, end").add("gradients", "all", state.grads_end)
    end.add("gradients", "FSDP: unsharded embedding and head grads", grads_root_end)
    add_optimizer(end)
    end.add("temporaries", "embedding grad before it joins the head's", embedding_grad)
    phases.append(add_state(end, True))

    step = weighed("optimizer step").add("gradients", "all", state.grads_end)
    add_optimizer(step).add("temporaries", f"{setup.optimizer} foreach buffers", optimizer_temp)
    step.add("temporaries", "ZeRO: fp32 copy of the gradient partition", state.step_extra)
    phases.append(add_state(step, False))

    if setup.parallel == "ddp":
        # DDP's gradient buckets are allocated when DDP wraps the model and kept: a flat copy of the gradients
        # (gradient_as_bucket_view=False, DDP's default), live at every moment of the step.
        for phase in phases:
            phase.add("gradients", "DDP gradient buckets", grads_all)
    peak = max(phases, key=lambda p: p.live)
    sizes = _tensor_sizes(spec, setup, placed, n if fsdp else 1)
    sizes = _with_loss_tensors(sizes, profile, coefficients, tokens)
    sharded = fsdp or setup.parallel == "zero3"
    full_weights = sum(p.tensor.total * p.stored for p in placed)
    # a checkpoint holds 4-bit weights unquantised: the largest tensor in flight is at least in compute dtype
    largest_tensor = max(p.tensor.numel * max(p.stored, compute) for p in placed)
    resting = other_peaks.Resting(weights=weights + quant_state, optimizer=optimizer, full_weights=full_weights,
                                  largest_tensor=largest_tensor, gathered_layer=gathered_layer,
                                  gathered_root=gathered_root)
    if zero:
        resting = _zero_resting(spec, setup, placed, state, resting, compute)
    others = other_peaks.other_peaks(
        sharded=sharded, gpus=n, tokens_eval=setup.tokens_per_step, vocab=spec.vocab_size, hidden=spec.hidden_size,
        intermediate=spec.intermediate_size, compute=compute, resting=resting,
        deepspeed="zero3" if setup.parallel == "zero3" else "")
    notes = _notes(spec, setup, dtypes, reserve) + other_peaks.warnings(others, math.ceil(peak.live))
    moments = [p.parts for p in phases] if reserve.allocator else None
    before = _load_states(spec, setup, placed, sizes, reserve.load_cache) if moments is not None else []
    streams = _fsdp_streams(setup) if fsdp else {}
    step = None
    if moments is not None and setup.grad_accumulation > 1:
        # The first micro-batch of each step runs with no gradients yet and allocates them during its backward:
        # the allocator keeps the segments it took then, so the accumulated step reserves at least what a step
        # without accumulation does.
        first = estimate(spec, setup.replace(grad_accumulation=1), reserve, coefficients).step
        live = sum(math.ceil(b) for _c, _w, b in peak.parts if b)
        step = device_memory.step_peaks(moments, sizes, n, live=live, before=before, streams=streams)
        if first is not None and first.modelled:
            step = dataclasses.replace(step, allocated=max(step.allocated, first.allocated),
                                       reserved=max(step.reserved, first.reserved))
    return with_reserve(peak.parts, peak.name, tuple((p.name, math.ceil(p.live)) for p in phases),
                        moments, sizes, n, reserve, notes, step=step, other=others, before=before,
                        streams=streams)


def _zero_resting(spec: ModelSpec, setup: TrainingSetup, placed: list[_Placed], state, resting, compute: int):
    """What ZeRO adds to the resting state and the moments outside the step (``other_peaks``).

    Both stages: the fp32 master partition lives on the card with the optimizer state (0 when offloaded), and a
    16-bit save (``save_16bit_model``; under ZeRO-3 ``stage3_gather_16bit_weights_on_model_save``) writes the
    module's own weights: trainable ones in the compute dtype, not the fp32 master width. ZeRO-3 keeps its
    reduce bucket (allocated at start-up) and the persistent parameters (under the persistence threshold, kept
    gathered) at every moment, and a forward outside the step (evaluation) gathers the layers in flight with
    the prefetch bucket and the head, as the step's forward does.
    """
    low = 4 if setup.precision == "fp32" else 2  # the module's width under ZeRO: the compute dtype
    frozen = sum(p.tensor.total * p.stored for p in placed if not p.trainable)
    module = frozen + sum(p.tensor.total * low for p in placed if p.trainable)
    largest = max(p.tensor.numel * (low if p.trainable else max(p.stored, compute)) for p in placed)
    resident = evaluation = 0.0
    if setup.parallel == "zero3":
        persistent = sum(p.tensor.total for p in placed if p.tensor.numel < PERSISTENCE_THRESHOLD) * low
        resident = persistent + state.bucket
        head = spec.vocab_size * spec.hidden_size * low
        evaluation = state.gathered - persistent + head  # the layers in flight, the prefetch, the head
    return dataclasses.replace(resting, master=state.master, resident=resident, gathered_eval=evaluation,
                               saved_full=module, saved_largest=largest)


def with_reserve(parts, phase: str, phases: tuple[tuple[str, int], ...], moments, sizes, gpus: int,
                 reserve: Reserve, notes: tuple[str, ...],
                 step: device_memory.StepPeaks | None = None, other: tuple = (), before=(), streams=None
                 ) -> Breakdown:
    """The ``Breakdown`` of live ``parts`` (at the peak ``phase``) with the reserve up to ``device_used_bytes``.

    ``moments``: the parts alive at each moment of the step, in order, replayed through the allocator model
    with ``sizes`` (``device_memory.TensorSizes``); None: no allocator model (allocated = reserved = live),
    unless ``step`` gives the allocator's peaks already. ``streams``: (component, what) -> the CUDA stream
    that part is allocated on (``_fsdp_streams``); None: every part on the compute stream.
    """
    live_parts = tuple((c, w, math.ceil(b)) for c, w, b in parts if b)
    live = sum(b for _c, _w, b in live_parts)
    if step is not None:
        pass
    elif moments is not None and sizes is not None:
        step = device_memory.step_peaks(moments, sizes, gpus, live=live, before=before, streams=streams)
    else:
        step = device_memory.StepPeaks(live=live, allocated=live, reserved=live, gpus=gpus, modelled=False)
    measured = device_memory.measures(step, None, context=reserve.cuda_context, nccl=reserve.nccl_buffers,
                                      workspaces=reserve.workspaces)
    all_parts = live_parts + tuple(("reserve", what, b) for what, b in measured.parts)
    totals = {name: sum(b for c, _w, b in all_parts if c == name) for name in COMPONENTS}
    return Breakdown(**totals, phase=phase, parts=all_parts, phases=phases, notes=notes, step=step,
                     reserve_with=reserve, other_peaks=other)


def _fsdp_streams(setup: TrainingSetup) -> dict[tuple[str, str], str]:
    """The CUDA stream each of FSDP's parts is allocated on, as PyTorch does it; every other part is on the
    compute (current) stream. PyTorch's caching allocator never hands a block freed on one stream to a
    request on another (``device_memory.AllocatorModel``), so these parts keep segments of their own.

    FSDP2 (``fully_shard``; pytorch/pytorch ``torch/distributed/fsdp/_fully_shard/``, read at
    ``_fsdp_collectives.py`` and ``_fsdp_param.py`` 010ae4a8, ``_fsdp_param_group.py`` 002a76fb):

    * ``FSDPCommContext.get_all_gather_streams``: in the forward and pre-backward (implicit prefetching, the
      default ``unshard_async_op=False``) the all-gather runs on ``all_gather_copy_in_stream`` and
      ``all_gather_stream``; ``foreach_all_gather`` allocates the all-gather output (and the inputs copied into
      it, with CPU offload the shard's ``.to(device)`` from ``FSDPParam.all_gather_inputs``) under the copy-in
      stream: the all-gather buffers, the prefetched layer (a buffer until its copy-out) and the offloaded
      shard's copy are on ``"fsdp2 all-gather copy-in"``.
    * ``FSDPParamGroup.wait_for_unshard`` runs ``foreach_all_gather_copy_out`` on the current stream:
      ``FSDPParam.alloc_all_gather_outputs`` makes the unsharded parameters on the compute stream.
    * ``foreach_reduce`` allocates the reduce-scatter input on the current stream (before it enters the
      reduce-scatter stream) and the reduce-scatter output under ``reduce_scatter_stream``; the sharded
      gradient is a view of that output (or of its cast, on the same stream) and stays the parameter's
      ``.grad`` until the optimizer step: the sharded gradients are on ``"fsdp2 reduce-scatter"``.

    FSDP1 (``FullyShardedDataParallel``; ``torch/distributed/fsdp/_runtime_utils.py`` at 00ae0bc9,
    ``_flat_param.py`` at 01caf79e):

    * ``_init_streams``: "Stream for unshard logic, including allocating the all-gather destination tensors
      and the all-gathers themselves"; ``_unshard`` calls ``handle.unshard()`` under
      ``torch.cuda.stream(unshard_stream)``, and ``FlatParamHandle.unshard`` allocates the padded unsharded
      flat parameter (``_alloc_padded_unsharded_flat_param``) and all-gathers into it: the gathered root and
      layers are on ``"fsdp1 unshard"``. ``_free_unsharded_flat_param`` records the current stream on it and
      frees it: it goes back to the unshard stream's pool.
    * ``_unshard`` runs ``handle.pre_unshard()`` under ``pre_unshard_stream`` ("allocations and writes for
      CPU offloading (H2D copy) and mixed precision (low precision cast)"): the offloaded shard's copy
      (``flat_param_to(device)``) is on ``"fsdp1 pre-unshard"``; ``_all_gather_flat_param`` records the
      unshard stream on it. (The low-precision shard ``_mp_shard`` exists only when the parameter dtype
      differs from the stored one, which the planner's precisions do not make for FSDP1's flat parameters.)
    * ``_post_backward_hook`` reduce-scatters under ``torch.cuda.stream(post_backward)``, where
      ``new_sharded_grad = torch.empty_like(chunks[0])`` is the sharded gradient kept in
      ``_saved_grad_shard`` until the optimizer: on ``"fsdp1 post-backward"``. The unsharded gradient is
      autograd's, on the compute stream (recorded on the post-backward stream, so freed after the
      reduce-scatter).
    """
    if setup.fsdp_version == 1:
        gathered, copy, grads = "fsdp1 unshard", "fsdp1 pre-unshard", "fsdp1 post-backward"
        unsharded = gathered
    else:
        gathered, copy, grads = "fsdp2 all-gather copy-in", "fsdp2 all-gather copy-in", "fsdp2 reduce-scatter"
        unsharded = device_memory.COMPUTE
    streams = {
        ("weights", "FSDP: gathered embedding and head"): unsharded,
        ("weights", "FSDP: the first layer gathered"): unsharded,
        ("weights", "FSDP: this layer gathered"): unsharded,
        ("weights", "FSDP: the root's all-gather buffer"): gathered,
        ("weights", "FSDP: the first layer's all-gather buffer"): gathered,
        ("weights", "FSDP: the last layer's all-gather buffer"): gathered,
        ("weights", PREFETCHED): gathered,
        ("weights", OFFLOAD_COPY): copy,
        ("weights", OFFLOAD_COPY_ROOT): copy,
        ("gradients", "sharded grads of the later layer"): grads,
        ("gradients", "all"): grads,
    }
    return {key: stream for key, stream in streams.items() if stream != device_memory.COMPUTE}


def _tensor_sizes(spec: ModelSpec, setup: TrainingSetup, placed: list[_Placed], shards: int
                  ) -> device_memory.TensorSizes:
    """The parameter-shaped parts tensor by tensor (for the rounding) and layer by layer (for the replay)."""
    trainable = [p for p in placed if p.trainable]
    tensors: dict[tuple[str, str], tuple[int, ...]] = {}
    blocks: dict[tuple[str, str], tuple[int, ...]] = {}

    def add(key: tuple[str, str], items, per_tensor, states: int = 1, divide: int = shards) -> None:
        each: list[int] = []
        layered: dict[tuple, int] = {}  # (layer kind, copies) -> bytes of one copy of each tensor of that kind
        single: list[int] = []
        for p in items:
            size = math.ceil(per_tensor(p) / divide)
            if not size:
                continue
            each += [size] * (p.tensor.copies * states)
            if p.tensor.per_layer:
                group = (getattr(p.tensor, "kind", None), p.tensor.copies)
                layered[group] = layered.get(group, 0) + size * states
            else:
                single += [size] * (p.tensor.copies * states)
        tensors[key] = tuple(each)
        blocks[key] = tuple(single) + tuple(b for (_k, copies), b in layered.items() for _ in range(copies))

    stored = lambda p: p.tensor.numel * p.stored  # noqa: E731
    if shards > 1 and setup.method == "qlora":  # FSDP shards the 4-bit codes; the quantisation state stays whole
        add(("weights", "parameters"), placed, lambda p: p.tensor.numel * _codes_bytes(p, setup))
        add(("weights", QUANT_STATE), [p for p in placed if _is_4bit(p, setup)],
            lambda p: p.tensor.numel * (p.stored - 0.5), divide=1)
    else:
        add(("weights", "parameters"), placed, stored)
    add(("gradients", "all"), trainable, stored)
    add(("weights", "bf16 autocast copies"), [p for p in trainable if p.stored == 4], lambda p: p.tensor.numel * 2)
    add(("temporaries", f"{setup.optimizer} foreach buffers"), trainable, stored)
    states = {"adamw": 2, "sgd_momentum": 1}.get(setup.optimizer, 0)
    if states:
        add(("optimizer", "state"), trainable, stored, states)
    # DDP's buckets: bucket_cap_mb defaults to 25 (MiB), the first bucket to 1 MiB
    # (torch.nn.parallel.DistributedDataParallel; torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES).
    grads = sum(tensors[("gradients", "all")])
    first = min(grads, MiB)
    buckets = tuple(b for b in ((first,) + tuple(device_memory._chunks(grads - first, 25 * MiB))) if b)
    tensors[("gradients", "DDP gradient buckets")] = blocks[("gradients", "DDP gradient buckets")] = buckets
    return device_memory.TensorSizes(tensors=tensors, blocks=blocks, layers=spec.num_layers)


def _with_loss_tensors(sizes: device_memory.TensorSizes, profile, coefficients, tokens: int
                       ) -> device_memory.TensorSizes:
    """The loss's transients as the separate tensors they are (the logits and their fp32 copy; the gradients of
    the log-probabilities and of the logits), one allocator request each, instead of one block per part: each
    term of ``coefficients`` with a whole count is that many tensors of equal size; a fractional one (a chunk)
    stays one block."""
    extra = {}
    for scope, what in (("loss_forward", "logits and their fp32 copy"), ("loss_backward", "gradients of the logits")):
        each: list[int] = []
        for name, per_token in profile.terms.items():
            term = coefficients[name]
            if term.scope != scope or not per_token:
                continue
            count = int(term.count) if term.count >= 1 and term.count == int(term.count) else 1
            each += [math.ceil(per_token * tokens / count)] * count
        if each:
            extra[("temporaries", what)] = tuple(each)
    return dataclasses.replace(sizes, tensors={**sizes.tensors, **extra}, blocks={**sizes.blocks, **extra})


def _load_states(spec: ModelSpec, setup: TrainingSetup, placed: list[_Placed], sizes: device_memory.TensorSizes,
                 path: str) -> list[dict[str, list[int]]]:
    """The allocator states loading and wrapping the model go through before the measured step (``load_cache``).

    Only FSDP's wrap is modelled: each decoder layer is a unit, in order, then the root (embedding, final norm,
    head and whatever is not in a decoder layer). A unit's tensors are taken as the device holds them before
    sharding (4-bit weights as their packed codes); its shard is the step's block for that layer (the root's:
    the step's blocks of those tensors). What the load keeps through the wrap is the 4-bit quantisation state,
    made on the device as each weight is quantised."""
    if path not in load_cache.LOAD_PATHS:
        return load_cache.wrap_states(path, (), {}, False)  # raises: an unknown path
    if path == "emptied" or setup.parallel != "fsdp":
        return []
    kinds = [layer for layer, _count in spec.layer_kinds()]
    per_kind: dict[int, list[int]] = {}
    layer_shard: dict[int, int] = {}  # kind -> the step's block for one layer of that kind
    root: list[int] = []
    for p in placed:
        nbytes = p.tensor.numel * _codes_bytes(p, setup)
        if p.tensor.per_layer:
            per_kind.setdefault(p.tensor.kind, []).append(math.ceil(nbytes))
            layer_shard[p.tensor.kind] = layer_shard.get(p.tensor.kind, 0) + math.ceil(nbytes / setup.gpus)
        else:
            root += [math.ceil(nbytes)] * p.tensor.copies
    shards = sizes.blocks.get(("weights", "parameters"), ())
    units = [load_cache.Unit(tuple(per_kind[k]), (layer_shard[k],))
             for k in (kinds.index(layer) for layer in spec.layers)]
    units.append(load_cache.Unit(tuple(root), tuple(shards[:len(root)])))
    kept = {f"weights: {QUANT_STATE}": list(sizes.blocks.get(("weights", QUANT_STATE), ()))}
    return load_cache.wrap_states(path, units, {k: v for k, v in kept.items() if v},
                                  offload_params=setup.offload == "optimizer_and_params")


def _reserve_note(setup: TrainingSetup, reserve: Reserve) -> str:
    context = "the card's allowance" if reserve.cuda_context is None else f"{reserve.cuda_context / MiB:.0f} MiB"
    nccl = "the card's allowance" if reserve.nccl_buffers is None else f"{reserve.nccl_buffers / MiB:.0f} MiB"
    return ("Measures: allocated_peak_bytes is what torch.cuda.max_memory_allocated reports (live tensors, each "
            "request rounded as PyTorch's caching allocator rounds it"
            + (", DDP's gradient buckets included" if setup.parallel == "ddp" else "")
            + "); reserved_peak_bytes what torch.cuda.max_memory_reserved reports (the allocator's segments, "
            "modelled by replaying the moments of the step"
            + ("" if reserve.allocator else ": switched off here, taken as the live bytes")
            + ("" if reserve.load_cache == "emptied" or not reserve.allocator else
               f", after what loading and wrapping the model left cached ({reserve.load_cache}: no empty_cache "
               "before the peak statistics were reset)")
            + "); device_used_bytes what nvidia-smi or amd-smi shows (reserved, plus the CUDA/ROCm context: "
            f"{context}, an allowance"
            + (f", and NCCL/RCCL buffers: {nccl}, an allowance" if setup.gpus > 1 else "")
            + "). The cuBLAS/hipBLAS workspaces are allocated through PyTorch's allocator, per card generation"
            + ("" if reserve.workspaces else " (left out here)") + ". Fits is decided on device_used_bytes.")


def _notes(spec: ModelSpec, setup: TrainingSetup, dtypes, reserve: Reserve) -> tuple[str, ...]:
    weights = {"fp32": "fp32 weights", "bf16": "bf16 weights",
               "bf16_mixed": "fp32 weights (the master copy), computed on in bf16"}[setup.precision]
    if setup.method == "lora":
        weights = f"frozen {'fp32' if setup.precision == 'fp32' else 'bf16'} base weights, " \
                  f"{setup.adapter_dtype} adapters"
    elif setup.method == "qlora":
        weights = (
            f"frozen NF4 base weights ({nf4_bytes_per_param(setup) * 8:.3f} bits each"
            f"{' with double quantisation' if setup.double_quant else ''}), "
            f"bf16 embeddings, head and norms, {setup.adapter_dtype} adapters"
        )
    notes = [
        f"Weights: {weights}" + ("; autocast keeps a bf16 copy of each trainable fp32 weight from the forward "
                                  "to that weight's backward." if dtypes.autocast else "."),
        "Gradients: one per trainable parameter, in its dtype, set to None after each step "
        "(no gradient accumulation).",
        f"Optimizer: {setup.optimizer} state for the trainable parameters; "
        + ("DeepSpeed's FusedAdam (DeepSpeed's default for Adam and AdamW), which updates in place."
           if setup.is_zero and setup.optimizer == "adamw" else
           "foreach implementations, as a GPU uses by default."),
        "Activations: tensors autograd keeps for the backward, per token from ACTIVATION_COEFFICIENTS, "
        f"× micro-batch {setup.micro_batch} × sequence {setup.seq_len}"
        + ("; with checkpointing only each layer's input, and one layer recomputed at a time."
           if setup.grad_checkpointing else "."),
        "Activation coefficients are derived per operator and held to the simulation by "
        "bench/planner_accuracy.py (median error 0.13 % single-device).",
        "Temporaries: short-lived buffers at the moment of the peak (logits in fp32 for the loss, the "
        "optimizer's foreach buffers, one layer's backward).",
        _reserve_note(setup, reserve),
    ]
    if setup.parallel == "fsdp":
        api = "FSDP1 (FullyShardedDataParallel" if setup.fsdp_version == 1 else "FSDP2 (fully_shard"
        notes.append(f"{api}, full shard, each decoder layer then the root) over {setup.gpus}: weights, gradients "
                     f"and optimizer state divided by {setup.gpus}, plus the gathered root (embedding and head) "
                     "and up to two decoder layers gathered at a time (the one running and the one prefetched), "
                     "gathered and reduced on FSDP's own CUDA streams, whose cached blocks the computation cannot "
                     "reuse"
                     + ("; bf16 mixed runs as FSDP's mixed-precision policy (bf16 parameters gathered, fp32 "
                        "gradient reduction) rather than autocast." if setup.precision == "bf16_mixed" else "."))
    if spec.attention == "eager":
        notes.append(f"{spec.label} runs eager attention (soft-capping): its attention matrix is stored, so "
                     "activations grow with the square of the sequence length.")
    notes += settings_notes(setup, setup.attention_for(spec))
    notes.append("Assumes sequences without padding masks (packed or of equal length) and the steady state "
                 "(optimizer state already created).")
    return tuple(notes)
