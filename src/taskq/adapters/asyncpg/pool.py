"""asyncpg pools that TaskQ builds (and therefore owns and closes).

Every TaskQ-built connection:
- runs with ``jit = off`` (dispatch plans must never depend on JIT; skipped
  for ``pooled`` connections, since a transaction-mode pooler may refuse
  unknown startup parameters);
- has a jsonb codec (``json.dumps``/``json.loads``) for whoever shares the
  pool; the store itself passes and reads JSON as text and needs none;
- caches prepared statements with the given ``statement_cache_size``, or not
  at all when ``pooled`` (a transaction-mode pooler can send a statement's
  Bind to another server connection than its Parse).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

import asyncpg

from taskq.adapters.asyncpg.driver import Connection, Pool
from taskq.adapters.postgres.dedicated import session_setup
from taskq.adapters.postgres.driver import connect_reason as _reason
from taskq.adapters.postgres.dsn import dsn_location, scrub_password
from taskq.domain.errors import ConfigurationError, StoreUnavailable

DEFAULT_STATEMENT_CACHE_SIZE: Final = 512
DEFAULT_MAX_CACHED_STATEMENT_LIFETIME: Final = 3600
#: Seconds to wait for a connection before reporting the database unreachable.
CONNECT_TIMEOUT: Final = 10.0
APPLICATION_NAME: Final = "taskq"


async def register_jsonb_codec(conn: Connection) -> None:
    """Decode and encode jsonb as Python values on ``conn`` (the pool's ``init``)."""
    await conn.set_type_codec(
        "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog", format="text"
    )


async def _init_session(conn: Connection) -> None:
    """A direct connection's ``init``: the jsonb codec and TaskQ's session setup
    (``postgres.dedicated.session_setup``)."""
    await register_jsonb_codec(conn)
    await conn.execute(session_setup(server_version_num(conn)))


def server_version_num(conn: Connection) -> int:
    """The server's version as server_version_num counts it (15.4 is 150004)."""
    version = conn.get_server_version()
    return version.major * 10000 + version.minor


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolOptions:
    """How TaskQ builds an asyncpg pool. ``pooled``: a transaction-mode pooler is in between."""

    min_size: int = 1
    max_size: int = 10
    statement_cache_size: int = DEFAULT_STATEMENT_CACHE_SIZE
    max_cached_statement_lifetime: int = DEFAULT_MAX_CACHED_STATEMENT_LIFETIME
    pooled: bool = False
    command_timeout: float | None = None
    connect_timeout: float = CONNECT_TIMEOUT
    #: Seconds before an idle connection is closed (0: never); TASKQ_POOL_MAX_INACTIVE_LIFETIME.
    max_inactive_lifetime: float = 300.0


async def _keep_session(conn: object) -> None:
    """Pool reset hook: nothing beyond asyncpg's own rollback of an open transaction.

    The default reset sends ``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
    RESET ALL`` after every use, a round trip on every query's latency path.
    TaskQ keeps no session state on pool connections (lock timeouts are
    transaction-local; the leader lock and LISTEN have dedicated connections),
    so there is nothing to reset.
    """


async def create_pool(dsn: str, options: PoolOptions | None = None) -> Pool:
    """Open a TaskQ-owned pool on ``dsn`` (see the module docstring for its settings).

    Raises ``StoreUnavailable`` naming only host and port when the server
    cannot be reached, ``ConfigurationError`` for a malformed DSN.
    """
    opts = options or PoolOptions()
    server_settings: dict[str, str] = {}
    if "application_name" not in dsn:  # the DSN's own name wins
        server_settings["application_name"] = APPLICATION_NAME
    if not opts.pooled:
        server_settings["jit"] = "off"
    where = dsn_location(dsn)
    try:
        pool: Pool = await asyncpg.create_pool(
            dsn,
            min_size=opts.min_size,
            max_size=opts.max_size,
            statement_cache_size=0 if opts.pooled else opts.statement_cache_size,
            max_cached_statement_lifetime=(
                0 if opts.pooled else opts.max_cached_statement_lifetime
            ),
            command_timeout=opts.command_timeout,
            max_inactive_connection_lifetime=opts.max_inactive_lifetime,  # 0 never closes
            timeout=opts.connect_timeout,
            server_settings=server_settings,
            init=register_jsonb_codec if opts.pooled else _init_session,
            reset=_keep_session,
        )
    except asyncpg.exceptions.ClientConfigurationError as exc:
        raise ConfigurationError(
            f"invalid Postgres DSN for {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreUnavailable(
            f"cannot connect to Postgres at {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    except ValueError as exc:  # asyncpg's DSN parser
        raise ConfigurationError(
            f"invalid Postgres DSN for {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    return pool


__all__ = [
    "CONNECT_TIMEOUT",
    "DEFAULT_MAX_CACHED_STATEMENT_LIFETIME",
    "DEFAULT_STATEMENT_CACHE_SIZE",
    "PoolOptions",
    "create_pool",
    "register_jsonb_codec",
    "server_version_num",
]
