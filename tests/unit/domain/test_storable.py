"""Property tests: the storable-value checks refuse exactly what Postgres refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskq.domain.job import NewJob
from taskq.domain.storable import INT32_MAX, INT32_MIN, check_json_text, check_new_job

#: Text rich in what the JSON NUL check could confuse: backslashes, "u0000", NUL itself.
tricky_text = st.text(alphabet=st.sampled_from(["\\", "u", "0", "\x00", "a", '"']), max_size=12)
json_values = st.recursive(
    st.none() | st.integers() | tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky_text, inner, max_size=3),
    max_leaves=8,
)


def holds_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(holds_nul(v) for v in value)
    if isinstance(value, dict):
        return any(holds_nul(k) or holds_nul(v) for k, v in value.items())
    return False


@given(json_values, st.booleans())
def test_json_check_refuses_exactly_the_values_holding_nul(value: object, ascii_only: bool) -> None:
    """check_json_text refuses encoded JSON iff some key or string in it holds NUL."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    if holds_nul(value):
        with pytest.raises(ValueError, match="NUL"):
            check_json_text(text, "payload")
    else:
        check_json_text(text, "payload")


@given(st.integers(INT32_MIN - 2, INT32_MAX + 2), st.integers(-2, INT32_MAX + 2) | st.none())
def test_integer_fields_must_fit_their_columns(priority: int, max_attempts: int | None) -> None:
    """priority must fit int32; max_attempts must be None or in 1..INT32_MAX."""
    job = NewJob(actor="a", priority=priority, max_attempts=max_attempts)
    fits = INT32_MIN <= priority <= INT32_MAX and (
        max_attempts is None or 1 <= max_attempts <= INT32_MAX
    )
    if fits:
        check_new_job(job)
    else:
        with pytest.raises(ValueError, match=r"NewJob\.(priority|max_attempts) must be"):
            check_new_job(job)


@pytest.mark.parametrize(
    "field",
    ["queue", "actor", "identity_key", "idempotency_key", "fairness_key", "trace_id", "span_id"],
)
def test_a_nul_in_a_text_field_is_refused_naming_it(field: str) -> None:
    """A NUL in any text field raises ValueError naming that field; without it the job passes."""
    fields: dict[str, Any] = {"actor": "a", field: "x\x00y"}
    with pytest.raises(ValueError, match=f"NewJob.{field} holds a NUL"):
        check_new_job(NewJob(**fields))
    check_new_job(NewJob(**{**fields, field: "xy"}))


@pytest.mark.parametrize(
    ("document", "lone"),
    [
        ({"s": chr(0xD800)}, True),  # chr(): a linter folds lone surrogates in literals
        ({"s": chr(0xDC00)}, True),
        ({chr(0xD83D): 1}, True),
        ({"s": "ok \U0001f600 then \ud800"}, True),
        ({"s": "\U0001f600"}, False),
        ({"s": "a\\ud800"}, False),  # a backslash and the letters u, d, 8, 0, 0
        ({"s": "plain"}, False),
    ],
)
def test_a_lone_surrogate_in_json_text_is_refused(document: dict[str, Any], lone: bool) -> None:
    """jsonb refuses an unpaired surrogate escape; a pair (a character outside the BMP)
    and an escaped backslash before u-d-8-0-0 are fine."""
    text = json.dumps(document)
    if lone:
        with pytest.raises(ValueError, match="lone surrogate"):
            check_json_text(text, "payload")
    else:
        check_json_text(text, "payload")


def test_a_lone_surrogate_in_a_text_field_is_refused_by_name() -> None:
    """Text must encode as UTF-8: the field is named."""
    with pytest.raises(ValueError, match=r"NewJob\.fairness_key holds a lone surrogate"):
        check_new_job(NewJob(actor="a", fairness_key="x\udfff"))
    with pytest.raises(ValueError, match=r"NewJob\.queue holds a lone surrogate"):
        check_new_job(NewJob(actor="a", queue="\ud800"))
    check_new_job(NewJob(actor="a", queue="café", fairness_key="\U0001f600"))
