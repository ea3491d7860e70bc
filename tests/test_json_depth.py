"""Measuring how deeply JSON nests, before parsing it (the parser recurses and can crash on deep input)."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anchorgpu.json_depth import json_depth, too_deep

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                     max_leaves=20)


def _real_depth(value) -> int:
    if isinstance(value, list):
        return 1 + max((_real_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_real_depth(v) for v in value.values()), default=0)
    return 0


@given(_JSON)
def test_the_depth_is_the_parsed_structures_depth(value):
    text = json.dumps(value)
    assert json_depth(text) == _real_depth(value) == json_depth(text.encode())


@pytest.mark.parametrize("text, depth", [('"[[[{{{"', 0), ('{"a": "]]]"}', 1), (r'["\"[", [1]]', 2), ("42", 0)])
def test_brackets_inside_strings_do_not_count(text, depth):
    assert json_depth(text) == depth


def test_two_mebibytes_of_brackets_are_measured_without_parsing():
    data = b"[" * (2 * 2**20)
    assert json_depth(data) == 2 * 2**20 and too_deep(data, 64) and not too_deep(b"[[1]]", 64)
