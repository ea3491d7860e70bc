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
  temporaries (a foreach AdamW makes one full-size temporary).

The steady state is meant (optimizer state exists; step 1 peaks lower), with
the gradients set to ``None`` after each step and no gradient accumulation.
Parameter counts are exact; bytes per parameter follow the dtypes; the
activation terms come from ``ACTIVATION_COEFFICIENTS`` (derived per operator, held to the
simulation by ``bench/planner_accuracy.py``); the
reserve is an allowance (``Reserve``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .activations import ACTIVATION_COEFFICIENTS, activation_dtypes, activation_profile
from .model_spec import ModelSpec
from .params import ParamTensor, lora_tensors, model_tensors
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

COMPONENTS = ("weights", "gradients", "optimizer", "activations", "temporaries", "reserve")


@dataclass(frozen=True)
class Reserve:
    """Memory the framework takes beyond live tensors: an explicit allowance, to be checked on a GPU.

    ``cuda_context``: the CUDA (or ROCm) context and loaded kernels, outside
    PyTorch's allocator. ``library_workspaces``: cuBLAS/cuDNN and attention
    workspaces. ``nccl_buffers``: NCCL's own buffers, with two devices or more.
    ``fragmentation``: the caching allocator's rounding and fragmentation, as
    a fraction of the live peak (reserved minus allocated at the peak).
    DDP's gradient buckets are not an allowance: they are computed (a copy of
    the gradients, as ``gradient_as_bucket_view=False`` is DDP's default).
    """

    cuda_context: int = 512 * MiB
    library_workspaces: int = 256 * MiB
    nccl_buffers: int = 512 * MiB
    fragmentation: float = 0.08


@dataclass(frozen=True)
class Breakdown:
    """Bytes per device at the peak; ``peak`` is their sum."""

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

    @property
    def peak(self) -> int:
        return sum(self.components().values())

    @property
    def live(self) -> int:
        return self.peak - self.reserve

    def components(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COMPONENTS}


@dataclass(frozen=True)
class _Placed:
    tensor: ParamTensor
    stored: float  # bytes per element as kept on the device
    trainable: bool


def _placements(spec: ModelSpec, setup: TrainingSetup) -> list[_Placed]:
    placed = []
    for tensor in model_tensors(spec):
        if setup.method == "full":
            placed.append(_Placed(tensor, 2 if setup.precision == "bf16" else 4, True))
        elif setup.method == "qlora" and tensor.is_linear_weight:
            placed.append(_Placed(tensor, NF4_BYTES_PER_PARAM, False))
        else:
            placed.append(_Placed(tensor, 4 if setup.precision == "fp32" else 2, False))
    adapter = 4 if setup.adapter_dtype == "fp32" else 2
    placed += [_Placed(t, adapter, True) for t in lora_tensors(spec, setup)]
    return placed


def _layer_share(p: _Placed, spec: ModelSpec) -> float:
    """Elements of ``p`` in one decoder layer."""
    return p.tensor.total / spec.num_layers if p.tensor.per_layer else 0


def _optimizer_state(p: _Placed, optimizer: str) -> float:
    t, state = p.tensor, p.stored
    if optimizer == "adamw":
        return 2 * t.numel * state * t.copies
    if optimizer == "adamw8bit":
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

    def add(self, component: str, what: str, amount: float) -> "_Phase":
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

    weights = shard(sum(p.tensor.total * p.stored for p in placed))
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
    profile = activation_profile(spec, setup, coefficients)
    layers = spec.num_layers * tokens * (profile.checkpoint if setup.grad_checkpointing else profile.layer)
    model, loss = profile.model * tokens, profile.loss * tokens
    recomputed = profile.layer * tokens if setup.grad_checkpointing else 0.0
    dequant = 0.0
    if setup.method == "qlora":
        dequant = max(p.tensor.numel for p in placed if p.tensor.is_linear_weight) * compute

    gathered_root = gathered_layer = grads_head_full = grads_root_end = 0.0
    grads_layer_unsharded = reduce_layer = 0.0
    if fsdp:
        # What FSDP2 (``fully_shard`` on each decoder layer, then the root) holds, as the simulation measures it.
        # bf16_mixed runs FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): trainable weights
        # are gathered (and their gradients produced) in bf16, then reduced in fp32; frozen weights are gathered
        # as stored. Other precisions gather and reduce in the stored dtype.
        def gathered(p: _Placed) -> float:
            return compute if p.trainable else p.stored

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

    embedding_grad = 0.0
    if spec.tie_word_embeddings and setup.method == "full":  # the lookup's grad, before it joins the head's
        embedding_grad = spec.vocab_size * spec.hidden_size * (compute if fsdp else head[0].stored)

    stored_acts = (("activations", "stored per layer" + (" (checkpointed inputs)" if setup.grad_checkpointing
                                                          else ""), layers),
                   ("activations", "final norm, RoPE tables, masks", model))
    phases = []
    for name, temporaries in (("forward, at the loss", ("logits and their fp32 copy", profile.loss_forward)),
                              ("backward, at the loss", ("gradients of the logits", profile.loss_backward))):
        phase = _Phase(name).add("weights", "parameters", weights).add("weights", "bf16 autocast copies", copies_all)
        phase.add("weights", "FSDP: gathered embedding and head", gathered_root)
        # FSDP2 frees a forward all-gather's flat buffer only at the next forward all-gather: the last layer's
        # stays until the next step.
        phase.add("weights", "FSDP: the last layer's all-gather buffer", gathered_layer)
        phase.add("optimizer", "state", optimizer)
        for part in stored_acts:
            phase.add(*part)
        phase.add("activations", "log-probabilities kept by the loss", loss)
        phase.add("temporaries", temporaries[0], temporaries[1] * tokens)
        phases.append(phase)

    if fsdp:
        # The first layer's forward: the root's all-gather buffer is still held (freed after the next copy-out)
        # while the first layer is gathered into its buffer and copied out; few activations exist yet.
        first = _Phase("forward, first layer").add("weights", "parameters", weights)
        first.add("weights", "FSDP: gathered embedding and head, and their all-gather buffer", 2 * gathered_root)
        first.add("weights", "FSDP: the first layer gathered, and its all-gather buffer", 2 * gathered_layer)
        first.add("optimizer", "state", optimizer)
        first.add("activations", "RoPE tables, masks", model - profile.head * tokens)
        phases.insert(0, first)

    # One layer's backward, the last one and (FSDP) the one before it, where the last layer's reduce-scatter
    # buffers and sharded grads exist but one layer less of activations.
    for name, behind in (("backward, last layer", 0), ("backward, next-to-last layer", 1)):
        if behind and not fsdp:
            continue
        phase = _Phase(name).add("weights", "parameters", weights)
        phase.add("weights", "bf16 autocast copies", copies_backward)
        phase.add("weights", "FSDP: gathered embedding and head", gathered_root)
        phase.add("weights", "FSDP: two gathered layers", 2 * gathered_layer)
        if fsdp:
            phase.add("gradients", "FSDP: unsharded head grads", grads_head_full)
            phase.add("gradients", "FSDP: this layer's unsharded grads", grads_layer_unsharded)
            phase.add("gradients", "FSDP: the later layer's reduce-scatter input", behind * reduce_layer)
            phase.add("gradients", "sharded grads of the later layer", behind * shard(grads_layer))
        else:
            phase.add("gradients", "head and last layer", grads_head + grads_layer)
        phase.add("optimizer", "state", optimizer)
        # The head's and the final norm's backward have run: what they kept is freed.
        kept = layers - behind * layers / spec.num_layers
        phase.add(stored_acts[0][0], stored_acts[0][1], kept)
        phase.add("activations", "RoPE tables, masks", model - profile.head * tokens)
        phase.add("activations", "recomputed layer", recomputed)
        phase.add("temporaries", "one layer's backward", profile.layer_backward * tokens)
        phase.add("temporaries", "dequantised 4-bit weight", dequant)
        phases.append(phase)

    end = _Phase("backward, end").add("weights", "parameters", weights).add("gradients", "all", grads_all)
    end.add("gradients", "FSDP: unsharded embedding and head grads", grads_root_end)
    end.add("optimizer", "state", optimizer)
    end.add("temporaries", "embedding grad before it joins the head's", embedding_grad)
    phases.append(end)

    step = _Phase("optimizer step").add("weights", "parameters", weights).add("gradients", "all", grads_all)
    step.add("optimizer", "state", optimizer).add("temporaries", f"{setup.optimizer} foreach buffers", optimizer_temp)
    phases.append(step)

    peak = max(phases, key=lambda p: p.live)
    reserve_parts = [("reserve", "CUDA context", reserve.cuda_context),
                     ("reserve", "library workspaces", reserve.library_workspaces)]
    if n > 1:
        reserve_parts.append(("reserve", "NCCL buffers", reserve.nccl_buffers))
    if setup.parallel == "ddp":
        reserve_parts.append(("reserve", "DDP gradient buckets", grads_all))
    reserve_parts.append(("reserve", f"allocator fragmentation ({reserve.fragmentation:.0%} of live)",
                          reserve.fragmentation * peak.live))
    parts = tuple((c, w, math.ceil(b)) for c, w, b in peak.parts + reserve_parts)
    totals = {name: sum(b for c, _w, b in parts if c == name) for name in COMPONENTS}
    return Breakdown(**totals, phase=peak.name, parts=parts,
                     phases=tuple((p.name, math.ceil(p.live)) for p in phases),
                     notes=_notes(spec, setup, dtypes, reserve))


def _notes(spec: ModelSpec, setup: TrainingSetup, dtypes, reserve: Reserve) -> tuple[str, ...]:
    weights = {"fp32": "fp32 weights", "bf16": "bf16 weights",
               "bf16_mixed": "fp32 weights (the master copy), computed on in bf16"}[setup.precision]
    if setup.method == "lora":
        weights = f"frozen {'fp32' if setup.precision == 'fp32' else 'bf16'} base weights, " \
                  f"{setup.adapter_dtype} adapters"
    elif setup.method == "qlora":
        weights = f"frozen NF4 base weights ({NF4_BYTES_PER_PARAM * 8:.3f} bits each with double quantisation), " \
                  f"bf16 embeddings, head and norms, {setup.adapter_dtype} adapters"
    notes = [
        f"Weights: {weights}" + ("; autocast keeps a bf16 copy of each trainable fp32 weight from the forward "
                                  "to that weight's backward." if dtypes.autocast else "."),
        "Gradients: one per trainable parameter, in its dtype, set to None after each step "
        "(no gradient accumulation).",
        f"Optimizer: {setup.optimizer} state for the trainable parameters; foreach implementations, as a GPU "
        "uses by default.",
        "Activations: tensors autograd keeps for the backward, per token from ACTIVATION_COEFFICIENTS, "
        f"× micro-batch {setup.micro_batch} × sequence {setup.seq_len}"
        + ("; with checkpointing only each layer's input, and one layer recomputed at a time."
           if setup.grad_checkpointing else "."),
        "Activation coefficients are derived per operator and held to the simulation by "
        "bench/planner_accuracy.py (median error 0.13 % single-device).",
        "Temporaries: short-lived buffers at the moment of the peak (logits in fp32 for the loss, the "
        "optimizer's foreach buffers, one layer's backward).",
        f"Reserve: {reserve.cuda_context / MiB:.0f} MiB CUDA context, {reserve.library_workspaces / MiB:.0f} MiB "
        f"library workspaces, {reserve.fragmentation:.0%} of the live peak for allocator fragmentation"
        + (f", {reserve.nccl_buffers / MiB:.0f} MiB NCCL buffers" if setup.gpus > 1 else "")
        + (", and DDP's gradient buckets (a copy of the gradients)" if setup.parallel == "ddp" else "")
        + ": an allowance to be checked on a GPU.",
    ]
    if setup.parallel == "fsdp":
        notes.append(f"FSDP2 (full shard, each decoder layer then the root) over {setup.gpus}: weights, gradients "
                     f"and optimizer state divided by {setup.gpus}, plus the gathered root (embedding and head) "
                     "and up to two decoder layers gathered at a time (the one running and the one prefetched)"
                     + ("; bf16 mixed runs as FSDP's mixed-precision policy (bf16 parameters gathered, fp32 "
                        "gradient reduction) rather than autocast." if setup.precision == "bf16_mixed" else "."))
    if spec.attention == "eager":
        notes.append(f"{spec.label} runs eager attention (soft-capping): its attention matrix is stored, so "
                     "activations grow with the square of the sequence length.")
    notes.append("Assumes sequences without padding masks (packed or of equal length) and the steady state "
                 "(optimizer state already created).")
    return tuple(notes)
