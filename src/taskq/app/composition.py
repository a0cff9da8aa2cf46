"""The composition root: the one app module that names concrete adapters.

Everything else in ``taskq.app`` talks to ports, or to the functions here.
Nothing happens at import time.
"""

from __future__ import annotations

from dataclasses import dataclass

from taskq.adapters.asyncpg import migrate as asyncpg_migrate
from taskq.adapters.postgres.migrator import (
    Migration,
    MigrationState,
    MigrationStatus,
    discover_migrations,
    migration_status,
    status_problems,
)
from taskq.adapters.postgres.schema import DEFAULT_SCHEMA_NAME, Schema


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What ``taskq migrate status`` shows: every migration's state, and any problem.

    ``problems`` is empty when the applied history matches the files;
    otherwise it is the message ``up``/``down`` would refuse with.
    """

    schema: str
    rows: tuple[MigrationStatus, ...]
    problems: str


async def migrate_up(
    *, dsn: str, schema_name: str = DEFAULT_SCHEMA_NAME, target: int | None = None
) -> tuple[Migration, ...]:
    """Apply pending migrations (up to ``target``); returns those applied.

    The schema name is validated before any connection is made. Raises
    ``InvalidIdentifierError``, ``StoreUnavailable`` or ``MigrationError``.
    """
    schema = Schema(schema_name)
    async with asyncpg_migrate.open_connection(dsn) as conn:
        return await asyncpg_migrate.upgrade(conn, schema, target=target)


async def migrate_down(
    *, dsn: str, schema_name: str = DEFAULT_SCHEMA_NAME, to: int | None = None
) -> tuple[Migration, ...]:
    """Revert migrations newer than ``to`` (default: the latest one); returns those reverted."""
    schema = Schema(schema_name)
    async with asyncpg_migrate.open_connection(dsn) as conn:
        return await asyncpg_migrate.downgrade(conn, schema, to=to)


async def migrate_status(*, dsn: str, schema_name: str = DEFAULT_SCHEMA_NAME) -> MigrationReport:
    """Applied and pending migrations of the schema; creates nothing."""
    schema = Schema(schema_name)
    available = discover_migrations()
    async with asyncpg_migrate.open_connection(dsn) as conn:
        applied = await asyncpg_migrate.read_applied(conn, schema)
    return MigrationReport(
        schema.name, migration_status(available, applied), status_problems(available, applied)
    )


__all__ = [
    "Migration",
    "MigrationReport",
    "MigrationState",
    "MigrationStatus",
    "migrate_down",
    "migrate_status",
    "migrate_up",
]
