"""Activation memory: what autograd keeps between the forward and the backward.

``ACTIVATION_COEFFICIENTS`` is the one table the analytic estimate takes its
activation and transient terms from. Everything else in this module only
decides which terms apply to a given model and setup and in which dtype.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .layer_spec import LayerSpec, layer_tensors
from .model_spec import ModelSpec, resolve_targets
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
    "k": _T("k_dim", "compute", 1, "layer", "sdpa", "keys after RoPE, kept by SDPA"),
    "v": _T("kv_dim", "compute", 1, "layer", "sdpa", "values, kept by SDPA"),
    "sdpa_out": _T("out_dim", "compute", 1, "layer", "sdpa", "SDPA output, kept by its backward"),
    "sdpa_lse": _T("heads", "fp32", 1, "layer", "sdpa", "SDPA log-sum-exp per head"),
    "eager_kv": _T("q_dim", "compute", 2, "layer", "eager", "keys and values repeated to every query head"),
    "eager_capped": _T("heads_x_seq", "compute", 1, "layer", "softcap", "tanh of the soft-capped scores"),
    "eager_probs_fp32": _T("heads_x_seq", "fp32", 1, "layer", "eager", "softmax output in fp32"),
    "eager_probs": _T("heads_x_seq", "compute", 1, "layer", "eager_lowp", "probabilities cast back for P·V"),
    "o_input": _T("out_dim", "compute", 1, "layer", "o_input", "attention output, kept for o_proj's weight grad"),
    "mlp_input": _T("hidden", "compute", 1, "layer", "mlp_input", "normed input of gate/up, for their weight grads"),
    "mlp_gate": _T("intermediate", "compute", 1, "layer", "always", "gate output, kept by the activation function"),
    "mlp_act": _T("intermediate", "compute", 1, "layer", "always", "activation output, kept by the product"),
    "mlp_up": _T("intermediate", "compute", 1, "layer", "always", "up output, kept by the product"),
    # peft's k-bit preparation: the norms' outputs are fp32 and bitsandbytes' Linear4bit returns its input's
    # dtype, so gate, activation and up outputs are fp32: the other half of their bytes.
    "kbit_mlp_fp32": _T("intermediate", "compute", 3, "layer", "kbit_prepared", "gate, activation and up "
                                                                                "outputs in fp32 (k-bit "
                                                                                "preparation): the other half"),
    "down_input": _T("intermediate", "compute", 1, "layer", "down_input", "product, kept for down_proj's weight grad"),
    # Query and key norms (Qwen3, Gemma 3: per head; OLMo 2: over the whole projection).
    "q_norm_input": _T("q_dim", "fp32", 1, "layer", "qk_norm", "the query norm's fp32 input"),
    "k_norm_input": _T("kv_dim", "fp32", 1, "layer", "qk_norm", "the key norm's fp32 input"),
    "q_norm_scaled": _T("q_dim", "norm", 1, "layer", "qk_norm_trainable", "normalised queries, for the norm's grad"),
    "k_norm_scaled": _T("kv_dim", "norm", 1, "layer", "qk_norm_trainable", "normalised keys, for the norm's grad"),
    # Multi-head latent attention (DeepSeek): the key/value latent, its norm, and the query latent.
    "mla_kv_norm_input": _T("kv_lora_rank", "fp32", 1, "layer", "mla", "the latent's norm keeps an fp32 input"),
    "mla_kv_b_input": _T("kv_lora_rank", "compute", 1, "layer", "kv_b_input", "normed latent, for kv_b_proj's grad"),
    "mla_q_norm_input": _T("q_lora_rank", "fp32", 1, "layer", "q_lora", "the query latent's norm keeps an fp32 input"),
    "mla_q_b_input": _T("q_lora_rank", "compute", 1, "layer", "q_b_input", "normed query latent, for q_b_proj's grad"),
    # Mixture of experts (transformers 5's fused experts: each expert runs on the tokens routed to it; the
    # routed tokens add up to tokens × top-k whatever the balance).
    "router_probs": _T("experts", "fp32", 1, "layer", "moe", "router softmax over the experts, in fp32"),
    "router_weights": _T("top_k", "fp32", 2, "layer", "moe", "top-k weights and their normalised copy"),
    "expert_input": _T("routed_hidden", "compute", 1, "layer", "experts_trainable", "routed tokens' inputs, for the "
                                                                                     "experts' weight grads"),
    "expert_gate_up": _T("routed_intermediate", "compute", 2, "layer", "moe", "gate and up outputs of the routed "
                                                                              "tokens (one buffer)"),
    "expert_act": _T("routed_intermediate", "compute", 1, "layer", "moe", "activation output, kept by the product"),
    "expert_glu": _T("routed_intermediate", "compute", 3, "layer", "clamped_glu", "gpt-oss: clamped gate, its "
                                                                                 "sigmoid, up + 1"),
    "expert_down_input": _T("routed_intermediate", "compute", 1, "layer", "experts_trainable", "product, for "
                                                                                              "down_proj's grad"),
    "expert_out": _T("routed_hidden", "compute", 1, "layer", "moe", "expert outputs, kept by the routing weights"),
    # Each LoRA target of a layer.
    "lora_input": _T("lora_in", "lora", 1, "lora", "lora_cast", "input cast for the adapter, kept by lora_A"),
    "lora_mid": _T("rank", "lora", 1, "lora", "always", "lora_A output, kept by lora_B"),
    "lora_dropout_mask": _T("lora_in", "bool", 1, "lora", "lora_dropout", "dropout mask of the adapter's input"),
    # Gradient checkpointing keeps only each layer's input.
    "checkpoint_input": _T("hidden", "residual", 1, "checkpoint", "always", "a checkpointed layer's input"),
    # Once per step.
    "final_norm_input": _T("hidden", "fp32", 1, "model", "always", "final norm's fp32 input"),
    "final_norm_scaled": _T("hidden", "norm", 1, "model", "norm_trainable", "final norm's normalised input"),
    "head_input": _T("hidden", "compute", 1, "model", "head_trainable", "input of the output head, for its grad"),
    "rope_tables": _T("head_dim", "residual", 2, "model", "always", "RoPE cos and sin"),
    "attention_masks": _T("seq", "compute", 2, "model", "eager_model_masks", "full and sliding-window masks "
                                                                              "[b,1,s,s]"),
    "eager_mask": _T("seq", "compute", 1, "model", "eager_mask", "eager attention's causal mask [b,1,s,s]"),
    "packed_mask": _T("seq", "bool", 1, "model", "sdpa_packed", "SDPA's block-diagonal mask for packed "
                                                                "sequences [b,1,s,s]"),
    # LoRA on the output head and on the embeddings (peft's Linear and Embedding adapters), once per model.
    "lora_head_input": _T("hidden", "lora", 1, "model", "lora_head_copy", "the head adapter's input copy (cast "
                                                                          "or dropped), kept by lora_A"),
    "lora_head_mask": _T("hidden", "bool", 1, "model", "lora_head_dropout", "the head adapter's dropout mask"),
    "lora_head_mid": _T("rank", "lora", 1, "model", "lora_head", "the head adapter's lora_A output"),
    "lora_embedding_mid": _T("rank", "lora", 1, "model", "lora_embedding", "lora_embedding_A looked up, kept by "
                                                                           "lora_embedding_B"),
    "sliding_mask": _T("seq", "bool", 1, "model", "sdpa_sliding", "SDPA's sliding-window mask [b,1,s,s]"),
    # Kept from the loss until its backward has run.
    "logits_capped": _T("vocab", "compute", 1, "loss", "final_softcap", "tanh of the soft-capped logits"),
    "log_probs": _T("vocab", "fp32", 1, "loss", "ce_logits", "log-softmax output, kept by the loss"),
    "fused_ce_grad_input": _T("hidden", "compute", 1, "loss", "ce_fused", "Liger: the head input's gradient, "
                                                                          "made in the forward"),
    # Transients around the loss and inside one layer's backward.
    "logits": _T("vocab", "compute", 1, "loss_forward", "ce_logits", "logits as the head returns them"),
    "logits_fp32": _T("vocab", "fp32", 1, "loss_forward", "lowp_ce_standard", "fp32 copy of the logits for the loss"),
    "logits_fp32_chunk": _T("vocab", "fp32", 1 / 8, "loss_forward", "lowp_ce_chunked", "fp32 copy of one of 8 "
                                                                                       "logit chunks"),
    "loss_grads": _T("vocab", "fp32", 2, "loss_backward", "ce_standard", "grads of the log-probs and of the logits"),
    "loss_grads_chunk": _T("vocab", "fp32", 2 / 8, "loss_backward", "ce_chunked", "grads of one chunk's log-probs "
                                                                                  "and logits"),
    "mlp_grads": _T("intermediate", "compute", 3, "backward_mlp", "always", "grads inside the MLP's backward"),
    "kbit_mlp_grads_fp32": _T("intermediate", "compute", 3, "backward_mlp", "kbit_prepared", "those grads in fp32 "
                                                                                          "(k-bit preparation)"),
    "mlp_grads_hidden": _T("hidden", "compute", 2, "backward_mlp", "always", "grads of the MLP's input and output"),
    "expert_grads": _T("busiest_intermediate", "compute", 3, "backward_mlp", "moe", "grads inside the busiest "
                                                                                    "expert's backward"),
    "expert_grads_hidden": _T("routed_hidden", "compute", 1, "backward_mlp", "moe", "grads of the routed tokens' "
                                                                                    "inputs, before they are summed"),
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
    # DeepSpeed ZeRO's bf16 mode casts the module to bf16 (fp32 masters in its optimizer): no autocast either.
    autocast = setup.precision == "bf16_mixed" and setup.parallel not in {"fsdp", "zero2", "zero3"}
    # The residual stream is fp32 when the embedding weights are fp32.
    # peft's k-bit preparation (QLoRA) casts the embeddings to fp32 as well.
    kbit = setup.method == "qlora" and setup.prepare_kbit_training
    residual = 4 if setup.precision == "fp32" or (autocast and setup.method == "full") or kbit else 2
    norm = 4 if spec.norm_kind == "rms_gemma" else residual
    # Under autocast the adapters compute in bf16; under FSDP's mixed-precision policy they are gathered in bf16.
    lora = compute if setup.precision == "bf16_mixed" else _adapter_bytes(setup)
    return Dtypes(compute=compute, residual=residual, norm=norm, lora=lora, autocast=autocast)


def _adapter_bytes(setup: TrainingSetup) -> int:
    return 4 if setup.adapter_dtype == "fp32" else 2


_INPUT_GROUPS = {"qkv_input": ("q_proj", "k_proj", "v_proj", "qkv_proj", "q_a_proj", "kv_a_proj_with_mqa"),
                 "o_input": ("o_proj",), "mlp_input": ("gate_proj", "up_proj", "gate_up_proj"),
                 "down_input": ("down_proj",)}


def _conditions(spec: ModelSpec, setup: TrainingSetup, dtypes: Dtypes) -> frozenset[str]:
    full = setup.method == "full"
    # peft casts an adapter's input to the adapter's dtype; autocast then casts it back:
    # either way each target keeps its own copy unless the dtypes already agree. FSDP's
    # mixed-precision policy gathers fp32 adapters in bf16: they agree.
    adapter = 2 if setup.parallel in {"fsdp", "zero2", "zero3"} and setup.precision == "bf16_mixed" else (
        _adapter_bytes(setup))
    # peft's nn.Dropout (lora_dropout > 0) gives lora_A a dropped copy of its input, per target, and a mask.
    dropout = setup.is_lora and setup.lora_dropout > 0
    # After peft's k-bit preparation the adapters' inputs are fp32 and autocast casts a bf16 copy for each.
    kbit = setup.method == "qlora" and setup.prepare_kbit_training
    lora_cast = setup.is_lora and (adapter != dtypes.compute or dropout or kbit)
    found = {"always"}
    found.add("kbit_prepared") if kbit else None
    found.add("lora_dropout") if dropout else None
    found |= {"norm_trainable", "head_trainable"} if full else set()
    found.add("lora_cast") if lora_cast else None
    for condition, modules in _INPUT_GROUPS.items():
        targeted = (
            setup.is_lora and not lora_cast and any(m in resolve_targets(spec, setup.lora_targets) for m in modules)
        )
        if full or targeted:
            found.add(condition)
    attention = setup.attention_for(spec)
    if attention == "eager":
        found.add("eager")
        found.add("eager_model_masks" if spec.attention == "eager" else "eager_mask")
        if dtypes.compute != 4:
            found.add("eager_lowp")
        if spec.attn_logit_softcapping is not None:
            found.add("softcap")
    else:  # SDPA and FlashAttention 2/3 keep the same: q, k, v, the output and an fp32 log-sum-exp
        found.add("sdpa")
        if attention == "sdpa" and setup.packed:  # transformers' block-diagonal mask (it holds the window too)
            found.add("sdpa_packed")
        elif attention == "sdpa" and spec.sliding_window and setup.seq_len > spec.sliding_window:
            found.add("sdpa_sliding")  # no longer a plain causal mask; FlashAttention windows in the kernel
    ce = setup.cross_entropy
    if spec.final_logit_softcapping is not None and ce != "fused_linear":
        found.add("final_softcap")
    if dtypes.compute != 4:
        found.add("lowp")
    if ce == "fused_linear":  # Liger: no logits; the head's grads are made in the forward, its input not kept
        found.add("ce_fused")
        found.discard("head_trainable")
    else:
        found |= {"ce_logits", f"ce_{ce}"}
        if dtypes.compute != 4:
            found.add(f"lowp_ce_{ce}")
    targets = resolve_targets(spec, setup.lora_targets) if setup.is_lora else ()
    if "lm_head" in targets:
        found |= {"lora_head", "lora_head_copy"} if lora_cast else {"lora_head", "head_trainable"}
        found.add("lora_head_dropout") if dropout else None
    if "embed_tokens" in targets:
        found.add("lora_embedding")
    return frozenset(found)


# What the MLP keeps (freed when its backward has run) and what the final norm and the head keep.
_MLP_TERMS = ("mlp_input", "mlp_gate", "mlp_act", "mlp_up", "kbit_mlp_fp32", "down_input", "router_probs",
              "router_weights", "expert_input", "expert_gate_up", "expert_act", "expert_glu",
              "expert_down_input", "expert_out")
_HEAD_TERMS = ("final_norm_input", "final_norm_scaled", "head_input", "lora_head_input", "lora_head_mask",
               "lora_head_mid")


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


# The busiest expert's share of the routed tokens, against a perfectly even split: a stated allowance for
# load imbalance. It only scales one expert's backward transients: what the experts keep adds up to
# tokens × top-k whatever the balance.
MOE_IMBALANCE = 2.0


def _layer_widths(spec: ModelSpec, setup: TrainingSetup, layer: LayerSpec) -> dict[str, float]:
    a, m = layer.attention, layer.mlp
    moe = m.is_moe
    nope = a.head_dim - a.qk_rope_head_dim
    return {"hidden": spec.hidden_size, "q_dim": a.q_dim,
            # MLA keeps the whole kv_b output (keys without RoPE and values: SDPA holds the values as its view).
            "kv_dim": a.num_heads * (nope + a.v_head_dim) if a.kind == "mla" else a.num_kv_heads * a.head_dim,
            "k_dim": a.k_dim, "out_dim": a.out_dim,
            "intermediate": m.shared_intermediate if moe else m.intermediate_size,
            "heads": a.num_heads, "head_dim": a.head_dim, "vocab": spec.vocab_size,
            "heads_x_seq": a.num_heads * setup.seq_len, "seq": setup.seq_len,
            "rank": setup.lora_rank if setup.is_lora else 0,
            "kv_lora_rank": a.kv_lora_rank, "q_lora_rank": a.q_lora_rank or 0,
            "experts": m.num_experts, "top_k": m.top_k,
            "routed_hidden": m.top_k * spec.hidden_size if moe else 0,
            "routed_intermediate": m.top_k * m.intermediate_size if moe else 0,
            "busiest_intermediate": MOE_IMBALANCE * m.top_k * m.intermediate_size / m.num_experts if moe else 0}


def _layer_conditions(spec: ModelSpec, setup: TrainingSetup, layer: LayerSpec, found: frozenset[str]
                      ) -> frozenset[str]:
    a, m = layer.attention, layer.mlp
    full = setup.method == "full"
    targets = set(resolve_targets(spec, setup.lora_targets)) if setup.is_lora else set()
    extra = {"moe"} if m.is_moe else set()
    if m.is_moe and (full or "experts" in targets):
        extra.add("experts_trainable")
    if m.is_moe and m.router_name == "router":  # gpt-oss's clamped gated activation
        extra.add("clamped_glu")
    if a.q_norm or a.k_norm:
        extra.add("qk_norm")
        if full:
            extra.add("qk_norm_trainable")
    if a.kind == "mla":
        extra.add("mla")
        if full or "kv_b_proj" in targets:
            extra.add("kv_b_input")
        if a.q_lora_rank:
            extra.add("q_lora")
            if full or "q_b_proj" in targets:
                extra.add("q_b_input")
    return found | extra


def activation_profile(spec: ModelSpec, setup: TrainingSetup,
                       coefficients: Mapping[str, ActivationTerm] = ACTIVATION_COEFFICIENTS,
                       layer: LayerSpec | None = None) -> ActivationProfile:
    """Bytes per token of ``layer`` (the model's last layer by default) and of the model's ends."""
    layer = layer or spec.layers[-1]
    dtypes = activation_dtypes(spec, setup)
    conditions = _layer_conditions(spec, setup, layer, _conditions(spec, setup, dtypes))
    widths = _layer_widths(spec, setup, layer)
    in_features = {t.module: t.shape[-1] for t in layer_tensors(layer, spec.hidden_size)
                   if t.group in {"attention", "mlp"} and len(t.shape) == 2}
    sums: dict[str, float] = {}
    terms: dict[str, float] = {}
    for name, term in coefficients.items():
        if term.when not in conditions:
            continue
        size = dtypes.of(term.dtype) * term.count
        if term.scope == "lora":
            if not setup.is_lora:
                continue
            present = [t for t in resolve_targets(spec, setup.lora_targets) if t in in_features]
            width = sum(in_features[t] if term.width == "lora_in" else widths[term.width] for t in present)
            value, scope = size * width, "layer"
        elif term.scope == "norm":
            value, scope = size * widths[term.width] * layer.norms, "layer"
        else:
            value, scope = size * widths[term.width], term.scope
        terms[name] = value
        sums[scope] = sums.get(scope, 0.0) + value
    # A layer's backward runs the MLP's first, then the attention's: by the time the attention's backward
    # runs, autograd has freed what the MLP kept and what every norm after the attention kept (all norms but
    # the input norm), so the attention's transients do not add to those.
    freed = sum(terms.get(name, 0.0) for name in _MLP_TERMS)
    freed += sum(terms.get(name, 0.0) for name in ("norm_input", "norm_scaled")) * (
        (layer.norms - 1) / layer.norms)
    head = sum(terms.get(name, 0.0) for name in _HEAD_TERMS)
    return ActivationProfile(
        layer=sums.get("layer", 0.0), checkpoint=sums.get("checkpoint", 0.0), model=sums.get("model", 0.0),
        loss=sums.get("loss", 0.0),
        loss_forward=sums.get("loss_forward", 0.0), loss_backward=sums.get("loss_backward", 0.0),
        layer_backward=max(sums.get("backward_mlp", 0.0), sums.get("backward_attention", 0.0) - freed),
        head=head, terms=MappingProxyType(terms))
