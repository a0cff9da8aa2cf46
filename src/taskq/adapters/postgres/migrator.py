"""Migration planning: which files exist, which are applied, what to run next.

Pure: no connection, no clock. The driver reads ``schema_migrations`` and
executes the plan (see ``taskq.adapters.asyncpg.migrate``).

Files live in ``migrations/`` beside this module, as pairs
``NNNN_name.up.sql`` / ``NNNN_name.down.sql`` (``NNNN`` is the version, four
digits). An applied migration is pinned by the checksum of its ``.up.sql``
file: editing that file afterwards makes every plan refuse to run, naming the
file, because the database would no longer match what the code describes.
Schema changes always go into a new migration.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Final

from taskq.domain.errors import MigrationError, SchemaNotMigrated

#: The package whose ``migrations/`` directory holds TaskQ's migrations.
MIGRATIONS_PACKAGE: Final = "taskq.adapters.postgres"
_FILE = re.compile(r"([0-9]{4})_([a-z0-9_]+)\.(up|down)\.sql")
#: The tables that hold jobs: the queue itself, its archive and every attempt's history.
JOB_TABLES: Final = ("jobs", "jobs_archive", "job_attempts")
# A down script that drops one of them (or the whole schema) loses jobs; dropping a
# column loses part of each job's record, not the jobs, and does not count.
_DROPS_JOBS = re.compile(
    r"\bDROP\s+(?:SCHEMA\b|TABLE\s+(?:IF\s+EXISTS\s+)?\{schema\}\.(?:"
    + "|".join(JOB_TABLES)
    + r")\b)",
    re.IGNORECASE,
)


def checksum(text: str) -> str:
    """SHA-256 (hex) of a migration's text; line endings do not count."""
    return hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration: its version, name, both scripts, and the up script's checksum."""

    version: int
    name: str
    up_sql: str = field(repr=False)
    down_sql: str = field(repr=False)
    checksum: str = field(repr=False)

    @property
    def label(self) -> str:
        """``0001_jobs``: how messages and ``status`` name it."""
        return f"{self.version:04d}_{self.name}"

    @property
    def up_file(self) -> str:
        return f"{self.label}.up.sql"

    @property
    def down_file(self) -> str:
        return f"{self.label}.down.sql"

    @property
    def drops_job_tables(self) -> bool:
        """Whether reverting it drops a table in :data:`JOB_TABLES` (or the schema)."""
        return _DROPS_JOBS.search(self.down_sql) is not None


class JobTablesWouldBeDropped(MigrationError):
    """A revert would drop the tables holding jobs, and the caller did not confirm it."""


def make_migration(version: int, name: str, up_sql: str, down_sql: str) -> Migration:
    """A migration from its parts, with the checksum computed."""
    return Migration(version, name, up_sql, down_sql, checksum(up_sql))


@dataclass(frozen=True, slots=True)
class AppliedMigration:
    """One ``schema_migrations`` row."""

    version: int
    name: str
    checksum: str
    applied_at: datetime


class MigrationState(StrEnum):
    APPLIED = "applied"
    PENDING = "pending"
    CHANGED = "changed"  # applied, but its file no longer matches (name or checksum)
    UNKNOWN = "unknown"  # applied, but this version of TaskQ has no such file


@dataclass(frozen=True, slots=True)
class MigrationStatus:
    """One line of ``taskq migrate status``."""

    version: int
    name: str
    state: MigrationState
    applied_at: datetime | None

    @property
    def label(self) -> str:
        return f"{self.version:04d}_{self.name}"


def discover_migrations(directory: Traversable | Path | None = None) -> tuple[Migration, ...]:
    """Every migration in ``directory`` (default: the packaged ones), by version.

    Files other than ``*.sql`` are ignored. Raises :class:`MigrationError` for
    a ``.sql`` file with a bad name, a version with a missing or extra file,
    or two names for one version.
    """
    folder = directory or resources.files(MIGRATIONS_PACKAGE).joinpath("migrations")
    parts: dict[int, dict[str, tuple[str, str]]] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE.fullmatch(entry.name)
        if match is None:
            raise MigrationError(
                f"migration file {entry.name!r} is not named NNNN_name.up.sql or "
                "NNNN_name.down.sql (lowercase name)"
            )
        version, name, direction = int(match.group(1)), match.group(2), match.group(3)
        if version < 1:
            raise MigrationError(f"migration file {entry.name!r}: versions start at 0001")
        found = parts.setdefault(version, {})
        names = {n for n, _ in found.values()}
        if names and name not in names:
            raise MigrationError(
                f"migration version {version:04d} has two names: {sorted({*names, name})}"
            )
        found[direction] = (name, entry.read_text(encoding="utf-8"))
    migrations: list[Migration] = []
    for version in sorted(parts):
        found = parts[version]
        for direction in ("up", "down"):
            if direction not in found:
                (name, _), *_ = found.values()
                raise MigrationError(
                    f"migration {version:04d}_{name} has no {version:04d}_{name}.{direction}.sql"
                )
        name, up_sql = found["up"]
        migrations.append(make_migration(version, name, up_sql, found["down"][1]))
    return tuple(migrations)


