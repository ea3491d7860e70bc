"""The simulation engine: a step on fake tensors tracks exactly the bytes the same step on real tensors does."""

import resource
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

import torch  # noqa: E402

from anchorgpu.planner import PlannerInputError, TrainingSetup, preset_spec  # noqa: E402
from anchorgpu.planner.analytic import COMPONENTS  # noqa: E402
from anchorgpu.planner.hf_build import to_hf_config  # noqa: E402
from anchorgpu.planner.simulate import measure_step, simulate  # noqa: E402
from anchorgpu.planner.tracker import CATEGORIES, StorageTracker  # noqa: E402

CASES = [
    (model, method, checkpointing, precision)
    for model in ("tiny-llama", "tiny-qwen2", "tiny-gemma2")
    for method in ("full", "lora")
    for checkpointing in (False, True)
    for precision in ("fp32", "bf16", "bf16_mixed")
]


@pytest.mark.parametrize(("model", "method", "checkpointing", "precision"), CASES)
def test_the_simulated_peak_is_the_real_runs_to_the_byte(model, method, checkpointing, precision):
    spec = preset_spec(model)
    setup = TrainingSetup(method=method, grad_checkpointing=checkpointing, precision=precision,
                          seq_len=64, micro_batch=2)
    real = measure_step(spec, setup, fake=False)
    fake = measure_step(spec, setup, fake=True)
    assert fake.peak == real.peak
    assert fake.categories == real.categories
    assert fake.phases == real.phases and fake.phase == real.phase
    assert sum(fake.categories.values()) == fake.peak
    assert fake.categories["weights"] > 0 and fake.categories["optimizer"] > 0
    assert fake.categories["activations"] > 0


@pytest.mark.parametrize("optimizer", ["sgd", "sgd_momentum", "adafactor"])
def test_other_optimizers_match_too(optimizer):
    spec = preset_spec("tiny-llama")
    setup = TrainingSetup(optimizer=optimizer, precision="fp32", seq_len=32)
    real = measure_step(spec, setup, fake=False)
    fake = measure_step(spec, setup, fake=True)
    assert (fake.peak, fake.categories) == (real.peak, real.categories)
    assert (fake.categories["optimizer"] == 0) == (optimizer == "sgd")


def test_optimizer_state_is_what_adamw_keeps():
    spec = preset_spec("tiny-llama")
    setup = TrainingSetup(method="lora", precision="fp32", seq_len=32)
    fake = measure_step(spec, setup, fake=True)
    from anchorgpu.planner import trainable_parameters
    n = trainable_parameters(spec, setup)
    tensors = 2 * spec.num_layers * len(setup.lora_targets)  # lora_A and lora_B per target per layer
    assert fake.categories["optimizer"] == 2 * 4 * n + 4 * tensors  # exp_avg, exp_avg_sq, fp32 step scalars


def test_the_breakdown_adds_up_with_the_reserve():
    spec = preset_spec("tiny-qwen2")
    setup = TrainingSetup(method="lora", seq_len=64, parallel="ddp", gpus=2)
    result = simulate(spec, setup)
    b = result.breakdown
    assert set(b.components()) == set(COMPONENTS)
    assert b.peak == sum(b.components().values())
    # DDP's buckets are allocated tensors: counted with the gradients, on top of the simulated single step
    assert b.live == result.measurement.peak + result.measurement.ddp_buckets
    assert sum(bytes_ for c, _w, bytes_ in b.parts if c == "reserve") == b.reserve
    assert ("gradients", "DDP gradient buckets") in {(c, w) for c, w, _b in b.parts}
    assert b.live < b.allocated_peak_bytes <= b.reserved_peak_bytes < b.device_used_bytes == b.peak
    assert result.seconds > 0


def test_the_tracker_counts_storages_once_and_frees_them():
    with StorageTracker() as tracker:
        x = torch.empty(1000)  # 4000 bytes
        view = x[10:]
        x.add_(1)
        assert tracker.current == 4000
        tracker.tag([view], "weights")
        assert tracker.totals["weights"] == 4000
        y = torch.empty(500)
        del y
        assert tracker.current == 4000 and tracker.peak == 6000
        del x, view
        assert tracker.current == 0
    assert sum(tracker.peak_totals.values()) == tracker.peak
    assert set(tracker.totals) == set(CATEGORIES)


def test_hf_config_keeps_the_shape():
    from anchorgpu.planner import model_spec_from_config
    for name in ("tiny-llama", "tiny-qwen2", "tiny-gemma2", "llama-3.1-70b", "gemma-2-9b", "mistral-7b-v0.3"):
        spec = preset_spec(name)
        again = model_spec_from_config(to_hf_config(spec), name=spec.name)
        assert again == spec


@pytest.mark.parametrize(("field", "changes"), [
    ("optimizer", {"optimizer": "adamw8bit"}),
    ("method", {"method": "qlora"}),
])
def test_what_cannot_be_simulated_says_so(field, changes):
    with pytest.raises(PlannerInputError) as error:
        simulate(preset_spec("tiny-llama"), TrainingSetup(seq_len=32, **changes))
    assert error.value.field == field
    assert "analytic engine" in error.value.message


def test_a_simulated_billion_parameter_step_allocates_nothing():
    # In a fresh process, so the RSS growth is this run's alone: a Llama-3.2-1B full fine-tune in fp32
    # with AdamW would need ~20 GB of real memory.
    code = ("import resource, sys\n"
            "from anchorgpu.planner import TrainingSetup, preset_spec\n"
            "from anchorgpu.planner.simulate import measure_step\n"
            "import torch, transformers, peft\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "m = measure_step(preset_spec('llama-3.2-1b'), TrainingSetup(precision='fp32', seq_len=512))\n"
            "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "print(m.peak, (after - before) * 1024)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    peak, growth = map(int, done.stdout.split())
    assert peak > 16 * 1024**3
    assert growth < 400 * 1024**2, f"RSS grew by {growth / 1024**2:.0f} MiB"
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 < 1.5 * 1024**3
