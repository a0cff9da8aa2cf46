"""A worker process (memory adapter, real clock) whose dependency teardown never ends.

Run as ``python -m tests.unit.app.worker.hanging_teardown_worker process|transient``:
it prints ``ready`` once the worker runs; the test then sends SIGTERM.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Annotated

from pydantic import BaseModel

from taskq import Dependencies, JobsClient, Scope, WorkerSettings, actor, worker_main
from taskq.adapters.memory import MemoryBackend
from taskq.adapters.system_clock import SystemClock


class Empty(BaseModel):
    pass


class Pool:
    pass


async def stuck_pool() -> AsyncIterator[Pool]:
    print("ready", flush=True)
    yield Pool()
    await asyncio.Event().wait()  # a close() stuck on a connection


@actor
async def uses_process_pool(payload: Empty, pool: Annotated[Pool, Scope.PROCESS]) -> None: ...


@actor
async def uses_job_pool(payload: Empty, pool: Annotated[Pool, Scope.TRANSIENT]) -> None: ...


def main(mode: str) -> int:
    scope = Scope.PROCESS if mode == "process" else Scope.TRANSIENT
    ref = uses_process_pool if mode == "process" else uses_job_pool
    deps = Dependencies()
    deps.register(Pool, stuck_pool, scope=scope)
    clock = SystemClock()
    backend = MemoryBackend(clock=clock)
    if mode == "transient":
        client = JobsClient(backend.store(), clock=clock)
        asyncio.run(client.enqueue(ref, Empty()))
    settings = WorkerSettings.load_from_dict(
        {
            "termination_grace_period": 7,
            "cancellation_grace_period": 0.5,
            "cleanup_grace_period": 0.5,
            "log_format": "json",
            "log_level": "WARNING",
            "health_enabled": False,  # not what this tests; never the machine's socket
        }
    )
    return worker_main(
        settings,
        [ref],
        store=backend.store(),
        leader_lock=backend.leader_lock(),
        notifier=backend.notifier(),
        dependencies=deps,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
