"""Migration planning: discovery, checksums, up/down plans, status, refusals."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from taskq.adapters.postgres.migrator import (
    AppliedMigration,
    JobTablesWouldBeDropped,
    Migration,
    MigrationState,
    check_keeps_job_tables,
    check_schema_current,
    checksum,
    discover_migrations,
    make_migration,
    migration_status,
    newer_applied,
    plan_down,
    plan_up,
    status_problems,
    verify_applied,
)
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import SCHEMA_TOKEN, render_script
from taskq.domain.errors import MigrationError, SchemaNotMigrated
from taskq.domain.status import JobStatus

T0 = datetime(2030, 1, 1, tzinfo=UTC)
M = tuple(
    make_migration(v, f"m{v}", f"CREATE TABLE t{v} ();", f"DROP TABLE t{v};") for v in (1, 2, 3)
)


def applied(*migrations: Migration) -> tuple[AppliedMigration, ...]:
    """The schema_migrations rows recording ``migrations`` as applied."""
    return tuple(AppliedMigration(m.version, m.name, m.checksum, T0) for m in migrations)


def write(folder: Path, *names: str) -> Path:
    """Create empty-ish migration files ``names`` in ``folder``."""
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text(f"-- {name}\nSELECT 1;\n", encoding="utf-8")
    return folder


def test_discovers_pairs_by_version_and_ignores_other_files(tmp_path: Path) -> None:
    """Up/down pairs are found in version order; non-.sql files are ignored."""
    folder = write(
        tmp_path / "m", "0002_b.up.sql", "0002_b.down.sql", "0001_a.up.sql", "0001_a.down.sql"
    )
    (folder / "README.md").write_text("notes", encoding="utf-8")
    found = discover_migrations(folder)
    assert [(m.version, m.name) for m in found] == [(1, "a"), (2, "b")]
    assert found[0].label == "0001_a"
    assert found[0].up_sql == "-- 0001_a.up.sql\nSELECT 1;\n"
    assert found[0].down_sql == "-- 0001_a.down.sql\nSELECT 1;\n"
    assert found[0].checksum == checksum(found[0].up_sql)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (["0001_a.up.sql"], r"0001_a has no 0001_a.down.sql"),
        (["0001_a.down.sql"], r"0001_a has no 0001_a.up.sql"),
        (["1_a.up.sql"], r"'1_a.up.sql' is not named NNNN_name"),
        (["0001_A.up.sql"], r"is not named"),
        (["0001_a.sideways.sql"], r"is not named"),
        (["0000_a.up.sql", "0000_a.down.sql"], r"versions start at 0001"),
        (["0001_a.up.sql", "0001_b.down.sql"], r"version 0001 has two names"),
    ],
)
def test_malformed_migration_folders_are_refused(
    tmp_path: Path, files: list[str], message: str
) -> None:
    """A bad file name, a missing half of a pair, or two names for one version is refused."""
    with pytest.raises(MigrationError, match=message):
        discover_migrations(write(tmp_path / "m", *files))


def test_checksum_ignores_line_endings_but_not_content() -> None:
    """CRLF checkouts keep the checksum; any content change alters it."""
    assert checksum("a\r\nb\n") == checksum("a\nb\n")
    assert checksum("a\nb\n") != checksum("a\nc\n")


def test_plan_up_applies_everything_pending_in_order() -> None:
    """From nothing, up applies every migration; after that, nothing."""
    assert plan_up(M, ()) == M
    assert plan_up(M, applied(*M)) == ()
    assert plan_up(M, applied(M[0])) == M[1:]


def test_plan_up_stops_at_target() -> None:
    """--target N applies up to N; a target below the current version applies nothing."""
    assert plan_up(M, (), target=2) == M[:2]
    assert plan_up(M, applied(M[0]), target=2) == (M[1],)
    assert plan_up(M, applied(*M[:2]), target=1) == ()


def test_plan_up_refuses_an_unknown_target() -> None:
    """A target that is not a migration version is refused, listing the known ones."""
    with pytest.raises(MigrationError, match=r"target 7 is not a known .* 0001, 0002, 0003"):
        plan_up(M, (), target=7)


def test_changed_applied_file_is_refused_naming_the_file() -> None:
    """An applied migration whose .up.sql changed stops up, down and verify, naming the file."""
    edited = (M[0], make_migration(2, "m2", "CREATE TABLE t2 (x int);", "DROP TABLE t2;"), M[2])
    history = applied(M[0], M[1])
    message = r"migration file 0002_m2.up.sql was changed after it was applied"
    with pytest.raises(MigrationError, match=message):
        plan_up(edited, history)
    with pytest.raises(MigrationError, match=message):
        plan_down(edited, history, to=0)
    with pytest.raises(MigrationError, match=message):
        verify_applied(edited, history)


def test_a_changed_pending_file_is_fine() -> None:
    """Only applied migrations are pinned: editing a pending one is allowed."""
    edited = (M[0], make_migration(2, "m2", "CREATE TABLE t2 (x int);", "DROP TABLE t2;"))
    assert plan_up(edited, applied(M[0])) == (edited[1],)


def test_renamed_applied_file_is_refused() -> None:
    """An applied version whose file now has another name is refused, naming both."""
    renamed = (make_migration(1, "other", M[0].up_sql, M[0].down_sql),)
    with pytest.raises(MigrationError, match=r"applied as 0001_m1 but its file is now 0001_other"):
        plan_up(renamed, applied(M[0]))


def test_migrations_newer_than_every_file_are_left_alone_by_up() -> None:
    """A database migrated by a newer TaskQ (a rolled-back deploy) plans nothing, and
    newer_applied names what the newer TaskQ applied (before, up refused it)."""
    assert plan_up(M[:2], applied(*M)) == ()
    assert plan_up(M[:1], applied(*M), target=1) == ()
    assert [row.version for row in newer_applied(M[:2], applied(*M))] == [3]
    assert newer_applied(M, applied(*M)) == ()
    assert status_problems(M[:2], applied(*M)) == ""


def test_newer_migrations_still_stop_down_and_a_gap_below() -> None:
    """down cannot revert a migration it has no file for; an unknown version below the
    latest file (a removed file) is refused by up too."""
    with pytest.raises(MigrationError, match=r"0003_m3 applied .* newer TaskQ\? Revert it"):
        plan_down(M[:2], applied(*M))
    without_2 = (M[0], M[2])
    with pytest.raises(MigrationError, match=r"0002_m2 applied .* \(was its file removed\?\)"):
        plan_up(without_2, applied(*M))
    assert "0002_m2" in status_problems(without_2, applied(*M))


def test_only_a_down_dropping_a_job_table_counts_as_dropping_jobs() -> None:
    """drops_job_tables reads the down script: a DROP TABLE of jobs, jobs_archive or
    job_attempts (or DROP SCHEMA) counts; other tables and dropped columns do not."""
    for down in (
        "DROP TABLE IF EXISTS {schema}.job_attempts;",
        "drop table {schema}.jobs_archive;",
        "DROP TABLE {schema}.jobs CASCADE;",
        "DROP SCHEMA {schema} CASCADE;",
    ):
        assert make_migration(1, "a", "x", down).drops_job_tables, down
    for down in (
        "DROP TABLE IF EXISTS {schema}.workers;",
        "DROP TABLE IF EXISTS {schema}.jobs_old;",
        "ALTER TABLE {schema}.jobs DROP COLUMN IF EXISTS traceback;",
        "DROP INDEX IF EXISTS {schema}.jobs_dispatch_idx;",
    ):
        assert not make_migration(1, "a", "x", down).drops_job_tables, down
    packaged = [m.label for m in discover_migrations() if m.drops_job_tables]
    assert packaged == ["0001_jobs"]


def test_check_keeps_job_tables_names_the_migration() -> None:
    """A plan reverting a job-table migration is refused naming it and the tables."""
    jobs = make_migration(1, "jobs", "x", "DROP TABLE {schema}.jobs;")
    check_keeps_job_tables(M[1:], "s")
    with pytest.raises(JobTablesWouldBeDropped, match=r"reverting 0001_jobs drops the tables"):
        check_keeps_job_tables((M[2], jobs), "s")


def test_pending_migration_older_than_applied_is_refused() -> None:
    """Migrations apply in version order: a gap below the latest applied one is refused."""
    with pytest.raises(MigrationError, match=r"0002_m2 are pending but 0003 is already applied"):
        plan_up(M, applied(M[0], M[2]))


def test_plan_down_reverts_newest_first_to_the_given_version() -> None:
    """down --to N reverts every applied migration above N, newest first."""
    assert plan_down(M, applied(*M), to=1) == (M[2], M[1])
    assert plan_down(M, applied(*M), to=0) == (M[2], M[1], M[0])
    assert plan_down(M, applied(*M), to=3) == ()


def test_plan_down_without_to_reverts_only_the_latest() -> None:
    """Plain down reverts one migration; on an empty schema it does nothing."""
    assert plan_down(M, applied(*M)) == (M[2],)
    assert plan_down(M, applied(M[0])) == (M[0],)
    assert plan_down(M, ()) == ()


def test_plan_down_refuses_an_unknown_version() -> None:
    """--to must be 0 or a known version."""
    with pytest.raises(MigrationError, match=r"--to 9 is not a known migration version"):
        plan_down(M, applied(*M), to=9)


def test_status_lists_applied_pending_changed_and_unknown() -> None:
    """Status shows every migration's state and when it was applied, and never raises."""
    edited = (M[0], make_migration(2, "m2", "changed", "x"), M[2])
    extra = AppliedMigration(9, "future", "abc", T0)
    rows = migration_status(edited, (*applied(M[0], M[1]), extra))
    assert [(r.label, r.state, r.applied_at) for r in rows] == [
        ("0001_m1", MigrationState.APPLIED, T0),
        ("0002_m2", MigrationState.CHANGED, T0),
        ("0003_m3", MigrationState.PENDING, None),
        ("0009_future", MigrationState.UNKNOWN, T0),
    ]
    problems = status_problems(edited, (*applied(M[0], M[1]), extra))
    assert "0002_m2.up.sql was changed" in problems
    assert "0009_future" not in problems  # newer than every file: no problem (a rollback)
    assert status_problems(M, applied(*M)) == ""


