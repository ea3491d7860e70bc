"""The simulation engine: peak memory of one real training step, run on tensors without memory.

``simulate(spec, setup)`` builds the transformers model of ``spec`` on the
meta device (with peft LoRA and gradient checkpointing as the setup asks),
then, under ``FakeTensorMode``, gives it parameters, runs one unmeasured
step (the optimizer creates its state) and one measured step: forward on
random token ids ``[micro_batch, seq_len]`` with the same ids as labels, the
model's own loss, backward, the foreach optimizer's step and
``zero_grad(set_to_none=True)``. ``StorageTracker`` counts the live storage
bytes of every operator's outputs, so the peak comes from the operators a
GPU would run; no memory is allocated, so a 70B step runs on a laptop.

``measure_step(..., fake=False)`` runs the same step on real CPU tensors
with the same tracker: the tests hold the two to the byte.

These are live tensor bytes. What a GPU adds (CUDA context, workspaces,
allocator fragmentation, NCCL buffers) is the analytic engine's
``Reserve``, added on top. DDP adds its gradient buckets (a flat copy of
the gradients, ``gradient_as_bucket_view=False`` being DDP's default):
computed, not simulated, as the analytic engine does. FSDP is not
simulated yet.

Requires the ``ml`` extra (torch, transformers, peft); imported only on
demand, so the rest of the planner stays pure Python.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Callable

import torch

from .analytic import Breakdown, Reserve
from .errors import PlannerInputError
from .hf_build import build_meta_model
from .measured import Measurement, MeasuredSteps, measured_setup, to_breakdown
from .model_spec import ModelSpec
from .setup import TrainingSetup
from .tracker import StorageTracker

DEFAULT_RESERVE = Reserve()


@dataclass(frozen=True)
class Simulation:
    breakdown: Breakdown
    measurement: Measurement

    @property
    def seconds(self) -> float:
        return self.measurement.seconds


def simulate(spec: ModelSpec, setup: TrainingSetup, *, device: str = "cpu", reserve: Reserve = DEFAULT_RESERVE,
             progress: Callable[[str], None] | None = None) -> Simulation:
    """Peak memory per device of one step of ``spec`` under ``setup``, from a simulated step."""
    if device != "cpu":
        raise PlannerInputError("device", "the simulation runs on the CPU's operators (a CPU-only torch "
                                          f"cannot simulate “{device}”); use device='cpu'.")
    measured = measure_step(spec, setup, fake=True, progress=progress)
    return Simulation(breakdown=to_breakdown(measured, setup, reserve), measurement=measured)


def simulate_steps(spec: ModelSpec, setup: TrainingSetup, card_counts=(1,), *,
                   progress: Callable[[str], None] | None = None) -> MeasuredSteps:
    """The measured steps that price ``setup`` on each of ``card_counts``: one single-device step serves one card
    and DDP on any number; FSDP needs one step per number of cards. Each distinct step is simulated once."""
    from .recommend import setup_for_cards

    say = progress or (lambda _message: None)
    needed = {}
    for cards in sorted(set(card_counts)):
        step = measured_setup(setup_for_cards(setup, cards))
        needed.setdefault((step.parallel, step.gpus), step)
    steps = MeasuredSteps()
    for number, ((parallel, gpus), step) in enumerate(sorted(needed.items()), start=1):
        where = "one card" if parallel == "single" else f"FSDP over {gpus} cards"
        say(f"step {number} of {len(needed)}: {where}")
        steps.add(measure_step(spec, step, fake=True, progress=lambda what, _where=where: say(f"{_where}: {what}")))
    return steps


_OPTIMIZERS = {
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-5, foreach=True),
    "sgd": lambda params: torch.optim.SGD(params, lr=1e-3, foreach=True),
    "sgd_momentum": lambda params: torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True),
    "adafactor": lambda params: torch.optim.Adafactor(params, lr=1e-3, foreach=True),
}


@contextlib.contextmanager
def _unpacked_sequences():
    """transformers treats fake tensors as tracing and would build a packed-sequence mask a real run never
    builds; our sequences are never packed, so the fake run skips it too (after the same operators)."""
    from torch._subclasses.fake_tensor import FakeTensor
    from transformers import masking_utils

    original = masking_utils.find_packed_sequence_indices

    def find(position_ids):
        found = original(position_ids)
        return None if isinstance(found, FakeTensor) else found

    masking_utils.find_packed_sequence_indices = find
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = original


def measure_step(spec: ModelSpec, setup: TrainingSetup, *, fake: bool = True, seed: int = 0,
                 progress: Callable[[str], None] | None = None) -> Measurement:
    """Tracks the live bytes of one steady-state step, on fake tensors or on real CPU tensors."""
    setup.validate(spec)
    if setup.parallel == "fsdp":
        raise PlannerInputError("parallel", "FSDP simulation is not available yet; use the analytic engine.")
    say = progress or (lambda _message: None)
    started = time.perf_counter()
    say("building the model on the meta device")
    model = build_meta_model(spec, setup)
    torch.manual_seed(seed)
    tracker = StorageTracker()
    if setup.grad_checkpointing:
        _tag_checkpoint_inputs(model, tracker)

    if fake:
        from torch._subclasses.fake_tensor import FakeTensorMode
        mode = FakeTensorMode(allow_non_fake_inputs=True)
    else:
        mode = contextlib.nullcontext()
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if setup.precision == "bf16_mixed"
                else contextlib.nullcontext())

    def pack(tensor):
        tracker.tag([tensor], "activations", only_from="temporaries")
        return tensor

    with _unpacked_sequences(), mode, tracker:
        say("placing the parameters")
        model.to_empty(device="cpu")
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        base.tie_weights()
        with torch.no_grad():
            for param in model.parameters():
                param.normal_(0.0, 0.02)
        tracker.tag(list(model.parameters()) + list(model.buffers()), "weights")
        trainable = [p for p in model.parameters() if p.requires_grad]
        for param in trainable:
            param.register_post_accumulate_grad_hook(lambda p: tracker.tag([p.grad], "gradients"))
        optimizer = _OPTIMIZERS[setup.optimizer](trainable)
        ids = torch.randint(0, spec.vocab_size, (setup.micro_batch, setup.seq_len))
        tracker.tag([ids], "activations")

        def step():
            tracker.label = "forward"
            with autocast, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = model(input_ids=ids, labels=ids).loss
            tracker.label = "backward"
            loss.backward()
            del loss
            tracker.label = "optimizer step"
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        say("warm-up step (creates the optimizer state)")
        step()
        tracker.label = ""
        tracker.tag([list(state.values()) for state in optimizer.state.values()], "optimizer")
        tracker.reset_peak()
        tracker.phase_peaks.clear()
        say("measured step")
        step()
        tracker.check()
    seconds = time.perf_counter() - started
    return Measurement(peak=tracker.peak, categories=dict(tracker.peak_totals), phase=tracker.peak_label,
                       phases=tuple(tracker.phase_peaks.items()), seconds=seconds, fake=fake,
                       trainable_bytes=sum(p.numel() * p.element_size() for p in trainable),
                       parallel="fsdp" if setup.parallel == "fsdp" else "single",
                       gpus=setup.gpus if setup.parallel == "fsdp" else 1)


def _tag_checkpoint_inputs(model: torch.nn.Module, tracker: StorageTracker) -> None:
    """A checkpointed layer keeps its inputs for the recomputation: they count as activations."""
    for module in model.modules():
        function = getattr(module, "_gradient_checkpointing_func", None)
        if function is None or getattr(module, "gradient_checkpointing", False) is False:
            continue

        def wrapped(fn, *args, _function=function, **kwargs):
            tracker.tag([a for a in args if isinstance(a, torch.Tensor)], "activations", only_from="temporaries")
            return _function(fn, *args, **kwargs)

        module._gradient_checkpointing_func = wrapped
