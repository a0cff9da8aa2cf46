"""Worker bootstrap: actor-config sync and drift, bootstrap warnings, registry shapes."""

from __future__ import annotations

import logging
from typing import Annotated

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, events_named, fields, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.di import Dependencies, Scope
from taskq.app.worker import events, run_worker
from taskq.domain.actor_config import ActorConfig


class Mail(BaseModel):
    to: str


@actor(queue="email", max_concurrent=5)
async def mailer(payload: Mail) -> None: ...


@actor(queue="cron")
async def nightly(payload: Mail) -> None: ...


@actor
async def greeter(payload: Mail) -> None: ...


class Db:
    pass


@actor
async def needs_db(payload: Mail, db: Annotated[Db, Scope.PROCESS]) -> None: ...


async def test_structural_drift_refuses_to_start(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stored queue that differs from the registered one stops the worker: exit 1, hint."""
    await client.sync_actor_configs([ActorConfig(actor="mailer", queue="legacy")])
    run = WorkerRun(backend, clock, {"mailer": mailer}, make_settings(queues=["email"]))
    await run.start()
    assert run.task is not None
    assert run.task.done()
    assert run.task.result() == 1
    assert run.worker.problem is not None
    assert "'legacy'" in run.worker.problem
    assert "--force-update-actor-config" in run.worker.problem
    [drift] = events_named(caplog, events.ACTOR_CONFIG_DRIFT)
    assert fields(drift)["drifts"] == [
        {"actor": "mailer", "field": "queue", "stored": "legacy", "registered": "email"}
    ]
    stored = await client.get_actor_config("mailer")
    assert stored is not None
    assert stored.queue == "legacy"
    assert await client.list_workers() == []


async def test_forced_sync_overwrites_and_logs_at_error(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With force the drifted field is overwritten and logged as actor-config-drift-overwrite."""
    await client.sync_actor_configs([ActorConfig(actor="mailer", queue="legacy")])
    run = WorkerRun(
        backend,
        clock,
        {"mailer": mailer},
        make_settings(queues=["email"]),
        force_update_actor_config=True,
    )
    await run.start()
    assert run.task is not None
    assert not run.task.done()
    [overwrite] = events_named(caplog, events.ACTOR_CONFIG_DRIFT_OVERWRITE)
    assert overwrite.levelno == logging.ERROR
    assert fields(overwrite) == {
        "actor": "mailer",
        "field": "queue",
        "stored": "legacy",
        "registered": "email",
        "force": True,
    }
    stored = await client.get_actor_config("mailer")
    assert stored is not None
    assert stored.queue == "email"
    assert await run.stop() == 0


async def test_capacity_literal_differences_are_info_only(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stored max_concurrent differing from the literal is kept and logged at info."""
    await client.sync_actor_configs([ActorConfig(actor="mailer", queue="email", max_concurrent=20)])
    run = WorkerRun(backend, clock, {"mailer": mailer}, make_settings(queues=["email"]))
    await run.start()
    [override] = events_named(caplog, events.ACTOR_CONFIG_CAPACITY_OVERRIDE)
    assert override.levelno == logging.INFO
    assert fields(override) == {
        "actor": "mailer",
        "field": "max_concurrent",
        "stored": 20,
        "registered": 5,
    }
    stored = await client.get_actor_config("mailer")
    assert stored is not None
    assert stored.max_concurrent == 20
    assert await run.stop() == 0


async def test_actors_on_unconsumed_queues_warning(
    backend: MemoryBackend, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Actors whose queue this worker does not consume produce the guide's one warning."""
    registry = {"greeter": greeter, "mailer": mailer, "nightly": nightly}
    run = WorkerRun(backend, clock, registry, make_settings(queues=["default"]))
    await run.start()
    [warning] = events_named(caplog, events.ACTORS_ON_UNCONSUMED_QUEUES)
    assert warning.levelno == logging.WARNING
    body = fields(warning)
    assert body["actors"] == {"mailer": "email", "nightly": "cron"}
    assert body["queues"] == ["cron", "email"]
    assert body["worker_queues"] == ["default"]
    assert "no other worker" in body["note"]
    assert list(body) == ["actors", "queues", "worker_queues", "note"]
    assert events_named(caplog, events.WORKER_CONSUMES_NO_QUEUES) == []
    await run.stop()


async def test_worker_that_consumes_no_queues_warns(
    backend: MemoryBackend, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """An empty queue list logs worker-consumes-no-queues with worker_queues=[]."""
    run = WorkerRun(backend, clock, {"greeter": greeter}, make_settings(queues=""))
    await run.start()
    [warning] = events_named(caplog, events.WORKER_CONSUMES_NO_QUEUES)
    assert warning.levelno == logging.WARNING
    assert fields(warning) == {"worker_queues": []}
    await run.stop()


async def test_no_warning_when_every_actor_queue_is_consumed(
    backend: MemoryBackend, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker consuming all its actors' queues logs neither bootstrap warning."""
    run = WorkerRun(
        backend,
        clock,
        {"greeter": greeter, "mailer": mailer},
        make_settings(queues=["default", "email"]),
    )
    await run.start()
    assert events_named(caplog, events.ACTORS_ON_UNCONSUMED_QUEUES) == []
    assert events_named(caplog, events.WORKER_CONSUMES_NO_QUEUES) == []
    await run.stop()


async def test_missing_dependency_provider_refuses_to_start(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """An actor dependency without a provider is a configuration error at start (exit 1)."""
    run = WorkerRun(backend, clock, {"needs_db": needs_db}, dependencies=Dependencies())
    await run.start()
    assert run.task is not None
    assert run.task.result() == 1
    assert run.worker.problem is not None
    assert "needs_db" in run.worker.problem
    assert await client.list_workers() == []


async def test_registered_dependency_reaches_the_actor(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """With the provider registered the same worker starts and runs the job."""
    deps = Dependencies()
    deps.register(Db, Db, scope=Scope.PROCESS)
    job_id = (await client.enqueue(needs_db.new_job({"to": "a"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"needs_db": needs_db}, dependencies=deps)
    await run.start()
    stored = await client.get(job_id)
    assert stored is not None
    assert stored.status.value == "succeeded"
    assert await run.stop() == 0


def _registry_generator() -> object:
    return (ref for ref in [greeter])


@pytest.mark.parametrize(
    ("shape", "code"),
    [
        ({"greeter": greeter}, 0),
        ([greeter], 0),
        ((greeter,), 0),
        (_registry_generator(), 1),
        ({greeter}, 1),
        (greeter, 1),
        ("pkg.mod:registry", 1),
    ],
    ids=["mapping", "list", "tuple", "generator", "set", "single", "string"],
)
async def test_registry_shapes(
    backend: MemoryBackend, clock: FakeClock, shape: object, code: int
) -> None:
    """A mapping or list/tuple registry runs; a generator (or anything else) exits 1."""
    settings = make_settings(idle_settle_window=0.0)
    result = await run_worker(
        settings,
        shape,
        store=backend.store(),
        leader_lock=backend.leader_lock(),
        notifier=backend.notifier(),
        clock=clock,
        until_idle=True,
        handle_signals=False,
    )
    assert result == code


class Broker:
    pass


def _broker_down() -> Broker:
    raise ConnectionError("broker unreachable")


@actor
async def needs_broker(payload: Mail, broker: Annotated[Broker, Scope.PROCESS]) -> None: ...


async def test_failing_process_dependency_refuses_to_start(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A PROCESS factory that raises at scope open stops the worker with exit 1 and the reason."""
    deps = Dependencies()
    deps.register(Broker, _broker_down, scope=Scope.PROCESS)
    run = WorkerRun(backend, clock, {"needs_broker": needs_broker}, dependencies=deps)
    await run.start()
    assert run.task is not None
    assert run.task.result() == 1
    assert run.worker.problem is not None
    assert "broker unreachable" in run.worker.problem
    assert await client.list_workers() == []
