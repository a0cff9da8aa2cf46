"""A throwaway Postgres server for the demo (the ``embedded`` extra)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from taskq.adapters.postgres.embedded import EmbeddedPostgres


def embedded_postgres_available() -> bool:
    """Whether the ``embedded`` extra is installed, so a server can start (not started)."""
    from taskq.adapters.postgres.embedded import embedded_postgres_installed

    return embedded_postgres_installed()


@contextlib.contextmanager
def open_embedded_postgres(*, prefix: str = "taskq_pg_") -> Iterator[EmbeddedPostgres]:
    """A temporary Postgres server (the ``embedded`` extra), stopped and deleted on exit.

    Its files live in a new temporary directory named ``<prefix>…``; the
    yielded server's ``dsn`` connects to it as the ``postgres`` superuser.

    Raises ``ConfigurationError`` when the ``embedded-postgres`` package is
    not installed and ``StoreUnavailable`` when the server cannot start.
    """
    from taskq.adapters.postgres.embedded import start_embedded_postgres

    server = start_embedded_postgres(prefix=prefix)
    try:
        yield server
    finally:
        server.stop()
