"""Activation memory: what autograd keeps between the forward and the backward.

``ACTIVATION_COEFFICIENTS`` is the one table the analytic estimate takes its
activation and transient terms from. Everything else in this module only
decides which terms apply to a given model and setup and in which dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from .model_spec import ModelSpec
from .setup import TrainingSetup


@dataclass(frozen=True)
class ActivationTerm:
    """Tensors of one kind, per token.

    ``width``: elements per token of one such tensor (``hidden``, ``q_dim``,
    ``kv_dim``, ``intermediate``, ``heads``, ``head_dim``, ``vocab``,
    ``heads_x_seq`` -- one attention row per head --, ``seq`` -- one mask
    row --, ``lora_in`` and ``rank`` for an adapter).
    ``dtype``: ``compute`` (bf16, or fp32 when training in fp32), ``fp32``, ``bool``,
    ``residual`` (the residual stream: fp32 under autocast with fp32 weights
    or in fp32, else bf16), ``norm`` (fp32 for Gemma norms, else residual),
    ``lora`` (what an adapter keeps its input and middle in).
    ``count``: how many such tensors; the number calibration adjusts.
    ``scope``: ``layer`` (each decoder layer), ``norm`` (each norm of a
    layer), ``lora`` (each LoRA target of a layer), ``model`` (once),
    ``checkpoint`` (each layer, with gradient checkpointing, instead of
    ``layer``), ``loss`` (once, from the loss until its backward), or a transient: ``loss_forward``, ``loss_backward``,
    ``backward_mlp``, ``backward_attention`` (alive only around that point).
    ``when``: the condition under which the tensors exist (see ``_conditions``).
    """

    width: str
    dtype: str
    count: float
    scope: str
    when: str
    note: str


_T = ActivationTerm

ACTIVATION_COEFFICIENTS: Mapping[str, ActivationTerm] = MappingProxyType({
    # Decoder layer, stored for the backward.
    "norm_input": _T("hidden", "fp32", 1, "norm", "always", "RMSNorm keeps an fp32 input (cast copy or fp32 residual)"),
    "norm_scaled": _T("hidden", "norm", 1, "norm", "norm_trainable", "normalised input, for the norm weight's grad"),
    "qkv_input": _T("hidden", "compute", 1, "layer", "qkv_input", "normed input of q/k/v, kept for their weight grads"),
    "q": _T("q_dim", "compute", 1, "layer", "always", "queries after RoPE"),
    "k": _T("kv_dim", "compute", 1, "layer", "sdpa", "keys after RoPE, kept by SDPA"),
    "v": _T("kv_dim", "compute", 1, "layer", "sdpa", "values, kept by SDPA"),
    "sdpa_out": _T("q_dim", "compute", 1, "layer", "sdpa", "SDPA output, kept by its backward"),
    "sdpa_lse": _T("heads", "fp32", 1, "layer", "sdpa", "SDPA log-sum-exp per head"),
    "eager_kv": _T("q_dim", "compute", 2, "layer", "eager", "keys and values repeated to every query head"),
    "eager_capped": _T("heads_x_seq", "compute", 1, "layer", "softcap", "tanh of the soft-capped scores"),
    "eager_probs_fp32": _T("heads_x_seq", "fp32", 1, "layer", "eager", "softmax output in fp32"),
    "eager_probs": _T("heads_x_seq", "compute", 1, "layer", "eager_lowp", "probabilities cast back for P·V"),
    "o_input": _T("q_dim", "compute", 1, "layer", "o_input", "attention output, kept for o_proj's weight grad"),
    "mlp_input": _T("hidden", "compute", 1, "layer", "mlp_input", "normed input of gate/up, for their weight grads"),
    "mlp_gate": _T("intermediate", "compute", 1, "layer", "always", "gate output, kept by the activation function"),
    "mlp_act": _T("intermediate", "compute", 1, "layer", "always", "activation output, kept by the product"),
    "mlp_up": _T("intermediate", "compute", 1, "layer", "always", "up output, kept by the product"),
    "down_input": _T("intermediate", "compute", 1, "layer", "down_input", "product, kept for down_proj's weight grad"),
    # Each LoRA target of a layer.
    "lora_input": _T("lora_in", "lora", 1, "lora", "lora_cast", "input cast for the adapter, kept by lora_A"),
    "lora_mid": _T("rank", "lora", 1, "lora", "always", "lora_A output, kept by lora_B"),
    # Gradient checkpointing keeps only each layer's input.
    "checkpoint_input": _T("hidden", "residual", 1, "checkpoint", "always", "a checkpointed layer's input"),
    # Once per step.
    "final_norm_input": _T("hidden", "fp32", 1, "model", "always", "final norm's fp32 input"),
    "final_norm_scaled": _T("hidden", "norm", 1, "model", "norm_trainable", "final norm's normalised input"),
    "head_input": _T("hidden", "compute", 1, "model", "head_trainable", "input of the output head, for its grad"),
    "rope_tables": _T("head_dim", "residual", 2, "model", "always", "RoPE cos and sin"),
    "attention_masks": _T("seq", "compute", 2, "model", "eager", "full and sliding-window masks [b,1,s,s]"),
    "sliding_mask": _T("seq", "bool", 1, "model", "sdpa_sliding", "SDPA's sliding-window mask [b,1,s,s]"),
    # Kept from the loss until its backward has run.
    "logits_capped": _T("vocab", "compute", 1, "loss", "final_softcap", "tanh of the soft-capped logits"),
    "log_probs": _T("vocab", "fp32", 1, "loss", "always", "log-softmax output, kept by the loss"),
    # Transients around the loss and inside one layer's backward.
    "logits": _T("vocab", "compute", 1, "loss_forward", "always", "logits as the head returns them"),
    "logits_fp32": _T("vocab", "fp32", 1, "loss_forward", "lowp", "fp32 copy of the logits for the loss"),
    "loss_grads": _T("vocab", "fp32", 2, "loss_backward", "always", "grads of the log-probs and of the logits"),
    "mlp_grads": _T("intermediate", "compute", 3, "backward_mlp", "always", "grads inside the MLP's backward"),
    "mlp_grads_hidden": _T("hidden", "compute", 2, "backward_mlp", "always", "grads of the MLP's input and output"),
    "attention_grads": _T("q_dim", "compute", 2, "backward_attention", "always", "grads of q and of the output"),
    "attention_grads_kv": _T("kv_dim", "compute", 2, "backward_attention", "always", "grads of k and v"),
    "eager_grads": _T("heads_x_seq", "fp32", 2, "backward_attention", "eager", "grads of the scores in fp32"),
    "eager_grads_lowp": _T("heads_x_seq", "compute", 1, "backward_attention", "eager", "grad of the probabilities"),
})
"""First-principles starting point, NOT calibrated.

