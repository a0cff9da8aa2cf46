"""Runs migrations over an asyncpg connection.

Concurrency: every run takes a session advisory lock keyed by the schema
name before it reads ``schema_migrations``, so concurrent ``migrate up``
processes take turns and the later ones find nothing left to do. Each
migration runs in its own transaction together with its
``schema_migrations`` row: a migration is applied entirely or not at all.

Lock budget: each migration's transaction sets a transaction-local
``lock_timeout`` (:data:`MIGRATION_LOCK_TIMEOUT` unless the caller passes
another). DDL on a busy table waits for an exclusive lock, and while it waits
every later reader and writer of that table queues behind it; one long
transaction holding the jobs table would so stop all work. With the budget the
migration fails fast instead, naming the sessions in the way, and is rolled
back. The advisory lock that makes concurrent runs take turns is taken outside
these transactions, so a run still waits for another run to finish.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import Any, Final, TypeAlias

import asyncpg

from taskq.adapters.postgres.driver import connect_reason as _reason
from taskq.adapters.postgres.dsn import dsn_location, scrub_password
from taskq.adapters.postgres.migrator import (
    AppliedMigration,
    Migration,
    check_keeps_job_tables,
    discover_migrations,
    plan_down,
    plan_up,
)
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import NumberedQuery, numbered_queries, render_script
from taskq.adapters.postgres.store.base import lock_timeout_text
from taskq.domain.errors import ConfigurationError, MigrationError, StoreUnavailable

#: asyncpg's connection type (generic only to the type checker).
Connection: TypeAlias = "asyncpg.Connection[Any]"

#: Seconds to wait for a connection before reporting the database unreachable.
CONNECT_TIMEOUT: Final = 10.0
#: How long one migration may wait for a lock (``lock_timeout``, local to its transaction).
#: Long enough for the short transactions of running workers, short enough that writers
#: queued behind the migration's lock request are not stalled for long. Zero: no bound.
MIGRATION_LOCK_TIMEOUT: Final = timedelta(seconds=5)

# Errors that mean the server went away or cannot be reached (not a bad statement).
_UNAVAILABLE: Final = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.InterfaceError,
)


async def connect(
    dsn: str, *, connect_timeout: float = CONNECT_TIMEOUT, statement_cache_size: int = 100
) -> Connection:
    """Open a connection; failures become domain errors naming host and port only.

    Raises :class:`StoreUnavailable` ("cannot connect to Postgres at
    HOST:PORT: REASON") when the server cannot be reached or refuses us, and
    :class:`ConfigurationError` for a malformed DSN.
    """
    where = dsn_location(dsn)
    try:
        conn: Connection = await asyncpg.connect(
            dsn, timeout=connect_timeout, statement_cache_size=statement_cache_size
        )
    except asyncpg.exceptions.ClientConfigurationError as exc:
        raise ConfigurationError(
            f"invalid Postgres DSN for {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    except (*_UNAVAILABLE, asyncpg.PostgresError) as exc:
        raise StoreUnavailable(
            f"cannot connect to Postgres at {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    except ValueError as exc:  # asyncpg's DSN parser
        raise ConfigurationError(
            f"invalid Postgres DSN for {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    return conn


@asynccontextmanager
async def open_connection(
    dsn: str, *, connect_timeout: float = CONNECT_TIMEOUT
) -> AsyncIterator[Connection]:
    """:func:`connect`, for migrations and other administration, closed on exit."""
    conn = await connect(dsn, connect_timeout=connect_timeout)
    try:
        # A migration rewrites or indexes a whole table: a role's or database's
        # statement_timeout, meant for application queries, would cut one off halfway.
        # Lock waits stay bounded by each migration's own lock_timeout.
        with _db_errors("preparing the migration session"):
            await conn.execute("SET statement_timeout = 0")
        yield conn
    finally:
        await conn.close()


@contextmanager
def _db_errors(what: str) -> Iterator[None]:
    """Translate driver errors raised while doing ``what`` into domain errors."""
    try:
        yield
    except asyncpg.exceptions.QueryCanceledError as exc:
        # A cancel (pg_cancel_backend) is not a lost connection.
        raise StoreUnavailable(f"{what} was canceled: {_reason(exc)}") from exc
    except _UNAVAILABLE as exc:
        raise StoreUnavailable(
            f"lost the Postgres connection while {what}: {_reason(exc)}"
        ) from exc
    except asyncpg.PostgresError as exc:
        raise MigrationError(f"{what} failed: {_reason(exc)}") from exc


def _queries(schema: Schema) -> Mapping[str, NumberedQuery]:
    return numbered_queries("migrations", schema)


@asynccontextmanager
async def _migration_lock(conn: Connection, schema: Schema) -> AsyncIterator[None]:
    q = _queries(schema)
    key = schema.lock_key("migrate")
    with _db_errors(f"waiting for the migration lock of schema {schema.name}"):
        await conn.execute(q["lock_migrations"].sql, *q["lock_migrations"].args(lock_key=key))
    try:
        yield
    finally:
        if not conn.is_closed():
            with _db_errors("releasing the migration lock"):
                await conn.execute(
                    q["unlock_migrations"].sql, *q["unlock_migrations"].args(lock_key=key)
                )


async def _table_exists(conn: Connection, schema: Schema) -> bool:
    q = _queries(schema)["migrations_table_exists"]
    return bool(await conn.fetchval(q.sql, *q.args(schema_name=schema.name)))


async def read_applied(conn: Connection, schema: Schema) -> tuple[AppliedMigration, ...]:
    """The ``schema_migrations`` rows, by version; empty when the schema was never migrated."""
    with _db_errors(f"reading the migrations applied to schema {schema.name}"):
        if not await _table_exists(conn, schema):
            return ()
        rows = await conn.fetch(_queries(schema)["applied_migrations"].sql)
    return tuple(
        AppliedMigration(r["version"], r["name"], r["checksum"], r["applied_at"]) for r in rows
    )


async def _lock_holders(conn: Connection, schema: Schema) -> str:
    """Who holds locks on the schema's tables, as one line; "" when that cannot be read."""
    q = _queries(schema)["lock_holders"]
    try:
        rows = await conn.fetch(q.sql, *q.args(schema_name=schema.name))
    except (asyncpg.PostgresError, asyncpg.InterfaceError):
        return ""
    held = []
    for r in rows:
        state = r["state"] or "state hidden"
        age = "" if r["xact_seconds"] is None else f", transaction open {r['xact_seconds']}s"
        held.append(f"pid {r['pid']} ({state}{age}) on {r['tables']}")
    return "; ".join(held)


async def _lock_timed_out(
    conn: Connection, schema: Schema, file: str, lock_timeout: timedelta
) -> MigrationError:
    holders = await _lock_holders(conn, schema)
    return MigrationError(
        f"migration {file} gave up waiting for a table lock after "
        f"{lock_timeout.total_seconds():g}s (lock_timeout) and was rolled back (migrations "
        f"before it stay applied). Another session holds a conflicting lock on a table of "
        f"schema {schema.name}, typically a long-running or idle-in-transaction session"
        + (f" (holding locks now: {holders})" if holders else "")
        + ". Let it finish or end it (pg_terminate_backend), then migrate again; waiting "
        "for it would have blocked every read and write of the table behind the migration"
    )


async def _apply(
    conn: Connection, schema: Schema, migration: Migration, *, up: bool, lock_timeout: timedelta
) -> None:
    q = _queries(schema)
    file = migration.up_file if up else migration.down_file
    script = render_script(migration.up_sql if up else migration.down_sql, schema, source=file)
    budget = q["set_migration_lock_timeout"]
    budget_args = budget.args(lock_timeout=lock_timeout_text(lock_timeout.total_seconds() * 1000))
    with _db_errors(f"migration {file} (rolled back)"):
        try:
            async with conn.transaction():
                await conn.execute(budget.sql, *budget_args)
                await _run_migration(conn, q, script, migration, up=up)
        except asyncpg.exceptions.LockNotAvailableError as exc:
            raise await _lock_timed_out(conn, schema, file, lock_timeout) from exc


async def _run_migration(
    conn: Connection,
    q: Mapping[str, NumberedQuery],
    script: str,
    migration: Migration,
    *,
    up: bool,
) -> None:
    """The migration's script and its ``schema_migrations`` bookkeeping (in its transaction)."""
    await conn.execute(script)
    if up:
        record = q["record_migration"]
        args = record.args(
            version=migration.version, name=migration.name, checksum=migration.checksum
        )
        await conn.execute(record.sql, *args)
    else:
        forget = q["forget_migration"]
        await conn.execute(forget.sql, *forget.args(version=migration.version))


async def upgrade(
    conn: Connection,
    schema: Schema,
    *,
    target: int | None = None,
    migrations: Sequence[Migration] | None = None,
    lock_timeout: timedelta = MIGRATION_LOCK_TIMEOUT,
) -> tuple[Migration, ...]:
    """Create the schema if needed and apply pending migrations up to ``target``.

    Returns what this call applied (empty when the schema was already
    there). ``migrations`` defaults to the packaged ones. Raises
    :class:`MigrationError` (see ``migrator.plan_up``) before changing
    anything when history and files disagree, and when a migration waited
    longer than ``lock_timeout`` for a lock (that migration is rolled back,
    earlier ones stay applied; zero waits without bound).
    """
    available = discover_migrations() if migrations is None else tuple(migrations)
    q = _queries(schema)
    async with _migration_lock(conn, schema):
        with _db_errors(f"creating schema {schema.name}"):
            exists = q["schema_exists"]
            if not await conn.fetchval(exists.sql, *exists.args(schema_name=schema.name)):
                await conn.execute(q["create_schema"].sql)
            await conn.execute(q["create_migrations_table"].sql)
        plan = plan_up(available, await read_applied(conn, schema), target=target)
        for migration in plan:
            await _apply(conn, schema, migration, up=True, lock_timeout=lock_timeout)
    return plan


async def downgrade(
    conn: Connection,
    schema: Schema,
    *,
    to: int | None = None,
    migrations: Sequence[Migration] | None = None,
    lock_timeout: timedelta = MIGRATION_LOCK_TIMEOUT,
    drop_job_tables: bool = True,
) -> tuple[Migration, ...]:
    """Revert applied migrations newer than ``to`` (default: only the latest), newest first.

    Returns what this call reverted. The schema and ``schema_migrations``
    stay, even at ``to=0``. ``lock_timeout`` bounds each migration's lock
    waits, as for :func:`upgrade`. With ``drop_job_tables=False`` a plan that
    would drop the tables holding jobs raises ``JobTablesWouldBeDropped``
    before anything is reverted.
    """
    available = discover_migrations() if migrations is None else tuple(migrations)
    async with _migration_lock(conn, schema):
        plan = plan_down(available, await read_applied(conn, schema), to=to)
        if not drop_job_tables:
            check_keeps_job_tables(plan, schema.name)
        for migration in plan:
            await _apply(conn, schema, migration, up=False, lock_timeout=lock_timeout)
    return plan


async def drop_schema(conn: Connection, schema: Schema) -> None:
    """Drop the schema and every table in it (test teardown, full removal)."""
    with _db_errors(f"dropping schema {schema.name}"):
        await conn.execute(_queries(schema)["drop_schema"].sql)


__all__ = [
    "CONNECT_TIMEOUT",
    "MIGRATION_LOCK_TIMEOUT",
    "Connection",
    "connect",
    "downgrade",
    "drop_schema",
    "open_connection",
    "read_applied",
    "upgrade",
]
