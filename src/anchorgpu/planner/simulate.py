"""The simulation engine: peak memory of one real training step, run on tensors without memory.

``simulate(spec, setup)`` builds the transformers model of ``spec`` on the
meta device (with peft LoRA and gradient checkpointing as the setup asks),
then, under ``FakeTensorMode``, gives it parameters, creates the
optimizer's state (one optimizer step on zero gradients; under DDP and
FSDP a whole unmeasured step, which also builds their buckets and
buffers) and runs one measured step: forward on
random token ids ``[micro_batch, seq_len]`` with the same ids as labels, the
model's own loss, backward, the foreach optimizer's step and
``zero_grad(set_to_none=True)``. ``StorageTracker`` counts the live storage
bytes of every operator's outputs, so the peak comes from the operators a
GPU would run; no memory is allocated, so a 70B step runs on a laptop.

``measure_step(..., fake=False)`` runs the same step on real CPU tensors
with the same tracker: the tests hold the two to the byte.

The model is built from the config it was read from (``hf_build.hf_config``).
A deep model is not simulated whole: ``simulate`` (``layers="auto"``)
simulates a few layers of each kind with the ends and extrapolates, exactly
(``layer_sample.py``); ``layers="whole"`` simulates every layer, and the
result says which was done. MoE layers run transformers' grouped expert
products with a balanced routing under fake tensors (``moe_routing.py``).

These are live tensor bytes. What a GPU adds (CUDA context, workspaces,
allocator fragmentation, NCCL buffers) is the analytic engine's
``Reserve``, added on top. DDP adds its gradient buckets (a flat copy of
the gradients, ``gradient_as_bucket_view=False`` being DDP's default):
computed, not simulated, as the analytic engine does.

FSDP (full shard, FSDP2 ``fully_shard`` on each decoder layer, then the
root) is simulated as rank 0 of a fake process group of ``setup.gpus``
ranks: the collectives only produce their outputs, so the step's own
tensors are those of a real rank (the tests and the benchmark hold it to
a real run over 2 gloo processes, to the byte). Categories: sharded
parameters, FSDP's unsharded (all-gathered) parameters and its all-gather
buffers are weights; unsharded gradients, their reduce-dtype copies, the
reduce-scatter buffers and the sharded gradients are gradients. What a
collective allocates for itself (gloo's copy of a reduce-scatter's input;
NCCL's buffers on a GPU) is not counted: the reserve's NCCL allowance.

Requires the ``ml`` extra (torch, transformers, peft); imported only on
demand, so the rest of the planner stays pure Python.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .analytic import Breakdown, Reserve
from .errors import PlannerInputError
from .hf_build import auto_config, build_meta_model, hf_config, not_simulated
from .measured import MeasuredSteps, Measurement, measured_setup, to_breakdown
from .model_spec import ModelSpec
from .moe_routing import balanced_routing, experts_modules, grouped_products_on_fake_tensors, imbalance_allowance
from .progress import Progress
from .setup import TrainingSetup
from .tracker import StorageTracker

DEFAULT_RESERVE = Reserve()


LAYER_MODES = ("auto", "sampled", "whole")


@dataclass(frozen=True)
class Simulation:
    breakdown: Breakdown
    measurement: Measurement
    layers: str = "whole"  # how the layers were simulated: "whole" (every layer) or "sampled" (layer_sample.py)

    @property
    def seconds(self) -> float:
        return self.measurement.seconds


def simulate(spec: ModelSpec, setup: TrainingSetup, *, device: str = "cpu", reserve: Reserve = DEFAULT_RESERVE,
             progress: Callable[[Progress], None] | None = None, layers: str = "auto") -> Simulation:
    """Peak memory per device of one step of ``spec`` under ``setup``, from a simulated step.

    ``layers``: ``"whole"`` simulates every layer; ``"sampled"`` a few layers of each kind, extrapolated
    (``layer_sample.py``); ``"auto"`` (default) samples when that simulates fewer layers than the model has."""
    if device != "cpu":
        raise PlannerInputError("device", "the simulation runs on the CPU's operators (a CPU-only torch "
                                          f"cannot simulate “{device}”); use device='cpu'.")
    measured = measure_step(spec, setup, fake=True, progress=progress, layers=layers)
    return Simulation(breakdown=to_breakdown(measured, setup, reserve, spec), measurement=measured,
                      layers=layers_used(measured))


def layers_used(measured: Measurement) -> str:
    """How a measurement's layers were simulated: "sampled" (extrapolated, its first note says from what) or
    "whole"."""
    return "sampled" if any(n.startswith("per-layer simulation") for n in measured.notes) else "whole"


def simulate_steps(spec: ModelSpec, setup: TrainingSetup, card_counts=(1,), *,
                   progress: Callable[[Progress], None] | None = None, layers: str = "auto") -> MeasuredSteps:
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
        cards = 1 if parallel == "single" else gpus
        say(Progress("step", number, len(needed), cards))
        steps.add(measure_step(spec, step, fake=True, layers=layers,
                               progress=lambda what, _n=number: say(what.within(_n, len(needed)))))
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
                 progress: Callable[[Progress], None] | None = None, distributed: bool = False,
                 layers: str = "whole") -> Measurement:
    """Tracks the live bytes of one steady-state step, on fake tensors or on real CPU tensors.

    Without ``distributed``, a single-device or DDP setup measures the
    single-device step (DDP's buckets are computed from it, see
    ``measured.py``), and an FSDP setup over N cards runs FSDP2 on a fake
    process group of world size N as rank 0, created here and destroyed on
    return (so calls for 2, 4 and 8 cards can follow one another). A process
    that already has a default process group is refused: the fake group
    would have to replace it.

    With ``distributed=True`` the caller runs one process per rank and has
    initialised the default process group (world size ``setup.gpus``); the
    step runs on it: wrapped in ``DistributedDataParallel`` (default options)
    for DDP, sharded with ``fully_shard`` for FSDP. This is the real
    reference the benchmark and the tests hold the fake FSDP step to.

    ``layers`` (see ``simulate``): ``"whole"`` (default here: every layer), ``"sampled"`` or ``"auto"``.
    """
    setup.validate(spec)
    refused = not_simulated(setup)
    if refused is not None:
        raise PlannerInputError(*refused)
    if layers not in LAYER_MODES:
        raise PlannerInputError("layers", f"layers is one of {', '.join(LAYER_MODES)}, not “{layers}”.")
    say = progress or (lambda _message: None)
    if distributed:
        _check_process_group(setup)
        return _measure_layers(spec, setup, fake=fake, seed=seed, say=say, parallel=setup.parallel, layers=layers)
    if setup.parallel == "fsdp":
        if not fake:
            raise PlannerInputError("parallel", "a real FSDP step needs one process per card: initialise the "
                                                "process group in each and pass distributed=True.")
        with _fake_process_group(setup.gpus):
            return _measure_layers(spec, setup, fake=fake, seed=seed, say=say, parallel="fsdp", layers=layers)
    return _measure_layers(spec, setup, fake=fake, seed=seed, say=say, parallel="single", layers=layers)


def _measure_layers(spec: ModelSpec, setup: TrainingSetup, *, fake: bool, seed: int,
                    say: Callable[[Progress], None], parallel: str, layers: str) -> Measurement:
    """The whole model's step, measured whole or extrapolated from sampled models (``layer_sample.py``)."""
    if layers == "whole":
        return _measure(spec, setup, fake=fake, seed=seed, say=say, parallel=parallel)
    from . import layer_sample

    started = time.perf_counter()
    config = hf_config(spec)
    full = auto_config(config)
    try:
        plan = layer_sample.plan_layers(_plain_meta_model(full), fsdp=parallel == "fsdp")
    except LookupError:
        return _whole(spec, setup, fake=fake, seed=seed, say=say, parallel=parallel,
                      why="its layers are not at model.layers")
    if layers == "auto" and plan.simulated_layers >= len(plan.sequence):
        return _measure(spec, setup, fake=fake, seed=seed, say=say, parallel=parallel)
    results, notes = [], []
    reduced_configs = [layer_sample.reduced_config(config, full, indices) for indices in plan.runs]
    for indices, reduced in zip(plan.runs, reduced_configs, strict=True):
        if not plan.keeps_kinds(indices, _plain_meta_model(auto_config(reduced))):
            return _whole(spec, setup, fake=fake, seed=seed, say=say, parallel=parallel,
                          why="a config cut to fewer layers does not keep its layers' kinds")
    for reduced in reduced_configs:
        detail: dict = {}
        measured = _measure(spec, setup, fake=fake, seed=seed, parallel=parallel, config=reduced, detail=detail,
                            say=say)
        results.append((dict(measured.phases), detail["phase_totals"], measured.trainable_bytes))
        notes = [n for n in measured.notes if not n.startswith("per-layer")]
    phases, categories, trainable = layer_sample.extrapolate(plan, results)
    phase = max(phases, key=phases.get)
    order = [label for label, _v in results[0][0].items() if label in phases]
    return Measurement(peak=phases[phase], categories=categories[phase], phase=phase,
                       phases=tuple((label, phases[label]) for label in order),
                       seconds=time.perf_counter() - started, fake=fake, trainable_bytes=trainable,
                       parallel=parallel, gpus=setup.gpus if parallel != "single" else 1,
                       notes=(plan.describe() + ".",) + tuple(notes))


