"""The runner: each job in a child process, its answer stored; time limits, crashes and bad answers end as
failures with a reason, never as a job stuck in "running"."""

import sys

import pytest

from anchorgpu.planner.measured import MeasuredSteps
from anchorgpu.planner.presets import preset_spec
from anchorgpu.planner.setup import setup_from_mapping
from anchorgpu.simulations import runner
from anchorgpu.simulations.models import SimulationJob
from anchorgpu.simulations.services import job_submit

pytest.importorskip("torch")
pytestmark = pytest.mark.django_db
State = SimulationJob.State


def queue(setup=None, model=None):
    job, _ = job_submit(model_source=model or {"preset": "tiny-llama"}, model_label="tiny",
                        setup=setup or {"method": "lora", "seq_len": 32}, card_counts=[1, 2, 4])
    return job


def test_a_job_runs_in_a_child_process_and_stores_steps_that_price_every_card_count():
    job = queue()
    assert runner.run_next("test-runner") == State.DONE
    done = SimulationJob.objects.get(pk=job.pk)
    steps = MeasuredSteps.from_json(done.result)
    spec = preset_spec("tiny-llama")
    setup = setup_from_mapping(done.setup).validate(spec)
    one = steps(spec, setup)
    four = steps(spec, setup.replace(parallel="ddp", gpus=4))
    assert one.live == steps.measurements[("single", 1)].peak > 0
    assert four.peak > one.peak  # DDP's buckets and NCCL's allowance on top of the same step
    assert done.seconds > 0 and done.attempts == 1 and done.finished_at and done.progress == ""
    assert runner.run_next("test-runner") is None  # nothing left


def test_input_the_simulation_cannot_take_fails_with_its_reason():
    job = queue(model={"config": {"model_type": "bert", "hidden_size": 8}})
    assert runner.run_next("test-runner") == State.FAILED
    failed = SimulationJob.objects.get(pk=job.pk)
    assert failed.failure == "input" and "bert" in failed.error


def test_a_child_past_the_time_limit_is_stopped(monkeypatch):
    monkeypatch.setattr(runner, "_child_command", lambda: [sys.executable, "-c", "import time; time.sleep(60)"])
    job = queue()
    assert runner.run_next("test-runner", timeout=1) == State.FAILED
    failed = SimulationJob.objects.get(pk=job.pk)
    assert failed.failure == "timeout" and "longer than 1 s" in failed.error and failed.seconds < 30


@pytest.mark.parametrize("script", [
    "import sys; sys.exit(3)",  # dies
    "print('not json')",  # answers nonsense
    "print('{\"ok\": true, \"steps\": [{\"peak\": 1}]}')",  # answers with steps that do not read back
    "import os; os.abort()",  # killed by a signal
])
def test_a_crashing_or_garbled_child_fails_the_job_with_a_plain_reason(monkeypatch, script):
    monkeypatch.setattr(runner, "_child_command", lambda: [sys.executable, "-c", script])
    job = queue()
    assert runner.run_next("test-runner") == State.FAILED
    failed = SimulationJob.objects.get(pk=job.pk)
    assert failed.failure == "crashed" and "Traceback" not in failed.error and failed.error


def test_progress_lines_become_the_jobs_progress(monkeypatch):
    script = ("import sys, time, json; sys.stdin.read(); sys.stderr.write('progress: measured step\\n'); "
              "sys.stderr.flush(); time.sleep(1.5); print(json.dumps({'ok': False, 'failure': 'input', "
              "'error': 'stop here'}))")
    monkeypatch.setattr(runner, "_child_command", lambda: [sys.executable, "-c", script])
    seen = []
    real = runner.job_heartbeat

    def spy(job, name, progress=None):
        seen.append(progress)
        return real(job, name, progress)

    monkeypatch.setattr(runner, "job_heartbeat", spy)
    job = queue()
    assert runner.run_next("test-runner") == State.FAILED
    assert "measured step" in seen
    assert SimulationJob.objects.get(pk=job.pk).error == "stop here"


def test_an_fsdp_job_simulates_one_step_per_card_count():
    job = queue(setup={"method": "full", "seq_len": 32, "precision": "fp32", "parallel": "fsdp", "gpus": 2})
    assert runner.run_next("test-runner") == State.DONE
    steps = MeasuredSteps.from_json(SimulationJob.objects.get(pk=job.pk).result)
    assert set(steps.measurements) == {("single", 1), ("fsdp", 2), ("fsdp", 4)}
    spec = preset_spec("tiny-llama")
    setup = setup_from_mapping(job.setup).validate(spec)
    two, four = steps(spec, setup), steps(spec, setup.replace(gpus=4))
    assert four.weights < two.weights  # more cards, smaller shards
