"""Postgres leader lock and notifier: connection ownership, session loss, bounded reconnects.

The contract suite pins the ports' behaviour; these tests pin what only the
Postgres adapters have: dedicated sessions, caller-owned connections, the
driver noticing a killed backend, and the reconnect backoff's bounds. Every
test runs once per driver.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import psycopg
import pytest
from contracts.provision import NoTestDatabase, migrated_schema, resolve_test_dsn

from taskq.adapters.asyncpg.leader_lock import AsyncpgLeaderLock
from taskq.adapters.asyncpg.notifier import AsyncpgNotifier
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.wake_listener import WakeListener
from taskq.adapters.psycopg.leader_lock import PsycopgLeaderLock
from taskq.adapters.psycopg.notifier import PsycopgNotifier
from taskq.domain.errors import StoreUnavailable

pytestmark = pytest.mark.integration

WAIT = 5.0


@dataclass(frozen=True)
class Driver:
    """How one driver opens a caller-owned connection and builds the two ports."""

    name: str
    connect: Callable[[str], Awaitable[Any]]
    is_closed: Callable[[Any], bool]
    close: Callable[[Any], Awaitable[None]]
    lock: Callable[..., AsyncpgLeaderLock | PsycopgLeaderLock]
    notifier: Callable[..., AsyncpgNotifier | PsycopgNotifier]


async def _psycopg_connect(dsn: str) -> psycopg.AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(dsn, autocommit=True)


async def _psycopg_close(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.close()


async def _asyncpg_close(conn: asyncpg.Connection[Any]) -> None:
    await conn.close()


DRIVERS = {
    "asyncpg": Driver(
        "asyncpg",
        asyncpg.connect,
        lambda c: bool(c.is_closed()),
        _asyncpg_close,
        AsyncpgLeaderLock,
        AsyncpgNotifier,
    ),
    "psycopg": Driver(
        "psycopg",
        _psycopg_connect,
        lambda c: bool(c.closed),
        _psycopg_close,
        PsycopgLeaderLock,
        PsycopgNotifier,
    ),
}


@pytest.fixture(scope="module")
def dsn() -> str:
    """The test server's DSN; the module is skipped when there is none."""
    try:
        return resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


@pytest.fixture(params=sorted(DRIVERS))
def driver(request: pytest.FixtureRequest) -> Driver:
    """Each test once per driver."""
    return DRIVERS[request.param]


@pytest.fixture
async def schema(dsn: str) -> AsyncIterator[Schema]:
    """A fresh migrated schema, dropped after the test."""
    async with migrated_schema(dsn=dsn, prefix="taskq_ln") as provisioned:
        yield Schema(provisioned.schema)


@pytest.fixture
async def admin(dsn: str) -> AsyncIterator[asyncpg.Connection[Any]]:
    """A connection of the test's own for killing sessions and reading pg_locks."""
    conn = await asyncpg.connect(dsn)
    yield conn
    await conn.close()


@pytest.fixture
def unreachable_dsn() -> str:
    """A DSN on a loopback port where nothing listens (connecting is refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"postgresql://postgres@127.0.0.1:{port}/test"


async def kill(admin: asyncpg.Connection[Any], pid: int | None) -> None:
    """Terminate a backend and wait until it is gone (so its locks are released)."""
    assert pid is not None
    assert await admin.fetchval("SELECT pg_terminate_backend($1, 5000)", pid) is True


async def eventually(condition: Callable[[], Awaitable[bool] | bool], what: str) -> None:
    """Wait (bounded) until ``condition`` holds; fail naming ``what`` otherwise."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def advisory_locks_of(admin: asyncpg.Connection[Any], pid: int) -> int:
    return int(
        await admin.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $1", pid
        )
    )


async def listening_channels(driver: Driver, conn: Any) -> list[str]:
    if driver.name == "asyncpg":
        return [r[0] for r in await conn.fetch("SELECT pg_listening_channels()")]
    cursor = await conn.execute("SELECT pg_listening_channels()")
    return [r[0] for r in await cursor.fetchall()]


async def session_gone(admin: asyncpg.Connection[Any], pid: int) -> bool:
    query = "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)"
    return bool(await admin.fetchval(query, pid))


# --- leader lock ---------------------------------------------------------------------


async def test_caller_owned_lock_connection_is_unlocked_not_closed(
    driver: Driver, dsn: str, schema: Schema, admin: asyncpg.Connection[Any]
) -> None:
    """close() on a lock built on a caller's connection releases the lock but leaves it open."""
    own = await driver.connect(dsn)
    try:
        lock = driver.lock(dsn, schema=schema, conn=own)
        assert await lock.try_acquire()
        pid = lock.backend_pid
        assert pid is not None
        assert await advisory_locks_of(admin, pid) == 1
        await lock.close()
        assert driver.is_closed(own) is False
        assert await advisory_locks_of(admin, pid) == 0
        rival = driver.lock(dsn, schema=schema)
        try:
            assert await rival.try_acquire()
        finally:
            await rival.close()
    finally:
        await driver.close(own)


