"""Run a whole TaskQ worker inside an application test: memory adapter, fake clock.

No Postgres, no real sleeping: the test enqueues jobs, starts ``run_worker``
with ``until_idle=True`` on the memory adapter, and drives the fake clock until
the worker has drained the queue and returned its exit code. A retry with a
one-minute backoff takes microseconds.

Run it directly (``python docs/examples/worker_in_app_test.py``) or under
pytest with pytest-asyncio (``pytest docs/examples/worker_in_app_test.py``):
``test_signup_emails_are_sent`` is an ordinary async test, marked for
pytest-asyncio's default strict mode by ``pytestmark`` below.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from pydantic import BaseModel

from taskq import JobsClient, JobStatus, RetryPolicy, WorkerSettings, actor
from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.worker import run_worker

# -- the application's code -------------------------------------------------------------


class Signup(BaseModel):
    email: str


SENT: list[str] = []
FLAKY_ONCE: set[str] = set()


@actor(queue="email", retry=RetryPolicy(max_attempts=3, base=timedelta(minutes=1), jitter=0))
async def send_welcome(payload: Signup) -> str:
    if payload.email.startswith("flaky") and payload.email not in FLAKY_ONCE:
        FLAKY_ONCE.add(payload.email)
        raise ConnectionError("smtp timeout")  # retried one minute later
    SENT.append(payload.email)
    return f"sent to {payload.email}"


# -- the application's test ---------------------------------------------------------------

try:  # strict mode (pytest-asyncio's default) runs only marked async tests
    import pytest

    pytestmark = pytest.mark.asyncio
except ImportError:  # run directly, without pytest installed
    pass


async def test_signup_emails_are_sent() -> None:
    """Every signup email is sent once, including one that needed a retry."""
    SENT.clear()
    FLAKY_ONCE.clear()
    clock = FakeClock()
    backend = MemoryBackend(clock=clock)  # one in-memory "database"
    client = JobsClient(backend.store(), clock=clock)
    handles = [
        await client.enqueue(send_welcome, {"email": address})
        for address in ("ada@example.com", "flaky@example.com")
    ]

    settings = WorkerSettings.load_from_dict(
        {"queues": ["email"], "idle_settle_window": 0, "max_concurrency": 2}
    )
    worker = asyncio.create_task(
        run_worker(
            settings,
            [send_welcome],
            store=backend.store(),
            leader_lock=backend.leader_lock(),
            notifier=backend.notifier(),
            clock=clock,  # an injected clock: the worker never really sleeps
            until_idle=True,
            handle_signals=False,
        )
    )
    while not worker.done():
        await clock.advance_async(1)  # one fake second per step

    assert worker.result() == 0  # drained, nothing failed
    assert sorted(SENT) == ["ada@example.com", "flaky@example.com"]
    assert [await h.status() for h in handles] == [JobStatus.SUCCEEDED] * 2
    assert clock.monotonic() >= 60  # the retry waited its minute, on the fake clock


if __name__ == "__main__":
    asyncio.run(test_signup_emails_are_sent())
    print("ok")
