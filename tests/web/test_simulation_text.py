"""A running simulation's stage and a failed one's reason, said in the reader's language."""

import pytest
from django.utils import translation

from anchorgpu.i18n_catalogs import compile_catalogs
from anchorgpu.planner.progress import STAGES
from anchorgpu.simulations.text import error_text, progress_text


@pytest.fixture(autouse=True, scope="module")
def compiled():
    compile_catalogs(only_stale=True)


@pytest.mark.parametrize("code", ["pt", "fr", "ko"])
@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_is_said_in_the_readers_language(code, stage):
    with translation.override("en"):
        english = progress_text(f"{stage}:2:3:4")
    with translation.override(code):
        said = progress_text(f"{stage}:2:3:4")
    assert said != english and "4" in said


def test_an_older_english_line_is_not_shown_as_it_is():
    with translation.override("ko"):
        assert progress_text("building the model on the meta device") == "시뮬레이션 중…"


@pytest.mark.parametrize("stored, expected", [
    ("The simulation ran longer than 600 s and was stopped.", "A simulação passou de 600 s e foi interrompida."),
    ("The simulation could not be started.", "Não foi possível iniciar a simulação."),
    ("The simulation stopped without an answer (status -9); the operators have its log.", "(status -9)"),
])
def test_the_runners_reasons_are_translated(stored, expected):
    with translation.override("pt"):
        assert expected in error_text(stored)


def test_a_reason_the_catalogs_lack_is_marked_as_english():
    with translation.override("fr"):
        said = error_text("the config lacks hidden_size.")
    assert said == 'Détails, en anglais\u00a0: <span lang="en">the config lacks hidden_size.</span>'
    with translation.override("en"):
        assert error_text("the config lacks hidden_size.") == "the config lacks hidden_size."