def _whole(spec: ModelSpec, setup: TrainingSetup, *, why: str, **kwargs) -> Measurement:
    """The whole model's step, saying why the layers could not be sampled."""
    measured = _measure(spec, setup, **kwargs)
    return dataclasses.replace(measured, notes=measured.notes + (
        f"Every layer simulated: the layers could not be sampled ({why}).",))


def _plain_meta_model(hf_object) -> torch.nn.Module:
    """The model of a config on the meta device, as transformers builds it (no LoRA): for its layers' kinds."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(hf_object)


def _measure(spec: ModelSpec, setup: TrainingSetup, *, fake: bool, seed: int, say: Callable[[Progress], None],
             parallel: str, config: dict | None = None, detail: dict | None = None) -> Measurement:
    started = time.perf_counter()
    fsdp = parallel == "fsdp"
    cards = setup.gpus if fsdp else 1
    say(Progress("build", cards=cards))
    notes: list[str] = []
    model = build_meta_model(spec, setup, config=config, notes=notes)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    torch.manual_seed(seed)
    tracker = StorageTracker()
    if setup.grad_checkpointing:
        _tag_checkpoint_inputs(model, tracker)
    if fsdp:
        say(Progress("shard", cards=cards))
        _shard(base, setup, tracker)
    routing = contextlib.ExitStack()
    if fake:
        from torch._subclasses.fake_tensor import FakeTensorMode
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        if experts_modules(model):
            routing.enter_context(balanced_routing(model))
            routing.enter_context(grouped_products_on_fake_tensors())
    else:
        mode = contextlib.nullcontext()
    # bf16_mixed: autocast on one device or under DDP; under FSDP the mixed-precision policy casts instead.
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if setup.precision == "bf16_mixed" and not fsdp
                else contextlib.nullcontext())

    def pack(tensor):
        tracker.tag([tensor], "activations", only_from="temporaries")
        return tensor

    with routing, _unpacked_sequences(), mode, tracker:
        say(Progress("place", cards=cards))
        model.to_empty(device="cpu")
        if not fsdp:  # FSDP keeps tied parameters one object through to_empty (see _shard)
            base.tie_weights()
        with torch.no_grad():
            for param in model.parameters():
                _local(param).normal_(0.0, 0.02)
        runner = model
        if parallel == "ddp":
            from torch.nn.parallel import DistributedDataParallel
            runner = DistributedDataParallel(model)  # defaults: 25 MB buckets, gradient_as_bucket_view=False
        tracker.tag(list(model.parameters()) + list(model.buffers()), "weights")
        trainable = [p for p in model.parameters() if p.requires_grad]
        if not fsdp:  # FSDP assigns the sharded gradients itself, without autograd's accumulation
            for param in trainable:
                param.register_post_accumulate_grad_hook(lambda p: tracker.tag([p.grad], "gradients"))
        optimizer = _OPTIMIZERS[setup.optimizer](trainable)
        ids = torch.randint(0, spec.vocab_size, (setup.micro_batch, setup.seq_len))
        tracker.tag([ids], "activations")

        # Gradient accumulation: from the second micro-batch on, every gradient is alive through forward and
        # backward, and each later micro-batch repeats the second's bytes, so two stand for any number. Under
        # FSDP the first keeps its unsharded gradients (no reduce-scatter: set_requires_gradient_sync(False),
        # what Accelerate's no_sync does for FSDP2), the last reduces them.
        micro_batches = min(int(getattr(setup, "grad_accumulation", 1) or 1), 2)

        def step():
            for number in range(micro_batches):
                if fsdp and micro_batches > 1:
                    base.set_requires_gradient_sync(number == micro_batches - 1)
                sync = (runner.no_sync() if parallel == "ddp" and number < micro_batches - 1
                        else contextlib.nullcontext())
                with sync:
                    tracker.label = "forward"
                    with autocast, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                        loss = runner(input_ids=ids, labels=ids).loss
                    tracker.label = "backward"
                    loss.backward()
                    del loss
                tracker.tag([p.grad for p in trainable if p.grad is not None], "gradients")
            tracker.label = "optimizer step"
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        say(Progress("warmup", cards=cards))
        if parallel == "single":
            # The warm-up only has to leave the optimizer's state behind: one optimizer step on zero gradients
            # creates it as a full step would (same tensors), at a fraction of the time. DDP and FSDP build
            # their buckets and buffers in the first forward and backward, so they run a full step.
            for param in trainable:
                param.grad = torch.zeros_like(param)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        else:
            step()
        tracker.label = ""
        tracker.tag([list(state.values()) for state in optimizer.state.values()], "optimizer")
        if fsdp:
            _tag_fsdp_buffers(base, tracker)
        tracker.reset_peak()
        tracker.clear_phases()
        say(Progress("measure", cards=cards))
        step()
        tracker.check()
    seconds = time.perf_counter() - started
    if detail is not None:
        detail["phase_totals"] = {label: dict(totals) for label, (totals, _seq) in tracker.phase_totals.items()}
    allowance = imbalance_allowance(model.config, setup.micro_batch * setup.seq_len,
                                    4 if setup.precision == "fp32" else 2) if experts_modules(model) else None
    if allowance is not None:
        notes.append(allowance[1])
    return Measurement(peak=tracker.peak, categories=dict(tracker.peak_totals), phase=tracker.peak_label,
                       phases=tuple(tracker.phase_peaks.items()), seconds=seconds, fake=fake,
                       trainable_bytes=sum(_local(p).numel() * p.element_size() for p in trainable),
                       parallel=parallel, gpus=setup.gpus if parallel != "single" else 1, notes=tuple(notes))


def _local(param: torch.Tensor) -> torch.Tensor:
    """This rank's part of a parameter: the local shard of an FSDP2 (DTensor) parameter, else the parameter."""
    return param.to_local() if hasattr(param, "to_local") else param


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


