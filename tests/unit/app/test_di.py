"""DI scopes: registration, validation, lifetimes, factory kinds and teardown order."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from taskq.app.actors import actor
from taskq.app.context import JobContext
from taskq.app.di import (
    Dependencies,
    DependencyError,
    Scope,
    ThreadLocalRef,
    ThreadScope,
    WorkerScopes,
    build_actor_scope,
)
from taskq.domain.errors import ConfigurationError


class Payload(BaseModel):
    n: int = 0


class Db:
    def __init__(self, label: str = "db") -> None:
        self.label = label
        self.thread = threading.get_ident()


class Conn(Db):
    pass


class Session(Db):
    pass


class Tx(Db):
    pass


class Journal:
    """Records creations and teardowns in order, from any thread."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def log(self, event: str) -> None:
        with self._lock:
            self.events.append(event)

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def generator(self, cls: type[Db], name: str) -> Any:
        def factory() -> Iterator[Db]:
            label = f"{name}{self.next_id()}"
            self.log(f"open {label}")
            yield cls(label)
            self.log(f"close {label}")

        return factory

    def async_generator(self, cls: type[Db], name: str) -> Any:
        async def factory() -> AsyncIterator[Db]:
            label = f"{name}{self.next_id()}"
            self.log(f"open {label}")
            yield cls(label)
            await asyncio.sleep(0)
            self.log(f"close {label}")

        return factory


def ctx_for(payload: Payload) -> JobContext[Payload]:
    from datetime import UTC, datetime

    return JobContext(
        payload=payload,
        job_id=1,
        attempt=1,
        max_attempts=1,
        worker_id="w",
        queue="default",
        actor="a",
        scheduled_at=datetime(2030, 1, 1, tzinfo=UTC),
    )


@actor
async def uses_all(
    payload: Payload,
    db: Annotated[Db, Scope.PROCESS],
    conn: Annotated[Conn, Scope.LOOP],
    session: Annotated[Session, Scope.THREAD],
    tx: Annotated[Tx, Scope.TRANSIENT],
) -> None: ...


@actor
async def uses_tx(payload: Payload, tx: Annotated[Tx, Scope.TRANSIENT]) -> None: ...


@actor
def sync_uses_session(payload: Payload, session: Annotated[Session, Scope.THREAD]) -> int:
    assert session.thread == threading.get_ident()
    return id(session)


def full_deps(journal: Journal) -> Dependencies:
    deps = Dependencies()
    deps.register(Db, journal.generator(Db, "db"), scope=Scope.PROCESS)
    deps.register(Conn, journal.async_generator(Conn, "conn"), scope=Scope.LOOP)
    deps.register(Session, journal.generator(Session, "session"), scope=Scope.THREAD)
    deps.register(Tx, journal.async_generator(Tx, "tx"), scope=Scope.TRANSIENT)
    return deps


# ----------------------------------------------------------------- registration


def test_register_refuses_duplicates() -> None:
    """A (type, scope) can be registered once; the same type at another scope is fine."""
    deps = Dependencies()
    deps.register(Db, Db, scope=Scope.PROCESS)
    deps.register(Db, Db, scope=Scope.TRANSIENT)
    with pytest.raises(ConfigurationError, match="already registered"):
        deps.register(Db, Db, scope=Scope.PROCESS)


def test_register_refuses_non_callables_and_bad_scopes() -> None:
    """The factory must be callable and the scope a Scope member."""
    deps = Dependencies()
    with pytest.raises(ConfigurationError, match="zero-argument callable"):
        deps.register(Db, Db(), scope=Scope.PROCESS)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="Scope member"):
        deps.register(Db, Db, scope="process")  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["coroutine", "async generator"])
def test_thread_scope_refuses_async_factories(kind: str) -> None:
    """THREAD-scope factories must be synchronous: threads running actors have no loop."""

    async def coro() -> Db:
        return Db()

    async def agen() -> AsyncIterator[Db]:
        yield Db()

    with pytest.raises(ConfigurationError, match="synchronous"):
        Dependencies().register(Db, coro if kind == "coroutine" else agen, scope=Scope.THREAD)


class OnlyAsyncManaged:
    async def __aenter__(self) -> OnlyAsyncManaged:
        return self

    async def __aexit__(self, *exc: object) -> None: ...


@contextlib.asynccontextmanager
async def async_managed() -> AsyncIterator[Db]:
    yield Db()


