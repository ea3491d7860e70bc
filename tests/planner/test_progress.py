"""A simulation's stages as codes: what the child writes, the job stores and the shop translates."""

import pytest

from anchorgpu.planner.progress import STAGES, Progress


@pytest.mark.parametrize("stage", STAGES)
def test_a_code_reads_back_as_the_same_progress(stage):
    progress = Progress(stage, step=2, steps=3, cards=4)
    assert progress.code() == f"{stage}:2:3:4"
    assert Progress.parse(progress.code()) == progress


@pytest.mark.parametrize("text", ["", "measured step", "build:1:2", "cook:1:1:1", "build:a:1:1", "build:1:1:1:1"])
def test_anything_else_is_not_a_code(text):
    assert Progress.parse(text) is None


def test_the_command_line_still_reads_english():
    assert Progress("build").english() == "building the model on the meta device"
    assert Progress("step", 1, 2, 8).english() == "step 1 of 2: FSDP over 8 cards"
    assert Progress("warmup", cards=1).within(2, 2).english() == "one card: warm-up step (creates the optimizer state)"