# -- FSDP2 --------------------------------------------------------------------------------------------------

def _check_process_group(setup: TrainingSetup) -> None:
    import torch.distributed as dist

    if setup.parallel == "single":
        raise PlannerInputError("parallel", "distributed=True measures a DDP or FSDP step, not a single-device one.")
    if not dist.is_initialized() or dist.get_world_size() != setup.gpus:
        raise PlannerInputError("gpus", f"distributed=True needs the default process group initialised with "
                                        f"world size {setup.gpus}.")


@contextlib.contextmanager
def _fake_process_group(world_size: int):
    """A default process group of ``world_size`` ranks whose collectives only produce their outputs (this is
    rank 0): what FSDP2 needs to shard and to run a step in one process. Destroyed on exit."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise PlannerInputError("parallel", "this process already has a default process group; the FSDP "
                                            "simulation creates its own fake one: run it in another process, or "
                                            "measure on the existing group with distributed=True.")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _shard(base: torch.nn.Module, setup: TrainingSetup, tracker: StorageTracker) -> None:
    """FSDP2 full shard of the meta model: each decoder layer, then the root (embedding, final norm, head).

    bf16_mixed uses FSDP2's ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``: fp32 sharded
    parameters (the master copy), gathered and computed on in bf16, gradients reduced in fp32 -- what the
    analytic engine assumes (``activation_dtypes``: no autocast under FSDP). The other precisions gather
    the parameters in their own dtype. ``reshard_after_forward`` keeps FSDP2's default: layers reshard
    after their forward, the root does not.
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if setup.precision == "bf16_mixed" else MixedPrecisionPolicy())
    for layer in base.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(base, mesh=mesh, mp_policy=policy)
    all_gather, reduce_scatter = _tagged_collectives(tracker)
    for module in base.modules():
        if hasattr(module, "set_custom_all_gather") and module._get_fsdp_state()._fsdp_param_group is not None:
            module.set_custom_all_gather(all_gather)
            module.set_custom_reduce_scatter(reduce_scatter)


