"""@actor refuses, when it runs, an option no store can keep, naming it: before, the
worker failed at start with a raw ValueError on Postgres (and not on memory), or a
terminal write failed for ever (result_ttl=timedelta.max)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from taskq.app.actors import ActorRef, actor
from taskq.domain.errors import ConfigurationError
from taskq.domain.storable import MAX_RESULT_TTL


class Num(BaseModel):
    n: int = 0


def decorate(**options: Any) -> ActorRef[Num, None]:
    async def fn(payload: Num) -> None: ...

    return actor(**options)(fn)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_pending": 2**31}, r"max_pending must be an int in \[1, 2147483647\]"),
        ({"max_concurrent": 2**31}, r"max_concurrent must be an int in \[1, 2147483647\]"),
        ({"queue": "mail\x00"}, "queue holds a NUL character, which no store can keep"),
        ({"name": "f\udce9"}, "name holds a lone surrogate"),
        ({"metadata": {"team": "a\x00"}}, r"metadata\['team'\] holds a NUL character"),
        ({"metadata": {"k\ud800": 1}}, "metadata has a key that holds a lone surrogate"),
        ({"result_ttl": timedelta.max}, "result_ttl is at most 365,250 days"),
        ({"result_ttl": MAX_RESULT_TTL + timedelta(seconds=1)}, "result_ttl is at most"),
    ],
    ids=[
        "max_pending",
        "max_concurrent",
        "queue-nul",
        "name-surrogate",
        "metadata-nul",
        "metadata-key",
        "ttl-max",
        "ttl-past-limit",
    ],
)
def test_an_option_no_store_can_keep_is_refused_at_decoration(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        decorate(**options)


def test_the_limits_themselves_are_accepted() -> None:
    ref = decorate(max_pending=2**31 - 1, max_concurrent=2**31 - 1, result_ttl=MAX_RESULT_TTL)
    assert (ref.max_pending, ref.max_concurrent, ref.result_ttl) == (
        2**31 - 1,
        2**31 - 1,
        MAX_RESULT_TTL,
    )
