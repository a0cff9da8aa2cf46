"""``load_json``: a JSON column's text, parsed by the C scanner with json.loads' results."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskq.adapters.postgres.store.rows import load_json, load_json_object

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_json_values)
def test_load_json_reads_what_json_loads_reads(value: object) -> None:
    text = json.dumps(value)
    assert load_json(text) == json.loads(text)


@pytest.mark.parametrize("text", [' {"a": 1} ', "\n[1]\n", "\t2"])
def test_surrounding_whitespace_is_allowed_as_json_loads_allows_it(text: str) -> None:
    assert load_json(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} x', "[1,]", "nul"])
def test_malformed_text_raises_json_loads_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        load_json(text)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    assert str(caught.value) == str(expected.value)


def test_none_is_sql_null_and_objects_stay_objects() -> None:
    assert load_json(None) is None
    assert load_json_object(None) == {}
    assert load_json_object("[1]") == {}
    first, second = load_json_object("{}"), load_json_object("{}")
    assert first == {}
    assert first is not second  # a fresh dict per row
    assert load_json_object('{"k": {"n": [1]}}') == {"k": {"n": [1]}}