The counts are what PyTorch autograd keeps for a Hugging Face decoder layer
run with SDPA attention (a fused kernel: no attention matrix is stored,
only q, k, v, the output and a log-sum-exp per head), worked out op by op
from what each backward formula needs: a linear keeps its input only when
its weight is trainable, an activation function its input, a product both
factors, RMSNorm an fp32 copy of its input. Gemma 2 runs eager attention
with soft-capping, so its attention matrix (the ``heads_x_seq`` terms)
grows with the square of the sequence length.

These counts MUST be calibrated against the simulation engine (live tensor
bytes of the real transformers modules on fake tensors) before the
estimate is trusted; until then each entry is a derivation, not a
measurement, and the planner says so in its notes.
"""


@dataclass(frozen=True)
class Dtypes:
    """Bytes per element of the activations of one setup."""

    compute: int
    residual: int
    norm: int
    lora: int
    autocast: bool

    def of(self, dtype: str) -> int:
        return {"compute": self.compute, "fp32": 4, "bool": 1, "residual": self.residual, "norm": self.norm,
                "lora": self.lora}[dtype]


def activation_dtypes(spec: ModelSpec, setup: TrainingSetup) -> Dtypes:
    compute = 4 if setup.precision == "fp32" else 2
    # autocast (bf16_mixed without FSDP) runs bf16 compute on fp32 weights; FSDP's
    # mixed-precision policy instead hands the layers bf16 copies of the weights.
    autocast = setup.precision == "bf16_mixed" and setup.parallel != "fsdp"
    # The residual stream is fp32 when the embedding weights are fp32.
    residual = 4 if setup.precision == "fp32" or (autocast and setup.method == "full") else 2
    norm = 4 if spec.norm_kind == "rms_gemma" else residual
    # Under autocast the adapters compute in bf16; under FSDP's mixed-precision policy they are gathered in bf16.
    lora = compute if setup.precision == "bf16_mixed" else _adapter_bytes(setup)
    return Dtypes(compute=compute, residual=residual, norm=norm, lora=lora, autocast=autocast)


def _adapter_bytes(setup: TrainingSetup) -> int:
    return 4 if setup.adapter_dtype == "fp32" else 2


_INPUT_GROUPS = {"qkv_input": ("q_proj", "k_proj", "v_proj"), "o_input": ("o_proj",),
                 "mlp_input": ("gate_proj", "up_proj"), "down_input": ("down_proj",)}


def _conditions(spec: ModelSpec, setup: TrainingSetup, dtypes: Dtypes) -> frozenset[str]:
    full = setup.method == "full"
    # peft casts an adapter's input to the adapter's dtype; autocast then casts it back:
    # either way each target keeps its own copy unless the dtypes already agree. FSDP's
    # mixed-precision policy gathers fp32 adapters in bf16: they agree.
    adapter = 2 if setup.parallel == "fsdp" and setup.precision == "bf16_mixed" else _adapter_bytes(setup)
    lora_cast = setup.is_lora and adapter != dtypes.compute
    found = {"always"}
    found |= {"norm_trainable", "head_trainable"} if full else set()
    found.add("lora_cast") if lora_cast else None
    for condition, modules in _INPUT_GROUPS.items():
        targeted = setup.is_lora and not lora_cast and any(m in setup.lora_targets for m in modules)
        if full or targeted:
            found.add(condition)
    if spec.attention == "eager":
        found.add("eager")
        if dtypes.compute != 4:
            found.add("eager_lowp")
        if spec.attn_logit_softcapping is not None:
            found.add("softcap")
    else:
        found.add("sdpa")
        if spec.sliding_window and setup.seq_len > spec.sliding_window:  # no longer a plain causal mask
            found.add("sdpa_sliding")
    if spec.final_logit_softcapping is not None:
        found.add("final_softcap")
    if dtypes.compute != 4:
        found.add("lowp")
    return frozenset(found)


# What the MLP keeps (freed when its backward has run) and what the final norm and the head keep.
_MLP_TERMS = ("mlp_input", "mlp_gate", "mlp_act", "mlp_up", "down_input")
_HEAD_TERMS = ("final_norm_input", "final_norm_scaled", "head_input")


@dataclass(frozen=True)
class ActivationProfile:
    """Bytes per token of each scope (multiply by micro_batch × seq_len)."""

    layer: float  # one decoder layer, everything kept for its backward
    checkpoint: float  # one checkpointed layer (its input only)
    model: float  # kept once: final norm, masks, RoPE tables
    loss: float  # kept from the loss until its backward: log-probs (and soft-capped logits)
    loss_forward: float
    loss_backward: float
    layer_backward: float  # the larger of the MLP's and the attention's backward transients (see below)
    head: float  # of ``model``: what the final norm and the head keep, freed once their backward has run
    terms: Mapping[str, float]  # each applicable term's bytes per token (all its copies in one layer or once)


def activation_profile(spec: ModelSpec, setup: TrainingSetup,
                       coefficients: Mapping[str, ActivationTerm] = ACTIVATION_COEFFICIENTS) -> ActivationProfile:
    dtypes = activation_dtypes(spec, setup)
    conditions = _conditions(spec, setup, dtypes)
    widths = {"hidden": spec.hidden_size, "q_dim": spec.q_dim, "kv_dim": spec.kv_dim,
              "intermediate": spec.intermediate_size, "heads": spec.num_heads, "head_dim": spec.head_dim,
              "vocab": spec.vocab_size, "heads_x_seq": spec.num_heads * setup.seq_len, "seq": setup.seq_len,
              "rank": setup.lora_rank if setup.is_lora else 0}
    sums: dict[str, float] = {}
    terms: dict[str, float] = {}
    for name, term in coefficients.items():
        if term.when not in conditions:
            continue
        size = dtypes.of(term.dtype) * term.count
        if term.scope == "lora":
            if not setup.is_lora:
                continue
            width = sum(spec.linear(t).in_features if term.width == "lora_in" else widths[term.width]
                        for t in setup.lora_targets)
            value, scope = size * width, "layer"
        elif term.scope == "norm":
            value, scope = size * widths[term.width] * spec.norms_per_layer, "layer"
        else:
            value, scope = size * widths[term.width], term.scope
        terms[name] = value
        sums[scope] = sums.get(scope, 0.0) + value
    # A layer's backward runs the MLP's first, then the attention's: by the time the attention's backward
    # runs, autograd has freed what the MLP kept and what every norm after the attention kept (all norms but
    # the input norm), so the attention's transients do not add to those.
    freed = sum(terms.get(name, 0.0) for name in _MLP_TERMS)
    freed += sum(terms.get(name, 0.0) for name in ("norm_input", "norm_scaled")) * (
        (spec.norms_per_layer - 1) / spec.norms_per_layer)
    head = sum(terms.get(name, 0.0) for name in _HEAD_TERMS)
    return ActivationProfile(
        layer=sums.get("layer", 0.0), checkpoint=sums.get("checkpoint", 0.0), model=sums.get("model", 0.0),
        loss=sums.get("loss", 0.0),
        loss_forward=sums.get("loss_forward", 0.0), loss_backward=sums.get("loss_backward", 0.0),
        layer_backward=max(sums.get("backward_mlp", 0.0), sums.get("backward_attention", 0.0) - freed),
        head=head, terms=MappingProxyType(terms))
