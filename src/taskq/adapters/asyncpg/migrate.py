"""Runs migrations over an asyncpg connection.

Concurrency: every run takes a session advisory lock keyed by the schema
name before it reads ``schema_migrations``, so concurrent ``migrate up``
processes take turns and the later ones find nothing left to do. Each
migration runs in its own transaction together with its
``schema_migrations`` row: a migration is applied entirely or not at all.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final, TypeAlias

import asyncpg

from taskq.adapters.postgres.dsn import dsn_location
from taskq.adapters.postgres.migrator import (
    AppliedMigration,
    Migration,
    discover_migrations,
    plan_down,
    plan_up,
)
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import AsyncpgQuery, asyncpg_queries, render_script
from taskq.domain.errors import ConfigurationError, MigrationError, StoreUnavailable

#: asyncpg's connection type (generic only to the type checker).
Connection: TypeAlias = "asyncpg.Connection[Any]"

#: Seconds to wait for a connection before reporting the database unreachable.
CONNECT_TIMEOUT: Final = 10.0

# Errors that mean the server went away or cannot be reached (not a bad statement).
_UNAVAILABLE: Final = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.InterfaceError,
)


def _reason(exc: BaseException) -> str:
    """A short, credential-free reason a connection failed."""
    text = str(exc)
    if isinstance(exc, ConnectionRefusedError) or "[Errno 111]" in text:
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, FileNotFoundError):
        return "no server socket there"
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first


async def connect(dsn: str, *, connect_timeout: float = CONNECT_TIMEOUT) -> Connection:
    """Open a connection; failures become domain errors naming host and port only.

    Raises :class:`StoreUnavailable` ("cannot connect to Postgres at
    HOST:PORT: REASON") when the server cannot be reached or refuses us, and
    :class:`ConfigurationError` for a malformed DSN.
    """
    where = dsn_location(dsn)
    try:
        conn: Connection = await asyncpg.connect(dsn, timeout=connect_timeout)
    except asyncpg.exceptions.ClientConfigurationError as exc:
        raise ConfigurationError(f"invalid Postgres DSN for {where}: {_reason(exc)}") from exc
    except (*_UNAVAILABLE, asyncpg.PostgresError) as exc:
        raise StoreUnavailable(f"cannot connect to Postgres at {where}: {_reason(exc)}") from exc
    except ValueError as exc:  # asyncpg's DSN parser
        raise ConfigurationError(f"invalid Postgres DSN for {where}: {_reason(exc)}") from exc
    return conn


@asynccontextmanager
async def open_connection(
    dsn: str, *, connect_timeout: float = CONNECT_TIMEOUT
) -> AsyncIterator[Connection]:
    """:func:`connect`, closed on exit."""
    conn = await connect(dsn, connect_timeout=connect_timeout)
    try:
        yield conn
    finally:
        await conn.close()


@contextmanager
def _db_errors(what: str) -> Iterator[None]:
    """Translate driver errors raised while doing ``what`` into domain errors."""
    try:
        yield
    except _UNAVAILABLE as exc:
        raise StoreUnavailable(
            f"lost the Postgres connection while {what}: {_reason(exc)}"
        ) from exc
    except asyncpg.PostgresError as exc:
        raise MigrationError(f"{what} failed: {_reason(exc)}") from exc


def _queries(schema: Schema) -> Mapping[str, AsyncpgQuery]:
    return asyncpg_queries("migrations", schema)


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


async def _apply(conn: Connection, schema: Schema, migration: Migration, *, up: bool) -> None:
    q = _queries(schema)
    file = migration.up_file if up else migration.down_file
    script = render_script(migration.up_sql if up else migration.down_sql, schema, source=file)
    with _db_errors(f"migration {file} (rolled back)"):
        async with conn.transaction():
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
) -> tuple[Migration, ...]:
    """Create the schema if needed and apply pending migrations up to ``target``.

    Returns what this call applied (empty when the schema was already
    there). ``migrations`` defaults to the packaged ones. Raises
    :class:`MigrationError` (see ``migrator.plan_up``) before changing
    anything when history and files disagree.
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
            await _apply(conn, schema, migration, up=True)
    return plan


async def downgrade(
    conn: Connection,
    schema: Schema,
    *,
    to: int | None = None,
    migrations: Sequence[Migration] | None = None,
) -> tuple[Migration, ...]:
    """Revert applied migrations newer than ``to`` (default: only the latest), newest first.

    Returns what this call reverted. The schema and ``schema_migrations``
    stay, even at ``to=0``.
    """
    available = discover_migrations() if migrations is None else tuple(migrations)
    async with _migration_lock(conn, schema):
        plan = plan_down(available, await read_applied(conn, schema), to=to)
        for migration in plan:
            await _apply(conn, schema, migration, up=False)
    return plan


async def drop_schema(conn: Connection, schema: Schema) -> None:
    """Drop the schema and every table in it (test teardown, full removal)."""
    with _db_errors(f"dropping schema {schema.name}"):
        await conn.execute(_queries(schema)["drop_schema"].sql)


__all__ = [
    "CONNECT_TIMEOUT",
    "Connection",
    "connect",
    "downgrade",
    "drop_schema",
    "open_connection",
    "read_applied",
    "upgrade",
]