def _tagged_collectives(tracker: StorageTracker):
    """FSDP2's default all-gather and reduce-scatter, with their flat buffers put in their category as they
    are allocated: an all-gather's buffer holds gathered weights, a reduce-scatter's gradients."""
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather, DefaultReduceScatter

    class AllGather(DefaultAllGather):
        def allocate(self, size, *, dtype, device):
            buffer = super().allocate(size, dtype=dtype, device=device)
            tracker.tag([buffer], "weights")
            return buffer

        def __call__(self, *args, **kwargs):
            with tracker.uncounted():  # the communication library's own buffers (see StorageTracker.uncounted)
                return super().__call__(*args, **kwargs)

    class ReduceScatter(DefaultReduceScatter):
        def allocate(self, size, *, dtype, device):
            buffer = super().allocate(size, dtype=dtype, device=device)
            tracker.tag([buffer], "gradients")
            return buffer

        def __call__(self, *args, **kwargs):
            with tracker.uncounted():
                return super().__call__(*args, **kwargs)

    return AllGather(), ReduceScatter()


def _tag_fsdp_buffers(base: torch.nn.Module, tracker: StorageTracker) -> None:
    """After the warm-up step: FSDP2 keeps each unsharded parameter's storage from step to step (empty while
    resharded); it holds gathered weights, and the unsharded gradients autograd leaves on it are gradients."""
    for module in base.modules():
        group = module._get_fsdp_state()._fsdp_param_group if hasattr(module, "_get_fsdp_state") else None
        for fsdp_param in group.fsdp_params if group is not None else ():
            tracker.tag(fsdp_param.all_gather_outputs, "weights")
            unsharded = getattr(fsdp_param, "_unsharded_param", None)
            if unsharded is not None and unsharded.requires_grad:
                unsharded.register_post_accumulate_grad_hook(lambda p: tracker.tag([p.grad], "gradients"))
