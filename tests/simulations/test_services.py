"""Queueing rules of planner simulations: one job per request, limits, claims that never run a job twice."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from anchorgpu.simulations.models import SimulationJob
from anchorgpu.simulations.services import (
    MAX_ATTEMPTS, STALE_AFTER, SimulationRefused, job_claim, job_fail, job_finish, job_heartbeat, job_key,
    job_submit, jobs_purge_old, jobs_requeue_stale, queue_position)

pytestmark = pytest.mark.django_db
State = SimulationJob.State

SETUP = {"method": "lora", "seq_len": 32}
STEP = {"peak": 10, "categories": {"weights": 6, "gradients": 0, "optimizer": 0, "activations": 4, "temporaries": 0},
        "phase": "forward", "phases": [["forward", 10]], "seconds": 1.0, "fake": True, "trainable_bytes": 2,
        "parallel": "single", "gpus": 1, "notes": []}


def submit(setup=SETUP, requester="someone", model="tiny-llama"):
    return job_submit(model_source={"preset": model}, model_label=model, setup=setup, card_counts=[1, 2],
                      requester=requester)


def test_the_key_ignores_order_and_repeats_of_card_counts_but_not_the_setup():
    assert job_key({"preset": "a"}, SETUP, [2, 1, 2]) == job_key({"preset": "a"}, SETUP, [1, 2])
    assert job_key({"preset": "a"}, SETUP, [1]) != job_key({"preset": "a"}, {**SETUP, "seq_len": 64}, [1])


def test_the_same_request_finds_the_same_job_until_it_fails():
    job, created = submit()
    again, created_again = submit(requester="someone else")
    assert created and not created_again and again.pk == job.pk
    assert job_claim("r1").pk == job.pk and job_fail(job, "r1", "crashed", "boom")
    third, created_third = submit()
    assert created_third and third.pk != job.pk  # a failed job is tried afresh


@override_settings(ANCHORGPU_SIMULATION_PER_REQUESTER=2)
def test_one_visitor_waits_for_at_most_their_share():
    submit(setup={**SETUP, "seq_len": 32})
    submit(setup={**SETUP, "seq_len": 64})
    with pytest.raises(SimulationRefused, match="already have 2"):
        submit(setup={**SETUP, "seq_len": 128})
    submit(setup={**SETUP, "seq_len": 128}, requester="another visitor")  # others are not held up


@override_settings(ANCHORGPU_SIMULATION_QUEUE_LIMIT=2, ANCHORGPU_SIMULATION_PER_REQUESTER=99)
def test_a_full_queue_refuses_with_a_reason_and_saves_nothing():
    submit(setup={**SETUP, "seq_len": 32})
    submit(setup={**SETUP, "seq_len": 64})
    with pytest.raises(SimulationRefused, match="queue is full"):
        submit(setup={**SETUP, "seq_len": 128})
    assert SimulationJob.objects.count() == 2


def test_jobs_run_oldest_first_and_a_claimed_job_is_not_claimed_again():
    first, _ = submit(setup={**SETUP, "seq_len": 32})
    second, _ = submit(setup={**SETUP, "seq_len": 64})
    assert queue_position(first) == 0 and queue_position(second) == 1
    taken = job_claim("runner-a")
    assert taken.pk == first.pk and taken.state == State.RUNNING and taken.attempts == 1
    assert job_claim("runner-b").pk == second.pk
    assert job_claim("runner-c") is None


def test_only_the_runner_holding_a_job_may_report_on_it():
    job, _ = submit()
    job_claim("runner-a")
    assert not job_heartbeat(job, "runner-b", "pretending")
    assert not job_finish(job, "runner-b", [STEP], 1.0)
    assert job_heartbeat(job, "runner-a", "halfway")
    assert SimulationJob.objects.get(pk=job.pk).progress == "halfway"
    assert job_finish(job, "runner-a", [STEP], 1.5)
    done = SimulationJob.objects.get(pk=job.pk)
    assert done.state == State.DONE and done.result == [STEP] and done.seconds == 1.5
    assert not job_fail(done, "runner-a", "crashed", "too late")  # finished is final


def test_a_malformed_result_is_refused_and_the_job_stays_running():
    job, _ = submit()
    job_claim("runner-a")
    broken = {**STEP, "peak": 11}  # parts no longer add up
    with pytest.raises(ValueError, match="add up"):
        job_finish(job, "runner-a", [broken], 1.0)
    assert SimulationJob.objects.get(pk=job.pk).state == State.RUNNING


def test_a_silent_runner_loses_its_job_which_fails_after_the_last_attempt():
    job, _ = submit()
    start = timezone.now()
    job_claim("runner-a", now=start)
    later = start + STALE_AFTER + timedelta(seconds=1)
    assert jobs_requeue_stale(now=later) == 1
    assert SimulationJob.objects.get(pk=job.pk).state == State.QUEUED
    for attempt in range(2, MAX_ATTEMPTS + 1):
        assert job_claim(f"runner-{attempt}", now=later).attempts == attempt
    assert not job_heartbeat(job, "runner-a")  # the first runner cannot come back
    jobs_requeue_stale(now=later + STALE_AFTER + timedelta(seconds=1))
    failed = SimulationJob.objects.get(pk=job.pk)
    assert failed.state == State.FAILED and failed.failure == "crashed" and "twice" in failed.error


def test_finished_jobs_are_purged_after_a_month_and_unfinished_ones_never():
    old, _ = submit(setup={**SETUP, "seq_len": 32})
    waiting, _ = submit(setup={**SETUP, "seq_len": 64})
    job_claim("r")
    job_finish(old, "r", [STEP], 1.0)
    SimulationJob.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=31))
    SimulationJob.objects.filter(pk=waiting.pk).update(created_at=timezone.now() - timedelta(days=90))
    assert jobs_purge_old() == 1
    assert list(SimulationJob.objects.values_list("pk", flat=True)) == [waiting.pk]
