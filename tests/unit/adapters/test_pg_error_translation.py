"""Which server errors mean "the database cannot serve now": the store raises StoreUnavailable.

Those a worker rides out like an outage (its beats and claims fail and are
tried again) instead of crashing on a driver exception, and an application
can retry: a server out of disk, memory or connections, an I/O error, an
operator's shutdown, and a server that only reads (a standby during a
failover).
"""

from __future__ import annotations

import pytest

from taskq.adapters.postgres.driver import sqlstate_error
from taskq.domain.errors import ConfigurationError, StoreUnavailable, TransactionAborted


@pytest.mark.parametrize(
    "sqlstate",
    [
        "08006",  # connection failure
        "53100",  # disk full
        "53200",  # out of memory
        "53300",  # too many connections
        "57P01",  # admin shutdown
        "57P03",  # cannot connect now (starting up, shutting down)
        "58030",  # I/O error
    ],
)
def test_a_server_that_cannot_serve_now_is_unavailable(sqlstate: str) -> None:
    error = sqlstate_error(sqlstate, "the server's words", None)
    assert type(error) is StoreUnavailable
    assert str(error) == "Postgres is unavailable: the server's words"


def test_a_read_only_server_is_unavailable_for_writes() -> None:
    error = sqlstate_error("25006", "cannot execute INSERT in a read-only transaction", None)
    assert type(error) is StoreUnavailable
    assert str(error) == (
        "Postgres is unavailable for writes: cannot execute INSERT in a read-only transaction "
        "(the transaction or the server is read-only: a READ ONLY transaction, "
        "default_transaction_read_only, or a standby; TaskQ needs the primary and a "
        "read-write transaction)"
    )


def test_a_statement_in_an_aborted_transaction_says_to_roll_it_back() -> None:
    """A caller's transaction that an earlier error aborted (connection=): not an outage."""
    error = sqlstate_error("25P02", "current transaction is aborted", None)
    assert type(error) is TransactionAborted
    assert "had already failed (current transaction is aborted)" in str(error)
    assert "roll it back" in str(error)


@pytest.mark.parametrize("sqlstate", ["25001", "42601", "XX000", None])
def test_other_states_are_not_outages(sqlstate: str | None) -> None:
    """The caller's transaction state, a syntax error, an internal error: not retried as
    outages."""
    assert sqlstate_error(sqlstate, "words", None) is None


def test_a_missing_privilege_is_a_configuration_error_naming_the_grants() -> None:
    error = sqlstate_error("42501", "permission denied for table jobs", None)
    assert type(error) is ConfigurationError
    assert str(error).startswith(
        "the database role TaskQ connects as lacks a privilege it needs "
        "(permission denied for table jobs): grant it USAGE on the TaskQ schema, SELECT, "
        "INSERT, UPDATE and DELETE on the schema's tables and USAGE on its sequences"
    )


@pytest.mark.parametrize("sqlstate", ["22P02", "23514", "54000"])
def test_a_value_the_server_cannot_keep_is_a_value_error(sqlstate: str) -> None:
    """Class 54 too: a jsonb document over 255 MB is the value's fault, not an outage."""
    error = sqlstate_error(sqlstate, "total size of jsonb array elements exceeds the maximum", None)
    assert type(error) is ValueError
    assert str(error).startswith("Postgres cannot store a value: total size of jsonb")


def test_scrub_password_hides_a_dsn_password_as_written_and_decoded() -> None:
    """Drivers quote the bad part of a DSN in their errors; the password never survives."""
    from taskq.adapters.postgres.dsn import scrub_password

    dsn = "postgresql://u:s3cret%ZZpw@h:5432/db"
    assert scrub_password('invalid percent-encoded token: "s3cret%ZZpw"', dsn) == (
        'invalid percent-encoded token: "***"'
    )
    assert scrub_password("p=s3cr t", "host=h password='s3cr t'") == "p=***"
    assert scrub_password("x%40y", "postgresql://u:x%2540y@h/db") == "***"
    # A password equal to the user or database name is no secret the message keeps:
    # blanking it would turn 'role "taskq"' and '"taskq".jobs' into '***'.
    default = "postgresql://taskq:taskq@localhost:5432/taskq"
    assert scrub_password('role "taskq" does not exist', default) == 'role "taskq" does not exist'
    assert scrub_password('role "app"', "user=app password=app dbname=db") == 'role "app"'


@pytest.mark.parametrize("sqlstate", ["26000", "42P05"])
def test_prepared_statements_broken_by_a_pooler_name_the_settings(sqlstate: str) -> None:
    """asyncpg's 'prepared statement __asyncpg_stmt_4__ does not exist' and psycopg's
    '_pg3_0 already exists' behind PgBouncer leaked as raw driver errors."""
    error = sqlstate_error(sqlstate, 'prepared statement "_pg3_0" already exists', None)
    assert type(error) is ConfigurationError
    for words in ("TASKQ_PG_IS_POOLED", "statement_cache_size=0", "prepare_threshold=None"):
        assert words in str(error)