@pytest.mark.parametrize("factory", [OnlyAsyncManaged, async_managed])
def test_thread_scope_refuses_async_context_manager_factories(factory: Any) -> None:
    """A class that is only an async context manager, or an @asynccontextmanager function,
    is refused at registration, not at each job."""
    with pytest.raises(ConfigurationError, match=r"Db at THREAD scope: .* must be synchronous"):
        Dependencies().register(Db, factory, scope=Scope.THREAD)


async def test_a_failing_thread_factory_names_the_actor_and_parameter() -> None:
    """The error a sync actor gets when its THREAD factory raises names what was made."""

    def broken() -> Session:
        raise KeyError("nope")

    deps = Dependencies()
    deps.register(Session, broken, scope=Scope.THREAD)
    async with (
        deps.open_worker_scopes() as scopes,
        scopes.actor_scope(sync_uses_session) as kwargs,
    ):
        with pytest.raises(DependencyError) as info:
            await sync_uses_session.run(Payload(), ctx_for(Payload()), kwargs)
    assert str(info.value) == (
        "actor 'sync_uses_session', parameter 'session': the factory of Session at THREAD "
        "scope raised KeyError: 'nope'"
    )


def test_validate_names_actor_parameter_and_type() -> None:
    """A missing provider is reported up front with the actor, parameter, type and scope."""
    deps = Dependencies()
    deps.register(Tx, Tx, scope=Scope.PROCESS)
    with pytest.raises(ConfigurationError) as info:
        deps.validate([uses_tx])
    message = str(info.value)
    assert "actor 'uses_tx', parameter 'tx'" in message
    assert "Tx at TRANSIENT scope" in message
    assert "registered at PROCESS scope" in message


def test_validate_lists_every_problem_and_accepts_mappings() -> None:
    """validate reports all missing providers at once, for a mapping registry too."""
    with pytest.raises(ConfigurationError) as info:
        Dependencies().validate({"uses_all": uses_all})
    assert str(info.value).count("no provider registered") == 4


def test_validate_passes_when_everything_is_registered() -> None:
    """A fully registered registry validates without error."""
    full_deps(Journal()).validate([uses_all, uses_tx])


# ----------------------------------------------------------------- lifetimes and order


async def test_chain_opens_in_order_and_closes_in_reverse() -> None:
    """PROCESS, then LOOP open at start; at exit LOOP, THREAD, PROCESS close in reverse."""
    journal = Journal()
    async with full_deps(journal).open_worker_scopes() as scopes:
        assert journal.events == ["open db1", "open conn2"]
        async with scopes.actor_scope(uses_all) as kwargs:
            assert isinstance(kwargs["session"], ThreadLocalRef)
            await uses_all.run(Payload(), ctx_for(Payload()), kwargs)
        journal.log("worker stopping")
    assert journal.events == [
        "open db1",
        "open conn2",
        "open tx3",
        "open session4",
        "close tx3",
        "worker stopping",
        "close conn2",
        "close session4",
        "close db1",
    ]


async def test_long_lived_instances_are_shared_across_jobs() -> None:
    """PROCESS and LOOP instances are the same object for every job."""
    async with full_deps(Journal()).open_worker_scopes() as scopes:
        async with scopes.actor_scope(uses_all) as first:
            pass
        async with scopes.actor_scope(uses_all) as second:
            pass
    assert first["db"] is second["db"]
    assert first["conn"] is second["conn"]


async def test_transient_instances_are_per_job() -> None:
    """Each job gets a fresh TRANSIENT instance, torn down when its scope exits."""
    journal = Journal()
    deps = Dependencies()
    deps.register(Tx, journal.generator(Tx, "tx"), scope=Scope.TRANSIENT)
    async with deps.open_worker_scopes() as scopes:
        async with scopes.actor_scope(uses_tx) as first:
            assert journal.events == ["open tx1"]
        async with scopes.actor_scope(uses_tx) as second:
            assert journal.events == ["open tx1", "close tx1", "open tx2"]
    assert first["tx"] is not second["tx"]
    assert journal.events[-1] == "close tx2"


@actor
async def two_transients(
    payload: Payload,
    first: Annotated[Tx, Scope.TRANSIENT],
    second: Annotated[Session, Scope.TRANSIENT],
) -> None: ...


