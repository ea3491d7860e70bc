"""Peaks outside the training step: loading the model, saving a checkpoint, evaluating.

A run's highest memory is not always in the step. Each moment here is given
as live tensor bytes per device (like ``Breakdown.live``), for the common
ways of doing it, so the planner can warn with the figure when one of them is
higher than the step and say what avoids it:

* loading: under FSDP or ZeRO-3, every rank loading the whole model onto its
  card (``from_pretrained(...).to(device)`` then ``fully_shard``) holds the
  full model before it is sharded; meta-device initialisation
  (``low_cpu_mem_usage``, transformers' default, or ``deepspeed.zero.Init``),
  or loading on rank 0 in host memory and broadcasting the shards
  (``set_model_state_dict(..., broadcast_from_rank0=True)``, accelerate's
  ``cpu_ram_efficient_loading``) holds only the shard and one tensor in flight.
  On one card or with DDP, the model is loaded as it trains, one tensor in flight.
* saving: a full state dict gathered on the card (FSDP's ``FULL_STATE_DICT``
  without ``offload_to_cpu``, ``get_model_state_dict(full_state_dict=True)``
  without ``cpu_offload``) holds the whole model next to the training state;
  with ``cpu_offload=True`` one gathered tensor at a time; a sharded save
  (``torch.distributed.checkpoint``) gathers nothing. Gathering the full
  optimizer state as well would add the whole optimizer state: not figured, said.
  On one card or with DDP ``state_dict()`` returns views: nothing is copied on the card.
  Under DeepSpeed ZeRO-3 a full save gathers the module's 16-bit weights (the
  compute dtype, not the fp32 masters): ``save_16bit_model`` with
  ``stage3_gather_16bit_weights_on_model_save`` gathers one module at a time
  and copies it to host memory; gathering every parameter at once
  (``GatheredParameters(model.parameters())`` then ``state_dict()``) holds the
  whole 16-bit model; ``save_checkpoint`` writes each rank's partitions and
  gathers nothing. Under ZeRO-2 the module is whole on every card: views again.
* evaluation: ``torch.no_grad()``: the weights and optimizer state stay on
  the card, no activations are kept, one layer's forward runs at a time,
  and the logits of the evaluation micro-batch are made (in the compute
  dtype, their fp32 copy and the fp32 log-softmax of the loss). Under FSDP
  the root and two layers are gathered; under ZeRO-3 the layers in flight with
  the prefetch bucket and the head, as in the step's forward.

Under ZeRO the training state at rest also holds the fp32 master partition
(unless the optimizer is offloaded) and, under ZeRO-3, the reduce bucket
allocated at start-up and the persistent parameters kept gathered. Loading
comes before ``deepspeed.initialize``: no masters or optimizer state exist yet.

Pure arithmetic (no torch): the inputs come from the analytic estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 10**9


@dataclass(frozen=True)
class Resting:
    """What the training state holds per device between steps, and the sizes the other moments need.

    ``weights`` and ``optimizer``: per device, as in the step (sharded under
    FSDP/ZeRO-3). ``full_weights``: the whole model as stored for training,
    unsharded. ``largest_tensor``: the largest parameter tensor as stored.
    ``gathered_layer`` / ``gathered_root``: FSDP's unsharded decoder layer and
    root (embedding, head), 0 without FSDP.

    DeepSpeed ZeRO (0 otherwise): ``master``: the fp32 master partition on the
    card. ``resident``: ZeRO-3's reduce bucket and persistent parameters, held
    at every moment. ``gathered_eval``: what a ZeRO-3 forward gathers besides
    (layers in flight, the prefetch bucket, the head). ``saved_full`` /
    ``saved_largest``: the whole model and its largest tensor as a full save
    writes them (ZeRO: the module's 16-bit weights); None: ``full_weights`` /
    ``largest_tensor``.
    """

    weights: float
    optimizer: float
    full_weights: float
    largest_tensor: float
    gathered_layer: float = 0.0
    gathered_root: float = 0.0
    master: float = 0.0
    resident: float = 0.0
    gathered_eval: float = 0.0
    saved_full: float | None = None
    saved_largest: float | None = None


@dataclass(frozen=True)
class OtherPeak:
    moment: str  # loading | saving | evaluation
    how: str  # the way of doing it this figure is for
    bytes: int  # live tensor bytes per device
    avoid: str = ""  # what keeps the figure down, when there is a lower way

    def to_json(self, step_live: int) -> dict:
        return {"moment": self.moment, "how": self.how, "bytes": self.bytes, "higher_than_step": self.bytes > step_live,
                "avoid": self.avoid}


def other_peaks(*, sharded: bool, gpus: int, resting: Resting, tokens_eval: int, vocab: int, hidden: int,
                intermediate: int, compute: int, deepspeed: str = "") -> tuple[OtherPeak, ...]:
    """Every moment's figure. ``sharded``: FSDP or ZeRO-3 over ``gpus`` cards; ``tokens_eval``: evaluation
    micro-batch x sequence length; ``compute``: bytes per element of the compute dtype; ``deepspeed``:
    ``zero3`` for DeepSpeed's ways of saving, else empty."""
    r = resting
    at_rest = r.weights + r.optimizer + r.master + r.resident
    full = r.full_weights if r.saved_full is None else r.saved_full
    largest = r.largest_tensor if r.saved_largest is None else r.saved_largest
    peaks = []
    if sharded and gpus > 1:
        peaks.append(OtherPeak("loading", "every rank loads the whole model onto its card, then shards it",
                               round(r.full_weights + r.largest_tensor / gpus),
                               "initialise on the meta device (or load on rank 0 in host memory) and broadcast "
                               "the shards"))
        peaks.append(OtherPeak("loading", "meta-device initialisation, or rank 0 loads in host memory and "
                                          "broadcasts the shards", round(r.weights + r.largest_tensor)))
    else:
        peaks.append(OtherPeak("loading", "the model loaded as it trains, one tensor in flight",
                               round(r.weights + r.largest_tensor)))
    if deepspeed == "zero3":
        peaks.append(OtherPeak("saving", "every parameter gathered at once on the card in 16 bits "
                                         "(GatheredParameters over the model), then state_dict()",
                               round(at_rest + full),
                               "save with save_16bit_model (stage3_gather_16bit_weights_on_model_save), one module "
                               "at a time, or save the partitions with save_checkpoint"))
        peaks.append(OtherPeak("saving", "16-bit state dict gathered module by module to host memory "
                                         "(save_16bit_model, stage3_gather_16bit_weights_on_model_save)",
                               round(at_rest + largest)))
        peaks.append(OtherPeak("saving", "sharded checkpoint (save_checkpoint): nothing gathered", round(at_rest)))
    elif sharded and gpus > 1:
        peaks.append(OtherPeak("saving", "full state dict gathered on the card (no CPU offload)",
                               round(at_rest + full),
                               "gather with cpu_offload=True (offload_to_cpu), or save sharded with "
                               "torch.distributed.checkpoint"))
        peaks.append(OtherPeak("saving", "full state dict gathered tensor by tensor to host memory "
                                         "(cpu_offload=True)", round(at_rest + largest)))
        peaks.append(OtherPeak("saving", "sharded checkpoint (torch.distributed.checkpoint): nothing gathered",
                               round(at_rest)))
    else:
        peaks.append(OtherPeak("saving", "state_dict() returns views: nothing is copied on the card",
                               round(at_rest)))
    # Evaluation: the logits in the compute dtype, their fp32 copy and the loss's fp32 log-softmax; one layer's
    # forward in flight (its input and output, the MLP's gate and up projections and their product).
    logits = tokens_eval * vocab * (compute + 4 + 4)
    layer = tokens_eval * (2 * hidden + 3 * intermediate) * compute
    gathered = r.gathered_root + 2 * r.gathered_layer + r.gathered_eval
    peaks.append(OtherPeak("evaluation", f"no_grad forward of {tokens_eval} tokens (logits, one layer in flight)",
                           round(at_rest + gathered + logits + layer),
                           "evaluate with a smaller micro-batch, or free the optimizer state first"))
    return tuple(peaks)


def warnings(peaks: tuple[OtherPeak, ...], step_live: int) -> tuple[str, ...]:
    """A sentence for each moment higher than the step (live bytes against live bytes)."""
    out = []
    for p in peaks:
        if p.bytes > step_live:
            out.append(f"Higher than the training step: {p.moment} ({p.how}) needs {p.bytes / GB:.1f} GB of live "
                       f"tensors per card, the step {step_live / GB:.1f} GB"
                       + (f"; to avoid it: {p.avoid}." if p.avoid else "."))
    return tuple(out)
