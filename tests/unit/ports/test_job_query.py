"""JobQuery refuses a limit no list should have, before any store sees it."""

from __future__ import annotations

import pytest

from taskq.ports.store_params import JOB_QUERY_LIMIT_MAX, JobQuery


@pytest.mark.parametrize("limit", [0, -1, JOB_QUERY_LIMIT_MAX + 1])
def test_a_limit_out_of_range_is_a_value_error(limit: int) -> None:
    """A limit outside 1..JOB_QUERY_LIMIT_MAX raises ValueError naming the limit."""
    with pytest.raises(ValueError, match="limit"):
        JobQuery(limit=limit)


def test_the_bounds_are_allowed() -> None:
    """1 and JOB_QUERY_LIMIT_MAX are both valid limits."""
    assert JobQuery(limit=1).limit == 1
    assert JobQuery(limit=JOB_QUERY_LIMIT_MAX).limit == JOB_QUERY_LIMIT_MAX
