"""Plans of the statements that read jobs, on a large table: never a scan of the whole table.

A plan test, not a timing test: every statement is EXPLAINed (custom and
generic plan) on 200,000 finished rows plus a pending backlog, running and
scheduled jobs, with fresh statistics, with stale ones (taken when only
finished rows existed) and with none, and its scans of jobs are checked:
no sequential scan, no index read whole unless the index only holds live
(pending, scheduled or running) rows, and the indexes of migration 0005 where
they replaced others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncpg
import pytest
from contracts.provision import (
    NoTestDatabase,
    create_migrated_schema,
    drop_test_schema,
    fresh_schema_name,
    resolve_test_dsn,
)
from tests.integration.adapters.pg_plan_support import STATEMENTS, Plan, explain, fill_jobs

from taskq.adapters.postgres.schema import Schema

pytestmark = pytest.mark.integration

#: Indexes whose entries are only live jobs: reading one whole is bounded by the backlog.
LIVE_INDEXES = frozenset(
    {
        "jobs_dispatch_idx",
        "jobs_dispatch_actor_idx",
        "jobs_scheduled_idx",
        "jobs_scheduled_actor_idx",
        "jobs_running_idx",
        "jobs_deadline_idx",
        "jobs_identity_key_uidx",
    }
)
SCENARIOS = ("analyzed", "stale", "never_analyzed")


async def _build(dsn: str, name: str, scenario: str) -> None:
    await create_migrated_schema(dsn, name)
    schema = Schema(name)
    conn = await asyncpg.connect(dsn)
    try:
        if scenario == "stale":
            # Statistics that say every row is finished, then the live rows arrive.
            await conn.execute(
                f"""INSERT INTO {schema.quoted}.jobs (queue, actor, status, finished_at)
                    SELECT 'q1', 'a1', 'succeeded', now() FROM generate_series(1, 50000);
                    ANALYZE {schema.quoted}.jobs"""
            )
        await fill_jobs(conn, schema, analyze=scenario == "analyzed")
    finally:
        await conn.close()


def _run(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` on a loop of its own thread (the tests' loop is per test)."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coro).result()


@pytest.fixture(scope="module", params=SCENARIOS)
def big_schema(request: pytest.FixtureRequest) -> Iterator[tuple[str, Schema]]:
    """(dsn, schema) of a migrated schema holding the large table, per statistics scenario."""
    try:
        dsn = resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))
    name = fresh_schema_name("taskq_plan")
    try:
        _run(_build(dsn, name, request.param))
        yield dsn, Schema(name)
    finally:
        _run(drop_test_schema(dsn, name))


async def plans_of(dsn: str, schema: Schema, statement: str) -> tuple[Plan, Plan]:
    conn = await asyncpg.connect(dsn)
    try:
        return await explain(conn, schema, statement)
    finally:
        await conn.close()


@pytest.mark.parametrize("statement", STATEMENTS)
async def test_no_statement_reads_all_of_jobs(
    big_schema: tuple[str, Schema], statement: str
) -> None:
    """No seq scan; an index is read whole only if it holds live rows; finished ones: prune only."""
    for plan in await plans_of(*big_schema, statement):
        for scan in plan.scans:
            where = f"{plan.mode} plan of {statement}:\n{plan.text}"
            assert "Seq Scan" not in scan.node, where
            assert scan.index is not None, where
            if scan.index_cond is None:
                assert scan.index in LIVE_INDEXES, where
            if scan.index == "jobs_finished_idx":
                assert statement == "retention.prune_batch", where


def _index_reads(plan: Plan) -> set[str]:
    return {scan.index for scan in plan.scans if scan.index is not None}


@pytest.mark.parametrize(
    "statement", ["workers.heartbeat", "claim.drain_unstarted", "workers.isolate_worker"]
)
async def test_a_workers_running_jobs_are_one_range_of_jobs_running_idx(
    big_schema: tuple[str, Schema], statement: str
) -> None:
    for plan in await plans_of(*big_schema, statement):
        (owner,) = [s for s in plan.scans if s.index == "jobs_running_idx"]
        assert "locked_by" in (owner.index_cond or ""), plan.text


async def test_capped_claim_counts_running_jobs_in_jobs_running_idx(
    big_schema: tuple[str, Schema],
) -> None:
    """max_concurrent's count reads the actor key column of the running index."""
    for plan in await plans_of(*big_schema, "claim.claim_mixed"):
        running = [s for s in plan.scans if s.index == "jobs_running_idx"]
        assert running, plan.text
        assert all("actor" in (s.index_cond or "") for s in running), plan.text


async def test_reclaim_reads_only_running_rows(big_schema: tuple[str, Schema]) -> None:
    for plan in await plans_of(*big_schema, "maintenance.reclaim_expired"):
        assert "jobs_running_idx" in _index_reads(plan), plan.text


async def test_max_pending_count_reads_the_actors_waiting_rows(
    big_schema: tuple[str, Schema],
) -> None:
    """Pending from jobs_dispatch_actor_idx by actor; scheduled from a scheduled-only index."""
    for plan in await plans_of(*big_schema, "enqueue.enqueue_lookup"):
        pending = [s for s in plan.scans if s.index == "jobs_dispatch_actor_idx"]
        assert pending, plan.text
        assert all("actor" in (s.index_cond or "") for s in pending), plan.text
        assert _index_reads(plan) & {"jobs_scheduled_actor_idx", "jobs_scheduled_idx"}, plan.text