async def test_transient_teardown_is_reverse_creation_order() -> None:
    """Within one job, TRANSIENT instances are torn down newest first."""
    journal = Journal()
    deps = Dependencies()
    deps.register(Tx, journal.generator(Tx, "tx"), scope=Scope.TRANSIENT)
    deps.register(Session, journal.async_generator(Session, "session"), scope=Scope.TRANSIENT)
    async with deps.open_worker_scopes() as scopes, scopes.actor_scope(two_transients):
        pass
    assert journal.events == ["open tx1", "open session2", "close session2", "close tx1"]


async def test_transient_teardown_runs_when_the_job_raises() -> None:
    """An error inside the job's scope still tears down, and the error propagates."""
    journal = Journal()
    deps = Dependencies()
    deps.register(Tx, journal.generator(Tx, "tx"), scope=Scope.TRANSIENT)
    async with deps.open_worker_scopes() as scopes:
        with pytest.raises(LookupError):
            async with scopes.actor_scope(uses_tx):
                raise LookupError("job failed")
        assert journal.events == ["open tx1", "close tx1"]


async def test_transient_teardown_runs_when_the_job_is_cancelled() -> None:
    """A cancelled job (even cancelled again during teardown) still tears down."""
    journal = Journal()
    release = asyncio.Event()

    async def slow_teardown() -> AsyncIterator[Tx]:
        journal.log("open")
        yield Tx()
        await release.wait()
        journal.log("close")

    deps = Dependencies()
    deps.register(Tx, slow_teardown, scope=Scope.TRANSIENT)
    started = asyncio.Event()

    async def job(scopes: WorkerScopes) -> None:
        async with scopes.actor_scope(uses_tx):
            started.set()
            await asyncio.Event().wait()

    async with deps.open_worker_scopes() as scopes:
        task = asyncio.create_task(job(scopes))
        await started.wait()
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()  # the FORCING phase may cancel again mid-teardown
        with pytest.raises(asyncio.CancelledError):
            await task
        assert journal.events == ["open"]
        release.set()
        for _ in range(10):
            await asyncio.sleep(0)
        assert journal.events == ["open", "close"]


async def test_closing_the_chain_waits_for_job_teardowns() -> None:
    """A teardown that outlived its twice-cancelled job finishes before the scopes close."""
    journal = Journal()
    release = asyncio.Event()

    async def slow_teardown() -> AsyncIterator[Tx]:
        yield Tx()
        await release.wait()
        journal.log("tx closed")

    def loop_resource() -> Iterator[Conn]:
        yield Conn()
        journal.log("loop closed")

    deps = Dependencies()
    deps.register(Tx, slow_teardown, scope=Scope.TRANSIENT)
    deps.register(Conn, loop_resource, scope=Scope.LOOP)
    started = asyncio.Event()

    async def job(scopes: WorkerScopes) -> None:
        async with scopes.actor_scope(uses_tx):
            started.set()
            await asyncio.Event().wait()

    async with deps.open_worker_scopes() as scopes:
        task = asyncio.create_task(job(scopes))
        await started.wait()
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        asyncio.get_running_loop().call_soon(release.set)
    assert journal.events == ["tx closed", "loop closed"]