def test_packaged_migrations_are_complete_and_render() -> None:
    """The shipped migrations are numbered 1..N without gaps and render for any schema."""
    shipped = discover_migrations()
    assert [m.version for m in shipped] == list(range(1, len(shipped) + 1))
    assert len(shipped) >= 2  # target/down are exercised on real files
    schema = Schema("taskq_x")
    for m in shipped:
        for sql, file in ((m.up_sql, m.up_file), (m.down_sql, m.down_file)):
            rendered = render_script(sql, schema, source=file)
            code = "\n".join(ln for ln in rendered.splitlines() if not ln.lstrip().startswith("--"))
            assert SCHEMA_TOKEN not in code, file
            assert '"taskq_x".' in code, file


def test_packaged_jobs_migration_checks_every_status() -> None:
    """The jobs status CHECK lists exactly the domain's statuses."""
    up = discover_migrations()[0].up_sql
    check = up.split("jobs_status_check CHECK (status IN (", 1)[1].split("))", 1)[0]
    listed = {s.strip().strip("'") for s in check.replace("\n", " ").split(",")}
    assert listed == {s.value for s in JobStatus}


def test_check_schema_current_refuses_a_schema_behind_and_warns_ahead() -> None:
    """Behind: SchemaNotMigrated naming the versions; ahead: a warning; current: None."""
    available = [make_migration(v, f"m{v}", "SELECT 1", "SELECT 1") for v in (1, 2, 3)]
    with pytest.raises(SchemaNotMigrated, match=r"0002.*0003.*taskq migrate up --schema s"):
        check_schema_current(available, [1, 2], schema="s")
    with pytest.raises(SchemaNotMigrated, match="applied migration is none"):
        check_schema_current(available, [], schema="s")
    assert check_schema_current(available, [1, 2, 3], schema="s") is None
    warning = check_schema_current(available, [1, 2, 3, 4], schema="s")
    assert warning is not None
    assert "0004" in warning