def _problems(
    available: Sequence[Migration], applied: Iterable[AppliedMigration]
) -> list[tuple[AppliedMigration, MigrationState, str]]:
    by_version = {m.version: m for m in available}
    latest = max(by_version, default=0)
    out: list[tuple[AppliedMigration, MigrationState, str]] = []
    for row in applied:
        label = f"{row.version:04d}_{row.name}"
        migration = by_version.get(row.version)
        if migration is None:
            why = (
                "was the database migrated by a newer TaskQ? Revert it with that TaskQ"
                if row.version > latest
                else "was its file removed?"
            )
            out.append(
                (
                    row,
                    MigrationState.UNKNOWN,
                    f"the database has migration {label} applied but this version of TaskQ "
                    f"has no such migration file ({why})",
                )
            )
        elif migration.name != row.name:
            out.append(
                (
                    row,
                    MigrationState.CHANGED,
                    f"migration {row.version:04d} was applied as {label} but its file is now "
                    f"{migration.up_file}",
                )
            )
        elif migration.checksum != row.checksum:
            out.append(
                (
                    row,
                    MigrationState.CHANGED,
                    f"migration file {migration.up_file} was changed after it was applied "
                    f"(checksum applied {row.checksum[:12]}, file now {migration.checksum[:12]}); "
                    "restore it and put schema changes in a new migration",
                )
            )
    return out


def verify_applied(available: Sequence[Migration], applied: Sequence[AppliedMigration]) -> None:
    """Raise :class:`MigrationError` when applied history and files disagree.

    Every problem is named in one message: a changed ``.up.sql`` (by file
    name), a renamed file, or an applied version with no file.
    """
    problems = _problems(available, applied)
    if problems:
        raise MigrationError("; ".join(message for _, _, message in problems))


def newer_applied(
    available: Sequence[Migration], applied: Iterable[AppliedMigration]
) -> tuple[AppliedMigration, ...]:
    """The applied migrations newer than every file: a newer TaskQ applied them.

    Migrations only add, so this TaskQ runs on such a schema (a deploy rolled
    back); an unknown version *below* its latest file is a removed file instead.
    """
    latest = max((m.version for m in available), default=0)
    return tuple(row for row in applied if row.version > latest)


def check_keeps_job_tables(plan: Sequence[Migration], schema: str) -> None:
    """Raise :class:`JobTablesWouldBeDropped` when reverting ``plan`` drops the job tables."""
    dropping = [m.label for m in plan if m.drops_job_tables]
    if dropping:
        raise JobTablesWouldBeDropped(
            f"reverting {', '.join(dropping)} drops the tables holding jobs "
            f"({', '.join(JOB_TABLES)}) in schema {schema}, and every job in them"
        )


def check_known_version(available: Sequence[Migration], version: int, what: str) -> None:
    """Raise :class:`MigrationError` unless ``version`` is one of ``available``'s."""
    known = [m.version for m in available]
    if version not in known:
        listing = ", ".join(f"{v:04d}" for v in known) or "none"
        raise MigrationError(
            f"{what} {version} is not a known migration version (known: {listing})"
        )


