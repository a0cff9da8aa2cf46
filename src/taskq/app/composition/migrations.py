"""Migrating, inspecting and dropping a TaskQ schema (``taskq migrate``, the demo)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from taskq.adapters.asyncpg import migrate as asyncpg_migrate
from taskq.adapters.postgres.migrator import (
    JobTablesWouldBeDropped,
    Migration,
    MigrationStatus,
    check_known_version,
    discover_migrations,
    migration_status,
    newer_applied,
    status_problems,
)
from taskq.adapters.postgres.schema import DEFAULT_SCHEMA_NAME, Schema
from taskq.app.settings import require_pg_dsn


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What ``taskq migrate status`` shows: every migration's state, and any problem.

    ``problems`` is empty when the applied history matches the files;
    otherwise it is the message ``up``/``down`` would refuse with.
    """

    schema: str
    rows: tuple[MigrationStatus, ...]
    problems: str
    #: Labels of the migrations a newer TaskQ applied (shown as unknown; no problem).
    newer: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UpgradeReport:
    """What ``taskq migrate up`` did: the migrations it applied, in order, and the
    labels of those a newer TaskQ had applied (left as they are)."""

    applied: tuple[Migration, ...]
    newer: tuple[str, ...]


def describe_target(dsn: str, schema: str) -> str:
    """``schema X in database D at host:port``: what ``taskq migrate`` works on, no password."""
    from taskq.adapters.postgres.dsn import dsn_database, dsn_location

    database = dsn_database(dsn) or "(the user's default database)"
    return f"schema {schema} in database {database} at {dsn_location(dsn)}"


async def migrate_up(
    *,
    dsn: str,
    schema_name: str = DEFAULT_SCHEMA_NAME,
    target: int | None = None,
    lock_timeout: timedelta = asyncpg_migrate.MIGRATION_LOCK_TIMEOUT,
) -> tuple[Migration, ...]:
    """Apply pending migrations (up to ``target``); returns those applied.

    Each migration gives up (rolled back, ``MigrationError`` naming the lock
    holders) after waiting ``lock_timeout`` for a table lock; zero waits as
    long as it takes. The schema name is validated before any connection is
    made. Migrations a newer TaskQ applied are left as they are (see
    :func:`upgrade_schema`, which names them). Raises ``InvalidIdentifierError``,
    ``StoreUnavailable`` or ``MigrationError``.
    """
    report = await upgrade_schema(
        dsn=dsn, schema_name=schema_name, target=target, lock_timeout=lock_timeout
    )
    return report.applied


async def upgrade_schema(
    *,
    dsn: str,
    schema_name: str = DEFAULT_SCHEMA_NAME,
    target: int | None = None,
    lock_timeout: timedelta = asyncpg_migrate.MIGRATION_LOCK_TIMEOUT,
) -> UpgradeReport:
    """:func:`migrate_up`, also naming the migrations a newer TaskQ applied."""
    schema = Schema(schema_name)
    available = discover_migrations()
    if target is not None:  # before connecting: a typo must not create the schema
        check_known_version(available, target, "target")
    async with asyncpg_migrate.open_connection(require_pg_dsn(dsn)) as conn:
        applied = await asyncpg_migrate.upgrade(
            conn, schema, target=target, lock_timeout=lock_timeout
        )
        rows = await asyncpg_migrate.read_applied(conn, schema)
    newer = tuple(f"{row.version:04d}_{row.name}" for row in newer_applied(available, rows))
    return UpgradeReport(applied, newer)


async def migrate_down(
    *,
    dsn: str,
    schema_name: str = DEFAULT_SCHEMA_NAME,
    to: int | None = None,
    lock_timeout: timedelta = asyncpg_migrate.MIGRATION_LOCK_TIMEOUT,
    drop_job_tables: bool = True,
) -> tuple[Migration, ...]:
    """Revert migrations newer than ``to`` (default: the latest one); returns those reverted.

    With ``drop_job_tables=False``, a revert that would drop the tables holding
    jobs (``JOB_TABLES``) raises ``JobTablesWouldBeDropped`` and reverts nothing.
    """
    schema = Schema(schema_name)
    if to:
        check_known_version(discover_migrations(), to, "--to")
    async with asyncpg_migrate.open_connection(require_pg_dsn(dsn)) as conn:
        return await asyncpg_migrate.downgrade(
            conn, schema, to=to, lock_timeout=lock_timeout, drop_job_tables=drop_job_tables
        )


async def migrate_status(*, dsn: str, schema_name: str = DEFAULT_SCHEMA_NAME) -> MigrationReport:
    """Applied and pending migrations of the schema; creates nothing."""
    schema = Schema(schema_name)
    available = discover_migrations()
    async with asyncpg_migrate.open_connection(require_pg_dsn(dsn)) as conn:
        applied = await asyncpg_migrate.read_applied(conn, schema)
    return MigrationReport(
        schema.name,
        migration_status(available, applied),
        status_problems(available, applied),
        tuple(f"{row.version:04d}_{row.name}" for row in newer_applied(available, applied)),
    )


async def drop_schema(*, dsn: str, schema_name: str) -> None:
    """Drop ``schema_name`` and everything in it (a missing schema is fine)."""
    schema = Schema(schema_name)
    async with asyncpg_migrate.open_connection(require_pg_dsn(dsn)) as conn:
        await asyncpg_migrate.drop_schema(conn, schema)


__all__ = [
    "JobTablesWouldBeDropped",
    "MigrationReport",
    "UpgradeReport",
    "describe_target",
    "drop_schema",
    "migrate_down",
    "migrate_status",
    "migrate_up",
    "upgrade_schema",
]
