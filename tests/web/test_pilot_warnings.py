"""A pilot report's warnings, written in English by the kit, are said in the reader's language."""

import pytest
from django.utils import translation

from anchorgpu.i18n_catalogs import compile_catalogs
from anchorgpu.pilotreports.warning_text import warning_text


@pytest.fixture(autouse=True, scope="module")
def compiled():
    compile_catalogs(only_stale=True)


@pytest.mark.parametrize("warning, expected", [
    ("21 example(s) were longer than --seq-len and were cut", "21 exemplos eram mais longos que --seq-len"),
    ("1 example(s) were longer than --seq-len and were cut", "1 exemplo era mais longo"),
    ("fewer than ten examples: validation ran on the training examples", "Menos de dez exemplos"),
    ("the data has fewer examples than the timed steps use: batches repeat", "os batches se repetem"),
    ("2 CPU cores for up to 8 processes: they share cores, so the efficiencies understate what separate devices "
     "would give", "2 núcleos de CPU para até 8 processos"),
])
def test_the_kits_warnings_are_translated(warning, expected):
    with translation.override("pt"):
        assert expected in warning_text(warning)


def test_a_warning_of_another_kit_is_marked_as_english():
    with translation.override("ko"):
        assert warning_text("something new happened") == '<span lang="en">something new happened</span>'