def plan_up(
    available: Sequence[Migration],
    applied: Sequence[AppliedMigration],
    *,
    target: int | None = None,
) -> tuple[Migration, ...]:
    """The migrations to apply, in order, to reach ``target`` (default: the latest).

    Empty when already there, or when ``target`` is below the current version
    (``up`` never reverts). Migrations newer than every file (see
    :func:`newer_applied`) are left as they are. Raises :class:`MigrationError`
    when history and files disagree, ``target`` is unknown, or a pending
    migration is older than one already applied.
    """
    newer = newer_applied(available, applied)
    verify_applied(available, [row for row in applied if row not in newer])
    if target is not None:
        check_known_version(available, target, "target")
    done = {row.version for row in applied}
    latest = max(done, default=0)
    pending = [
        m
        for m in sorted(available, key=lambda m: m.version)
        if m.version not in done and (target is None or m.version <= target)
    ]
    stale = [m.label for m in pending if m.version < latest]
    if stale:
        raise MigrationError(
            f"migration(s) {', '.join(stale)} are pending but {latest:04d} is already applied; "
            "migrations must be applied in version order"
        )
    return tuple(pending)


def plan_down(
    available: Sequence[Migration],
    applied: Sequence[AppliedMigration],
    *,
    to: int | None = None,
) -> tuple[Migration, ...]:
    """The applied migrations to revert, newest first, so that ``to`` is the latest left.

    ``to=0`` reverts everything; ``to=None`` reverts only the latest applied
    migration. Raises :class:`MigrationError` when history and files
    disagree or ``to`` is neither 0 nor a known version.
    """
    verify_applied(available, applied)
    done = sorted(row.version for row in applied)
    if to is None:
        to = done[-2] if len(done) >= 2 else 0
    elif to != 0:
        check_known_version(available, to, "--to")
    by_version = {m.version: m for m in available}
    return tuple(by_version[v] for v in reversed(done) if v > to)


def migration_status(
    available: Sequence[Migration], applied: Sequence[AppliedMigration]
) -> tuple[MigrationStatus, ...]:
    """Every known or applied migration with its state, by version. Never raises."""
    flagged = {row.version: state for row, state, _ in _problems(available, applied)}
    rows = {row.version: row for row in applied}
    out = [
        MigrationStatus(
            m.version,
            m.name,
            flagged.get(
                m.version, MigrationState.APPLIED if m.version in rows else MigrationState.PENDING
            ),
            rows[m.version].applied_at if m.version in rows else None,
        )
        for m in available
    ]
    known = {m.version for m in available}
    out.extend(
        MigrationStatus(r.version, r.name, MigrationState.UNKNOWN, r.applied_at)
        for r in applied
        if r.version not in known
    )
    return tuple(sorted(out, key=lambda s: s.version))


def check_schema_current(
    available: Sequence[Migration], applied: Iterable[int], *, schema: str
) -> str | None:
    """Refuse a schema behind ``available``; describe one ahead of it.

    Raises :class:`SchemaNotMigrated` (naming both versions and ``taskq
    migrate up``) when a known migration is not applied. Returns a warning
    when the schema holds migrations this TaskQ does not know (a newer TaskQ
    migrated it: migrations only add, so older code keeps working during a
    rolling deploy), else ``None``.
    """
    done = set(applied)
    known = {m.version for m in available}
    missing = sorted(known - done)
    if missing:
        have = f"{max(done):04d}" if done else "none"
        raise SchemaNotMigrated(
            f"schema {schema} is behind this TaskQ: its latest applied migration is {have}, "
            f"this TaskQ needs {max(known):04d} (missing: "
            f"{', '.join(f'{v:04d}' for v in missing)}); run `taskq migrate up --schema "
            f"{schema}` on this database first"
        )
    newer = sorted(done - known)
    if newer:
        return (
            f"schema {schema} has migration(s) {', '.join(f'{v:04d}' for v in newer)} that this "
            f"TaskQ does not know (it knows up to {max(known, default=0):04d}): a newer TaskQ "
            "migrated it; upgrade this worker"
        )
    return None


def status_problems(available: Sequence[Migration], applied: Sequence[AppliedMigration]) -> str:
    """What stops ``up``: the message :func:`verify_applied` would raise for all but the
    newer migrations (:func:`newer_applied`), or ``""`` when all is well."""
    newer = newer_applied(available, applied)
    return "; ".join(
        message for row, _, message in _problems(available, applied) if row not in newer
    )


__all__ = [
    "JOB_TABLES",
    "MIGRATIONS_PACKAGE",
    "AppliedMigration",
    "JobTablesWouldBeDropped",
    "Migration",
    "MigrationState",
    "MigrationStatus",
    "check_keeps_job_tables",
    "check_known_version",
    "check_schema_current",
    "checksum",
    "discover_migrations",
    "make_migration",
    "migration_status",
    "newer_applied",
    "plan_down",
    "plan_up",
    "status_problems",
    "verify_applied",
]