async def test_failing_teardown_is_logged_and_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A teardown error is logged, never raised, and does not skip other teardowns."""
    journal = Journal()

    def broken() -> Iterator[Session]:
        yield Session()
        raise RuntimeError("teardown broke")

    deps = Dependencies()
    deps.register(Tx, journal.generator(Tx, "tx"), scope=Scope.TRANSIENT)
    deps.register(Session, broken, scope=Scope.TRANSIENT)
    with caplog.at_level(logging.ERROR, logger="taskq.di"):
        async with deps.open_worker_scopes() as scopes, scopes.actor_scope(two_transients):
            pass
    assert journal.events == ["open tx1", "close tx1"]
    failures = [r for r in caplog.records if r.message == "di-teardown-failed"]
    assert len(failures) == 1
    assert "Session at TRANSIENT scope" in failures[0].__dict__["dependency"]


async def test_transient_factory_error_tears_down_what_was_made() -> None:
    """If a later TRANSIENT factory fails, earlier ones are torn down and the error names it."""
    journal = Journal()

    def failing() -> Session:
        raise OSError("cannot connect")

    deps = Dependencies()
    deps.register(Tx, journal.generator(Tx, "tx"), scope=Scope.TRANSIENT)
    deps.register(Session, failing, scope=Scope.TRANSIENT)
    async with deps.open_worker_scopes() as scopes:
        with pytest.raises(DependencyError) as info:
            async with scopes.actor_scope(two_transients):
                pytest.fail("the body must not run")
    assert journal.events == ["open tx1", "close tx1"]
    assert str(info.value) == (
        f"actor {two_transients.name!r}, parameter 'second': the factory of Session at "
        "TRANSIENT scope raised OSError: cannot connect"
    )
    assert isinstance(info.value.__cause__, OSError)


async def test_failing_process_factory_stops_the_chain_and_cleans_up() -> None:
    """A PROCESS factory error at open tears down the instances already made."""
    journal = Journal()

    async def failing() -> Conn:
        raise OSError("no database")

    deps = Dependencies()
    deps.register(Db, journal.generator(Db, "db"), scope=Scope.PROCESS)
    deps.register(Conn, failing, scope=Scope.PROCESS)
    with pytest.raises(
        DependencyError, match="the factory of Conn at PROCESS scope raised OSError: no database"
    ):
        async with deps.open_worker_scopes():
            pytest.fail("the chain must not open")
    assert journal.events == ["open db1", "close db1"]


# ----------------------------------------------------------------- factory kinds


class SyncManaged:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def __enter__(self) -> str:
        self.journal.log("enter sync")
        return "sync-value"

    def __exit__(self, *exc: object) -> None:
        self.journal.log("exit sync")


class AsyncManaged:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def __aenter__(self) -> str:
        self.journal.log("enter async")
        return "async-value"

    async def __aexit__(self, *exc: object) -> None:
        self.journal.log("exit async")


class Plain:
    pass


class FromCoroutine:
    pass


class FromSyncCm:
    pass


class FromAsyncCm:
    pass


@actor
async def kinds(
    payload: Payload,
    plain: Annotated[Plain, Scope.PROCESS],
    coro: Annotated[FromCoroutine, Scope.PROCESS],
    sync_cm: Annotated[FromSyncCm, Scope.LOOP],
    async_cm: Annotated[FromAsyncCm, Scope.TRANSIENT],
) -> None: ...


async def test_every_factory_kind_is_supported() -> None:
    """Plain callables, async callables and (async) context managers all provide instances."""
    journal = Journal()
    made = Plain()

    async def coroutine_factory() -> FromCoroutine:
        return FromCoroutine()

    deps = Dependencies()
    deps.register(Plain, lambda: made, scope=Scope.PROCESS)
    deps.register(FromCoroutine, coroutine_factory, scope=Scope.PROCESS)
    deps.register(FromSyncCm, lambda: SyncManaged(journal), scope=Scope.LOOP)
    deps.register(FromAsyncCm, lambda: AsyncManaged(journal), scope=Scope.TRANSIENT)
    async with deps.open_worker_scopes() as scopes:
        async with scopes.actor_scope(kinds) as kwargs:
            assert kwargs["plain"] is made
            assert isinstance(kwargs["coro"], FromCoroutine)
            assert kwargs["sync_cm"] == "sync-value"
            assert kwargs["async_cm"] == "async-value"
        assert journal.events == ["enter sync", "enter async", "exit async"]
    assert journal.events[-1] == "exit sync"


# ----------------------------------------------------------------- THREAD and LOOP


async def test_thread_scope_gives_one_instance_per_thread() -> None:
    """Each thread gets its own THREAD instance, reused within that thread."""
    journal = Journal()
    deps = Dependencies()
    deps.register(Session, journal.generator(Session, "session"), scope=Scope.THREAD)
    async with deps.open_worker_scopes() as scopes:

        def twice() -> tuple[object, object]:
            return scopes.get(Session, Scope.THREAD), scopes.get(Session, Scope.THREAD)

        a1, a2 = await asyncio.to_thread(twice)
        results: list[tuple[object, object]] = []
        other = threading.Thread(target=lambda: results.append(twice()))
        other.start()
        other.join()
        b1, b2 = results[0]
        assert a1 is a2
        assert b1 is b2
        assert a1 is not b1
    assert sorted(journal.events) == sorted(
        ["open session1", "open session2", "close session1", "close session2"]
    )


async def test_sync_actor_gets_the_instance_of_the_thread_it_runs_in() -> None:
    """A sync actor's THREAD dependency is resolved in its worker thread, not the loop's."""
    deps = Dependencies()
    deps.register(Session, Session, scope=Scope.THREAD)
    async with deps.open_worker_scopes() as scopes:
        async with scopes.actor_scope(sync_uses_session) as kwargs:
            # the actor itself asserts the instance was made in its own thread
            session_id = await sync_uses_session.run(Payload(), ctx_for(Payload()), kwargs)
        loop_instance = scopes.get(Session, Scope.THREAD)
    assert session_id != id(loop_instance)


async def test_thread_factory_producing_an_awaitable_is_refused() -> None:
    """A sync THREAD factory that returns a coroutine fails clearly and leaks no coroutine."""

    async def make() -> Session:
        return Session()

    deps = Dependencies()
    deps.register(Session, lambda: make(), scope=Scope.THREAD)
    async with deps.open_worker_scopes() as scopes:
        with pytest.raises(ConfigurationError, match="must be synchronous"):
            scopes.get(Session, Scope.THREAD)


async def test_loop_scope_refuses_other_event_loops() -> None:
    """LOOP instances are bound to the loop that opened the chain."""
    deps = Dependencies()
    deps.register(Conn, Conn, scope=Scope.LOOP)
    async with deps.open_worker_scopes() as scopes:
        assert isinstance(scopes.get(Conn, Scope.LOOP), Conn)

        async def from_other_loop() -> object:
            return scopes.get(Conn, Scope.LOOP)

        with pytest.raises(RuntimeError, match="event loop that opened"):
            await asyncio.to_thread(asyncio.run, from_other_loop())


async def test_transient_cannot_be_fetched_outside_a_job() -> None:
    """TRANSIENT instances only exist inside actor_scope."""
    deps = Dependencies()
    deps.register(Tx, Tx, scope=Scope.TRANSIENT)
    async with deps.open_worker_scopes() as scopes:
        with pytest.raises(ValueError, match="TRANSIENT"):
            scopes.get(Tx, Scope.TRANSIENT)


async def test_build_actor_scope_is_actor_scope() -> None:
    """build_actor_scope(scopes, ref) resolves like scopes.actor_scope(ref)."""
    deps = Dependencies()
    deps.register(Tx, Tx, scope=Scope.TRANSIENT)
    async with deps.open_worker_scopes() as scopes, build_actor_scope(scopes, uses_tx) as kwargs:
        assert isinstance(kwargs["tx"], Tx)


async def test_unregistered_dependency_inside_a_job_is_a_configuration_error() -> None:
    """Resolving an actor whose provider is missing raises ConfigurationError naming it."""
    async with Dependencies().open_worker_scopes() as scopes:
        with pytest.raises(ConfigurationError, match="parameter 'tx'"):
            async with scopes.actor_scope(uses_tx):
                pytest.fail("the body must not run")


async def test_registrations_after_opening_apply_to_the_next_chain() -> None:
    """The chain snapshots registrations when it opens."""
    deps = Dependencies()
    async with deps.open_worker_scopes() as scopes:
        deps.register(Db, Db, scope=Scope.PROCESS)
        with pytest.raises(ConfigurationError):
            scopes.get(Db, Scope.PROCESS)
    async with deps.open_worker_scopes() as scopes:
        assert isinstance(scopes.get(Db, Scope.PROCESS), Db)


async def test_scopes_close_even_if_unused() -> None:
    """Opening and closing the chain with nothing resolved runs every long-lived teardown."""
    journal = Journal()
    async with full_deps(journal).open_worker_scopes():
        pass
    assert journal.events == ["open db1", "open conn2", "close conn2", "close db1"]


def test_an_adopted_thread_tears_down_its_own_instances(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A thread that adopted its teardown closes its instances itself; close() leaves
    those of one still running (logged di-teardown-left) and closes the rest."""
    deps = Dependencies()
    made: list[int] = []
    closed: list[int] = []

    def session() -> Iterator[Session]:
        made.append(threading.get_ident())
        yield Session()
        closed.append(threading.get_ident())

    deps.register(Session, session, scope=Scope.THREAD)
    scope = ThreadScope(deps._registrations.values())
    stop = threading.Event()

    def adopted() -> None:
        scope.adopt_thread()
        scope.get(Session)
        stop.wait()
        scope.close_thread()

    worker = threading.Thread(target=adopted)
    worker.start()
    try:
        while not made:
            time.sleep(0.01)
        scope.get(Session)  # this thread's own
        scope.close()
        assert closed == [threading.get_ident()]
        assert [r.getMessage() for r in caplog.records] == ["di-teardown-left"]
    finally:
        stop.set()
        worker.join()
    assert closed == [threading.get_ident(), worker.ident]
