"""``@cron`` on two real workers: the leader killed with -9 just before a tick, and still
exactly one job per tick.

The schedule ticks every 3 s. Worker 1 leads and enqueues ticks; worker 2 waits.
Worker 1 is SIGKILLed 0.3 s before a tick, so it never writes that tick; the
server ends its session (and the advisory lock) at once, worker 2 is elected
within a heartbeat (0.5 s) and enqueues the tick worker 1 missed, then the
following ones. Every tick from the first to the last has exactly one job:
none is lost at the change and none doubled (the tick's idempotency key, not
timing, keeps one: worker 2's first enqueue may be a tick worker 1 wrote).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from tests.integration.worker.support import Database, WorkerSpawner, eventually

pytestmark = pytest.mark.integration

REGISTRY = "tests.integration.worker.cron_actors_fixture:registry"
ACTOR = "every_three_seconds"
PERIOD = 3


async def ticks_by_key(conn: asyncpg.Connection, db: Database) -> Counter[datetime]:
    rows = await conn.fetch(f"SELECT idempotency_key FROM {db.schema}.jobs WHERE actor = $1", ACTOR)
    ticks: Counter[datetime] = Counter()
    for row in rows:
        # cron:<schedule fingerprint>:<tick in UTC>
        prefix, _, instant = row["idempotency_key"].partition(":")[2].partition(":")
        assert prefix, row["idempotency_key"]
        ticks[datetime.strptime(instant, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)] += 1
    return ticks


async def test_one_job_per_tick_across_a_leader_killed_before_a_tick(
    db: Database, conn: asyncpg.Connection, workers: WorkerSpawner
) -> None:
    first = workers.start(db.worker_env(), registry=REGISTRY)
    await eventually(
        lambda: _true(bool(first.events("leader-elected"))),
        within=30,
        what="worker 1 to lead",
        context=first.output_tail,
    )
    second = workers.start(db.worker_env(), registry=REGISTRY)
    await eventually(
        lambda: _true(bool(second.events("worker-started"))),
        within=30,
        what="worker 2 to start",
        context=second.output_tail,
    )
    await eventually(
        lambda: _at_least(conn, db, 2), within=15, what="two ticks", context=first.output_tail
    )
    # Kill worker 1 0.3 s before the next tick (the workers' clock is this machine's).
    now = time.time()
    next_tick = (int(now) // PERIOD + 1) * PERIOD
    if next_tick - now < 0.5:
        next_tick += PERIOD
    await asyncio.sleep(next_tick - 0.3 - time.time())
    first.send(signal.SIGKILL)
    assert await first.wait(within=10) == -signal.SIGKILL
    missed = datetime.fromtimestamp(next_tick, UTC)

    await eventually(
        lambda: _true(bool(second.events("leader-elected"))),
        within=15,
        what="worker 2 to lead",
        context=second.output_tail,
    )
    # Three more ticks after the one worker 1 missed.
    last = missed + timedelta(seconds=3 * PERIOD)
    await eventually(
        lambda: _has_tick(conn, db, last),
        within=20,
        what="three ticks more",
        context=second.output_tail,
    )

    ticks = await ticks_by_key(conn, db)
    doubled = {tick: n for tick, n in ticks.items() if n != 1}
    assert doubled == {}
    first_tick, last_tick = min(ticks), max(ticks)
    expected = [
        first_tick + timedelta(seconds=PERIOD * i)
        for i in range(int((last_tick - first_tick).total_seconds()) // PERIOD + 1)
    ]
    assert sorted(ticks) == expected, "a tick without its job"
    assert missed in ticks


async def _true(value: bool) -> bool:
    return value


async def _at_least(conn: asyncpg.Connection, db: Database, count: int) -> bool:
    return sum((await ticks_by_key(conn, db)).values()) >= count


async def _has_tick(conn: asyncpg.Connection, db: Database, tick: datetime) -> bool:
    return tick in await ticks_by_key(conn, db)
