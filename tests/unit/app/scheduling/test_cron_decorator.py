"""``@cron`` stacked above ``@actor``: what it records and what it refuses at import."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import taskq
from taskq import ConfigurationError, actor, cron
from taskq.app.scheduling.schedule import schedules_of


class NoArgs(BaseModel):
    pass


class Report(BaseModel):
    kind: str


def test_cron_records_its_schedule_on_the_actor() -> None:
    @cron("0 3 * * *", tz="Europe/Berlin")
    @cron("*/5 * * * *", payload={})
    @actor
    async def nightly(payload: NoArgs) -> None: ...

    assert taskq.cron is cron
    assert [(s.actor, s.expression.expr, s.expression.tz) for s in nightly.cron_schedules] == [
        ("nightly", "*/5 * * * *", "UTC"),
        ("nightly", "0 3 * * *", "Europe/Berlin"),
    ]
    assert schedules_of({"nightly": nightly}) == list(nightly.cron_schedules)


def test_a_fixed_payload_is_validated_and_stored_dumped() -> None:
    @cron("0 * * * *", payload={"kind": "hourly"})
    @actor
    async def report(payload: Report) -> None: ...

    assert dict(report.cron_schedules[0].payload) == {"kind": "hourly"}


def test_a_payload_that_does_not_validate_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="payload does not validate"):

        @cron("0 * * * *")
        @actor
        async def report(payload: Report) -> None: ...


def test_cron_must_be_stacked_above_actor() -> None:
    with pytest.raises(ConfigurationError, match="stacked above @actor"):

        @cron("0 * * * *")  # type: ignore[type-var]
        async def plain(payload: NoArgs) -> None: ...


@pytest.mark.parametrize(("expr", "tz"), [("nope", "UTC"), ("0 * * * *", "Nowhere/City")])
def test_a_bad_expression_or_zone_is_refused(expr: str, tz: str) -> None:
    with pytest.raises(ConfigurationError, match="@cron"):
        cron(expr, tz=tz)
