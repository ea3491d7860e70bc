"""A simulated step as plain data: it round-trips through JSON, prices DDP on any number of cards, and refuses
to stand for a step it did not measure."""

import pytest

from anchorgpu.planner.analytic import NO_RESERVE, Reserve
from anchorgpu.planner.device_memory import CONTEXT_ALLOWANCE, CUBLAS_SM90, CUBLASLT_DEFAULT, SMALL_BUFFER, round_size
from anchorgpu.planner.errors import PlannerInputError
from anchorgpu.planner.measured import Measurement, MeasuredSteps, measured_setup, not_simulable, step_key, to_breakdown
from anchorgpu.planner.presets import preset_spec
from anchorgpu.planner.recommend import Offer, card_counts, plan
from anchorgpu.planner.setup import TrainingSetup

SINGLE = Measurement(peak=1000, categories={"weights": 400, "gradients": 100, "optimizer": 200, "activations": 250,
                                            "temporaries": 50}, phase="backward",
                     phases=(("forward", 900), ("backward", 1000)), seconds=1.5, fake=True, trainable_bytes=100)


def test_a_measurement_survives_json():
    assert Measurement.from_json(SINGLE.to_json()) == SINGLE


@pytest.mark.parametrize("broken, text", [
    ({"peak": 999}, "add up"),
    ({"categories": None}, "malformed"),
    ({"phases": [["forward"]]}, "malformed"),
    ({"peak": "lots"}, "malformed"),
])
def test_a_malformed_measurement_is_refused(broken, text):
    with pytest.raises(PlannerInputError, match=text):
        Measurement.from_json({**SINGLE.to_json(), **broken})


def test_one_single_device_step_prices_ddp_on_any_number_of_cards():
    single = to_breakdown(SINGLE, TrainingSetup(), NO_RESERVE)
    assert single.peak == 1000 and single.reserve == 0
    for gpus in (2, 8):
        ddp = to_breakdown(SINGLE, TrainingSetup(parallel="ddp", gpus=gpus), NO_RESERVE)
        # the buckets copy the gradients: allocated tensors, counted with them
        assert ddp.live == 1000 + SINGLE.trainable_bytes and ddp.reserve == 0
        assert ddp.gradients == 100 + SINGLE.trainable_bytes
    with_reserve = to_breakdown(SINGLE, TrainingSetup(parallel="ddp", gpus=2), Reserve(nccl_buffers=256))
    h100 = with_reserve.measures("h100")  # no model given: the allocator is not modelled, the workspaces are
    assert h100.allocated_peak_bytes == 1100 + round_size(CUBLAS_SM90) + round_size(CUBLASLT_DEFAULT)
    assert h100.reserved_peak_bytes == 1100 + CUBLAS_SM90 + SMALL_BUFFER  # 32 MiB segment; 1 MiB in a 2 MiB one
    assert h100.device_used_bytes == h100.reserved_peak_bytes + CONTEXT_ALLOWANCE + 256
    assert with_reserve.peak == max(with_reserve.measures(card).device_used_bytes
                                    for card in ("a100", "h100", "h200", "b200", "mi300x"))


def test_fsdp_needs_its_own_step_for_each_number_of_cards():
    fsdp4 = TrainingSetup(parallel="fsdp", gpus=4)
    assert step_key(fsdp4) == ("fsdp", 4) and step_key(TrainingSetup(parallel="ddp", gpus=4)) == ("single", 1)
    assert measured_setup(TrainingSetup(parallel="ddp", gpus=4)) == TrainingSetup()
    with pytest.raises(PlannerInputError, match="cannot stand for"):
        to_breakdown(SINGLE, fsdp4)
    steps = MeasuredSteps({("single", 1): SINGLE})
    assert steps.covers(TrainingSetup(parallel="ddp", gpus=8)) and not steps.covers(fsdp4)
    with pytest.raises(PlannerInputError, match="no simulated step"):
        steps(preset_spec("tiny-llama"), fsdp4)


def test_steps_survive_json_and_bad_json_is_refused():
    steps = MeasuredSteps({("single", 1): SINGLE})
    again = MeasuredSteps.from_json(steps.to_json())
    assert again.measurements == steps.measurements
    for bad in ({"peak": 1}, [1], ["x"]):
        with pytest.raises(PlannerInputError):
            MeasuredSteps.from_json(bad)


def test_plan_prices_every_option_from_the_measured_steps():
    spec = preset_spec("tiny-llama")
    offers = [Offer("a", "A", memory_bytes_per_card=1500, cards_per_unit=1, quantities=(1, 2)),
              Offer("b", "B", memory_bytes_per_card=900, cards_per_unit=2, quantities=(1,))]
    assert card_counts(offers) == (1, 2) and card_counts([]) == (1,)
    steps = MeasuredSteps({("single", 1): SINGLE})
    result = plan(spec, TrainingSetup(seq_len=64), offers, headroom=0.1, reserve=NO_RESERVE, estimate_with=steps)
    fits = {(o.offer.slug, o.quantity): (o.breakdown.peak, o.fits) for o in result.options}
    assert fits == {("a", 1): (1000, True), ("a", 2): (1100, True), ("b", 1): (1100, False)}


def test_what_cannot_be_simulated_is_said_before_it_is_tried():
    assert "bitsandbytes" in not_simulable(TrainingSetup(method="qlora"))
    assert "bitsandbytes" in not_simulable(TrainingSetup(optimizer="adamw8bit"))
    assert not_simulable(TrainingSetup(method="lora")) is None
