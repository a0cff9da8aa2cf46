"""Login roles for tests that run TaskQ as a role other than the test's superuser."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg

#: What docs/running-workers.md tells operators to grant the role TaskQ runs as.
DOCUMENTED_GRANTS = (
    "GRANT USAGE ON SCHEMA {schema} TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
)


def as_user(dsn: str, user: str) -> str:
    """``dsn`` logging in as ``user`` (the test server trusts local logins)."""
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


@asynccontextmanager
async def login_role(
    conn: asyncpg.Connection, schema: str, grants: tuple[str, ...]
) -> AsyncIterator[str]:
    """A new login role given ``grants`` on ``schema``; its sessions killed and it dropped after."""
    role = f"taskq_role_{secrets.token_hex(4)}"
    await conn.execute(f"CREATE ROLE {role} LOGIN")
    try:
        for grant in grants:
            await conn.execute(grant.format(schema=schema, role=role))
        yield role
    finally:
        await kill_sessions(conn, role)
        await conn.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


async def kill_sessions(conn: asyncpg.Connection, role: str) -> None:
    await conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role
    )