async def test_owned_lock_connection_ends_with_close(
    driver: Driver, dsn: str, schema: Schema, admin: asyncpg.Connection[Any]
) -> None:
    """A lock that opened its own connection closes it, so its session leaves the server."""
    lock = driver.lock(dsn, schema=schema)
    before = lock.backend_pid
    assert before is None  # opened lazily
    assert await lock.try_acquire()
    pid = lock.backend_pid
    assert pid is not None
    await lock.close()
    assert lock.backend_pid is None
    await eventually(lambda: session_gone(admin, pid), "the owned session to end")


async def test_reacquiring_does_not_stack_grants(driver: Driver, dsn: str, schema: Schema) -> None:
    """try_acquire while holding takes no second grant, so one release hands the lock over."""
    holder, rival = driver.lock(dsn, schema=schema), driver.lock(dsn, schema=schema)
    try:
        assert await holder.try_acquire()
        assert await holder.try_acquire()
        await holder.release()
        assert await rival.try_acquire() is True
    finally:
        await holder.close()
        await rival.close()


async def test_each_schema_has_its_own_leader(driver: Driver, dsn: str, schema: Schema) -> None:
    """The lock key includes the schema: leaders of two schemas in one database coexist."""
    async with migrated_schema(dsn=dsn, prefix="taskq_ln") as other:
        first = driver.lock(dsn, schema=schema)
        second = driver.lock(dsn, schema=Schema(other.schema))
        try:
            assert await first.try_acquire()
            assert await second.try_acquire()
        finally:
            await first.close()
            await second.close()


async def test_try_acquire_replaces_a_dead_connection(
    driver: Driver, dsn: str, schema: Schema, admin: asyncpg.Connection[Any]
) -> None:
    """After its session is killed, try_acquire (without a probe first) reconnects and wins."""
    lock = driver.lock(dsn, schema=schema)
    try:
        assert await lock.try_acquire()
        old = lock.backend_pid
        await kill(admin, old)
        assert await lock.try_acquire() is True
        assert lock.held is True
        assert lock.backend_pid not in (None, old)
        assert await lock.probe() is True
    finally:
        await lock.close()


async def test_dead_caller_connection_is_replaced_from_the_dsn(
    driver: Driver, dsn: str, schema: Schema, admin: asyncpg.Connection[Any]
) -> None:
    """Once a caller's connection dies, the lock is lost and re-won on a connection of its own."""
    own = await driver.connect(dsn)
    lock = driver.lock(dsn, schema=schema, conn=own)
    try:
        assert await lock.try_acquire()
        caller_pid = lock.backend_pid
        await kill(admin, caller_pid)
        assert await lock.probe() is False
        assert lock.held is False
        assert await lock.try_acquire() is True
        assert lock.backend_pid not in (None, caller_pid)
    finally:
        await lock.close()
        await driver.close(own)


async def test_unreachable_server_refuses_with_store_unavailable(
    driver: Driver, unreachable_dsn: str, schema: Schema
) -> None:
    """try_acquire raises StoreUnavailable, holding nothing, when no connection can be had."""
    lock = driver.lock(unreachable_dsn, schema=schema)
    with pytest.raises(StoreUnavailable, match="cannot connect"):
        await lock.try_acquire()
    assert lock.held is False
    assert await lock.probe() is False
    await lock.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        await lock.try_acquire()


# --- notifier ------------------------------------------------------------------------


async def test_caller_owned_notifier_connection_is_unlistened_not_closed(
    driver: Driver, dsn: str, schema: Schema
) -> None:
    """close() on a notifier built on a caller's connection UNLISTENs and leaves it open."""
    own = await driver.connect(dsn)
    try:
        notifier = driver.notifier(dsn, schema=schema, conn=own)
        await notifier.start()
        assert notifier.connected
        assert await listening_channels(driver, own) == [schema.wake_channel]
        await notifier.close()
        assert driver.is_closed(own) is False
        assert await listening_channels(driver, own) == []
    finally:
        await driver.close(own)


async def test_a_killed_session_is_replaced_at_once_without_a_health_check(
    driver: Driver, dsn: str, schema: Schema, admin: asyncpg.Connection[Any]
) -> None:
    """The driver notices a terminated LISTEN session by itself and a new one LISTENs at
    once (the backoff is long: only its immediate first attempt can do it), then every
    subscriber gets one wake-up for any queue, for what was published meanwhile."""
    notifier: WakeListener[Any] = driver.notifier(
        dsn, schema=schema, reconnect_backoff_initial=600.0, reconnect_backoff_max=600.0
    )
    received: list[str] = []
    notifier.subscribe(received.append)
    try:
        await notifier.start()
        old = notifier.backend_pid
        await kill(admin, old)
        await eventually(lambda: notifier.reconnects == 1, "the session to be replaced")
        assert notifier.connected
        assert notifier.backend_pid not in (None, old)
        assert received == [""]
        assert notifier.backoff.attempts == 0
        await admin.execute("SELECT pg_notify($1, 'q-after')", schema.wake_channel)
        await eventually(lambda: received == ["", "q-after"], "the next wake-up")
    finally:
        await notifier.close()


