"""FSDP2 in the simulation engine: a fake process group's step tracks exactly the bytes a real one does."""

import json
import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

import torch.distributed as dist  # noqa: E402

from anchorgpu.planner import PlannerInputError, TrainingSetup, estimate, preset_spec  # noqa: E402
from anchorgpu.planner.simulate import measure_step  # noqa: E402

CASES = [  # (model, setup keywords): full fp32; LoRA under the mixed-precision policy, with tied embeddings
    ("tiny-llama", {"precision": "fp32", "seq_len": 64, "micro_batch": 2}),
    ("tiny-qwen2", {"method": "lora", "precision": "bf16_mixed", "grad_checkpointing": True, "seq_len": 64}),
]

# One rank of the real runs: a gloo group of 2 processes, then every case's real FSDP step.
RANK = """
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import torch, torch.distributed as dist
from anchorgpu.planner import TrainingSetup, preset_spec
from anchorgpu.planner.simulate import measure_step
torch.set_num_threads(1)
dist.init_process_group("gloo", rank=int(sys.argv[1]), world_size=2)
out = []
for model, kw in json.loads(sys.argv[2]):
    m = measure_step(preset_spec(model), TrainingSetup(parallel="fsdp", gpus=2, **kw), fake=False, distributed=True)
    out.append([m.peak, m.categories, m.phase, m.parallel, m.gpus])
dist.destroy_process_group()
print(json.dumps(out), flush=True)
# gloo's threads can abort the interpreter's own exit ("terminate called without an active exception"):
# the answer is out, so leave without running the C++ destructors.
os._exit(0)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_fake_fsdp_step_is_the_real_runs_to_the_byte():
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    ranks = [subprocess.Popen([sys.executable, "-c", RANK, str(rank), json.dumps(CASES)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(2)]
    outputs = [rank.communicate(timeout=240) for rank in ranks]
    for rank, (stdout, stderr) in zip(ranks, outputs):
        assert rank.returncode == 0, stderr[-3000:]
    real = [json.loads(stdout.splitlines()[-1]) for stdout, _err in outputs]
    for index, (model, kw) in enumerate(CASES):
        fake = measure_step(preset_spec(model), TrainingSetup(parallel="fsdp", gpus=2, **kw), fake=True)
        for rank in range(2):
            peak, categories, phase, parallel, gpus = real[rank][index]
            assert (fake.peak, dict(fake.categories), fake.phase) == (peak, categories, phase), (model, kw, rank)
            assert (parallel, gpus) == ("fsdp", 2)
        assert fake.categories["weights"] > 0


def test_repeated_calls_with_different_card_counts():
    spec, setup = preset_spec("tiny-llama"), TrainingSetup(precision="fp32", seq_len=32, parallel="fsdp")
    first, four, again = (measure_step(spec, setup.replace(gpus=n)) for n in (2, 4, 2))
    assert not dist.is_initialized()  # each call destroys its fake process group
    assert (again.peak, again.categories) == (first.peak, first.categories)
    assert (first.parallel, first.gpus, four.gpus) == ("fsdp", 2, 4)
    assert four.categories["optimizer"] < first.categories["optimizer"]  # sharded four ways, not two
    whole = measure_step(spec, setup.replace(parallel="single", gpus=1))
    assert first.trainable_bytes * 2 >= whole.trainable_bytes > first.trainable_bytes  # this rank's shards


@pytest.mark.parametrize("kw", [{"precision": "fp32"}, {"precision": "bf16_mixed", "grad_checkpointing": True},
                                {"method": "lora", "precision": "bf16"}])
def test_the_analytic_fsdp_estimate_agrees_with_the_simulation(kw):
    spec = preset_spec("tiny-llama")
    for gpus in (2, 4):
        setup = TrainingSetup(seq_len=128, micro_batch=2, parallel="fsdp", gpus=gpus, **kw)
        simulated = measure_step(spec, setup).peak
        assert abs(estimate(spec, setup).live - simulated) / simulated < 0.10, (kw, gpus)


def test_an_existing_process_group_is_refused_not_replaced(tmp_path):
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        setup = TrainingSetup(seq_len=32, parallel="fsdp", gpus=2)
        with pytest.raises(PlannerInputError) as error:
            measure_step(preset_spec("tiny-llama"), setup)
        assert error.value.field == "parallel"
        with pytest.raises(PlannerInputError):  # its world size is not the setup's
            measure_step(preset_spec("tiny-llama"), setup, fake=False, distributed=True)
        assert dist.is_initialized() and dist.get_world_size() == 1  # left as it was
    finally:
        dist.destroy_process_group()


def test_a_real_fsdp_step_needs_the_processes():
    with pytest.raises(PlannerInputError):
        measure_step(preset_spec("tiny-llama"), TrainingSetup(seq_len=32, parallel="fsdp", gpus=2), fake=False)
