"""SIGUSR2 before the worker handles it does not kill ``taskq worker``.

The worker takes SIGUSR2 (its task dump) once its ports are open; on a slow
database that is seconds after the process started, and the signal's default
action would end the process meanwhile (no shutdown, nothing logged). The
command line ignores it from its first line until then.

Deterministic: the worker connects through a proxy that holds every new
connection, so the signals are sent while the worker is certainly past its
imports (its first connection reached the proxy) and certainly before its
handlers exist (no connection has been answered).
"""

from __future__ import annotations

import asyncio
import signal
import sys

import asyncpg
import pytest
from tests.integration.worker.proxy import faulty_proxy
from tests.integration.worker.support import Database, WorkerSpawner, eventually

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform == "win32", reason="no SIGUSR2 on Windows"),
]

SIGNALS = 20


async def test_sigusr2_while_the_worker_connects_does_not_kill_it(
    db: Database, conn: asyncpg.Connection, workers: WorkerSpawner
) -> None:
    async with faulty_proxy(db.dsn) as proxy:
        proxy.hold_new()
        worker = workers.start(db.worker_env(TASKQ_PG_DSN=proxy.dsn_for(db.dsn)))

        async def connecting() -> bool:
            return proxy.accepted > 0 or worker.returncode is not None

        await eventually(connecting, within=60, what="the worker to connect")
        for _ in range(SIGNALS):
            if worker.returncode is not None:
                break
            worker.send(signal.SIGUSR2)
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # a signal's default action would have ended it by now
        assert worker.returncode is None, (worker.returncode, worker.output_tail())
        assert not worker.events("worker-started")  # the signals came before it started
        proxy.release_new()

        async def started() -> bool:
            return bool(worker.events("worker-started")) or worker.returncode is not None

        await eventually(started, within=60, what="the worker to start", context=worker.output_tail)
        assert worker.returncode is None, worker.output_tail()
        worker.send(signal.SIGUSR2)  # handled now: a task dump, and it goes on
        await eventually(
            lambda: asyncio.sleep(0, bool(worker.events("worker-task-dump"))),
            within=30,
            what="the task dump",
            context=worker.output_tail,
        )
        worker.send(signal.SIGTERM)
        assert await worker.wait(within=30) == 0, worker.output_tail()
