"""psycopg pools that TaskQ builds (and therefore owns and closes).

Every TaskQ-built connection is in autocommit (one statement, one round trip;
the store opens transactions explicitly where it needs them), runs with
``jit = off`` (dispatch plans must never depend on JIT; skipped for ``pooled``
connections, since a transaction-mode pooler may refuse startup options), and
prepares statements after ``prepare_threshold`` uses, or never when
``pooled`` (a transaction-mode pooler can send a statement's execution to
another server connection than its preparation). psycopg already returns
jsonb as Python values; the store itself passes and reads JSON as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from taskq.adapters.postgres.dedicated import session_setup
from taskq.adapters.postgres.driver import connect_reason as _reason
from taskq.adapters.postgres.dsn import dsn_location, scrub_password
from taskq.adapters.psycopg.checkout import Pool
from taskq.domain.errors import ConfigurationError, StoreUnavailable

DEFAULT_PREPARE_THRESHOLD: Final = 5
DEFAULT_PREPARED_MAX: Final = 512
#: Seconds to wait for the pool's first connections before reporting the database unreachable.
CONNECT_TIMEOUT: Final = 10.0
APPLICATION_NAME: Final = "taskq"


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolOptions:
    """How TaskQ builds a psycopg pool. ``pooled``: a transaction-mode pooler is in between.

    ``statement_cache_size`` bounds the prepared statements per connection
    (psycopg's ``prepared_max``); ``0`` or ``pooled`` prepares nothing.
    """

    min_size: int = 1
    max_size: int = 10
    statement_cache_size: int = DEFAULT_PREPARED_MAX
    prepare_threshold: int = DEFAULT_PREPARE_THRESHOLD
    pooled: bool = False
    connect_timeout: float = CONNECT_TIMEOUT
    #: Seconds before an idle connection is closed (0: never); TASKQ_POOL_MAX_INACTIVE_LIFETIME.
    max_inactive_lifetime: float = 300.0


def connection_kwargs(dsn: str, options: PoolOptions) -> dict[str, Any]:
    """The ``connect()`` keyword arguments of every pooled connection."""
    no_cache = options.pooled or options.statement_cache_size <= 0
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "prepare_threshold": None if no_cache else options.prepare_threshold,
        # Whatever the DSN, role or database says: jobs hold any Unicode text.
        "client_encoding": "utf8",
    }
    # A keyword would replace what the DSN says, so DSN values are kept.
    given = conninfo_to_dict(dsn)
    if not given.get("application_name"):
        kwargs["application_name"] = APPLICATION_NAME
    if not options.pooled:
        kwargs["options"] = f"{given.get('options') or ''} -c jit=off".strip()
    return kwargs


async def create_pool(dsn: str, options: PoolOptions | None = None) -> Pool:
    """Open a TaskQ-owned pool on ``dsn`` (see the module docstring for its settings).

    Raises ``StoreUnavailable`` naming only host and port when the server
    cannot be reached, ``ConfigurationError`` for a malformed DSN.
    """
    opts = options or PoolOptions()
    where = dsn_location(dsn)
    try:
        kwargs = connection_kwargs(dsn, opts)
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(
            f"invalid Postgres DSN for {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    prepared_max = max(opts.statement_cache_size, 1)
    # One direct attempt first: the pool would retry until its timeout, and an
    # unreachable or misconfigured server should fail at once, with its reason.
    try:
        probe = await psycopg.AsyncConnection.connect(
            dsn, connect_timeout=max(int(opts.connect_timeout), 1), **kwargs
        )
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(
            f"invalid Postgres DSN for {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    except (psycopg.Error, OSError) as exc:
        raise StoreUnavailable(
            f"cannot connect to Postgres at {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    await probe.close()

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        conn.prepared_max = prepared_max
        if not opts.pooled:  # a transaction-mode pooler keeps no session state
            await conn.execute(session_setup(conn.info.server_version))

    pool: Pool = AsyncConnectionPool(
        dsn,
        min_size=opts.min_size,
        max_size=opts.max_size,
        kwargs=kwargs,
        configure=configure,
        # psycopg_pool has no "never": a year is as good (it only shrinks above min_size).
        max_idle=opts.max_inactive_lifetime or 365 * 86400.0,
        open=False,
        name="taskq",
    )
    try:
        await pool.open(wait=True, timeout=opts.connect_timeout)
    except psycopg.ProgrammingError as exc:
        await pool.close()
        raise ConfigurationError(
            f"invalid Postgres DSN for {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    except (psycopg.Error, OSError) as exc:
        await pool.close()
        raise StoreUnavailable(
            f"cannot connect to Postgres at {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    return pool


__all__ = [
    "CONNECT_TIMEOUT",
    "DEFAULT_PREPARED_MAX",
    "DEFAULT_PREPARE_THRESHOLD",
    "PoolOptions",
    "connection_kwargs",
    "create_pool",
]