async def test_reconnect_gives_up_after_bounded_attempts(
    driver: Driver,
    dsn: str,
    unreachable_dsn: str,
    schema: Schema,
    admin: asyncpg.Connection[Any],
) -> None:
    """Without a reachable server the attempt that follows a loss fails, then each
    health_check makes its bounded attempts and is False."""
    own = await driver.connect(dsn)
    notifier: WakeListener[Any] = driver.notifier(
        unreachable_dsn,
        schema=schema,
        conn=own,
        reconnect_backoff_initial=0.001,
        reconnect_backoff_max=0.004,
        max_reconnect_attempts=3,
    )
    try:
        await notifier.start()
        await kill(admin, notifier.backend_pid)
        await eventually(lambda: notifier.backoff.attempts == 1, "the immediate attempt")
        assert await asyncio.wait_for(notifier.health_check(), WAIT) is False
        assert notifier.backoff.attempts == 4
        assert notifier.connected is False
        # The schedule carries on across checks until a reconnect succeeds.
        assert await asyncio.wait_for(notifier.health_check(), WAIT) is False
        assert notifier.backoff.attempts == 7
        assert notifier.reconnects == 0
    finally:
        await notifier.close()
        await driver.close(own)


async def test_close_cuts_a_backoff_wait_short(
    driver: Driver,
    dsn: str,
    unreachable_dsn: str,
    schema: Schema,
    admin: asyncpg.Connection[Any],
) -> None:
    """close() during a health check's reconnect backoff ends the check at once with False."""
    own = await driver.connect(dsn)
    notifier: WakeListener[Any] = driver.notifier(
        unreachable_dsn,
        schema=schema,
        conn=own,
        reconnect_backoff_initial=600.0,
        reconnect_backoff_max=600.0,
    )
    try:
        await notifier.start()
        await kill(admin, notifier.backend_pid)
        await eventually(lambda: notifier.backoff.attempts == 1, "the immediate attempt")
        check = asyncio.create_task(notifier.health_check())
        await eventually(lambda: notifier.backoff.attempts == 2, "the first backoff wait")
        await asyncio.wait_for(notifier.close(), WAIT)
        assert await asyncio.wait_for(check, WAIT) is False
    finally:
        await notifier.close()
        await driver.close(own)


async def test_a_health_check_restores_what_the_immediate_reconnect_could_not(
    driver: Driver, dsn: str, schema: Schema, admin: asyncpg.Connection[Any]
) -> None:
    """When the reconnect that follows a loss fails, the next health check reconnects,
    re-LISTENs on a new session, wakes every subscriber once and resets the backoff."""
    failures: list[StoreUnavailable] = []

    async def connect() -> Any:
        if failures:
            raise failures.pop()
        return await driver.connect(dsn)

    notifier: WakeListener[Any] = driver.notifier(
        dsn,
        schema=schema,
        connect=connect,
        reconnect_backoff_initial=0.001,
        reconnect_backoff_max=0.001,
        max_reconnect_attempts=1,
    )
    received: list[str] = []
    notifier.subscribe(received.append)
    try:
        await notifier.start()
        failures.append(StoreUnavailable("the first replacement session fails"))
        old = notifier.backend_pid
        await kill(admin, old)
        await eventually(lambda: not failures, "the immediate reconnect to fail")
        assert notifier.connected is False
        assert await asyncio.wait_for(notifier.health_check(), WAIT) is True
        assert (notifier.reconnects, notifier.backoff.attempts) == (1, 0)
        assert notifier.backend_pid not in (None, old)
        assert received == [""]
        await admin.execute("SELECT pg_notify($1, 'q-after')", schema.wake_channel)
        await eventually(lambda: received == ["", "q-after"], "the next wake-up")
    finally:
        await notifier.close()


async def test_notifier_on_unreachable_server_refuses_with_store_unavailable(
    driver: Driver, unreachable_dsn: str, schema: Schema
) -> None:
    """start() and publish() raise StoreUnavailable when no connection can be had."""
    notifier = driver.notifier(unreachable_dsn, schema=schema)
    with pytest.raises(StoreUnavailable):
        await notifier.start()
    with pytest.raises(StoreUnavailable):
        await notifier.publish("q")
    assert notifier.connected is False
    assert await notifier.health_check() is False  # never started: nothing to restore
    await notifier.close()


async def test_a_failing_callback_does_not_starve_the_others(
    driver: Driver, dsn: str, schema: Schema
) -> None:
    """A subscriber that raises is logged and skipped; later subscribers still get the wake-up."""
    notifier = driver.notifier(dsn, schema=schema)
    arrived = asyncio.Event()

    def broken(queue: str) -> None:
        raise RuntimeError(f"broken subscriber got {queue}")

    notifier.subscribe(broken)
    notifier.subscribe(lambda queue: arrived.set())
    try:
        await notifier.start()
        await notifier.publish("q")
        await asyncio.wait_for(arrived.wait(), WAIT)
    finally:
        await notifier.close()
