"""TaskQ's pytest plugin: the ``taskq`` entry point in ``pytest11``.

Installed with TaskQ, it gives every project two options:

- ``--taskq-adapter=MODULE:CALLABLE`` runs the contract suite against that
  harness factory. With no paths on the command line, pytest collects the
  suite shipped with TaskQ instead of the project's own tests (``testpaths``
  included); with paths, it collects what they name.
- ``--taskq-ports=PORT,...`` runs only the tests of those ports, for an
  adapter that implements only some of them (default: all of :data:`PORTS`).

The factory is loaded and its shape checked here, at configure time, so a bad
one is a usage error (exit 4) before anything is collected. ``MODULE`` is
imported from what is installed or, failing that, from the directory pytest
runs in (a console script does not put it on ``sys.path``).

Without ``--taskq-adapter`` it changes nothing: the suite's fixture, markers and
hooks live in the suite's own ``conftest.py``, so they act only where the suite
is collected; and this module imports no TaskQ port, so loading it costs an
unrelated test run next to nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from taskq.testing.factory import (
    SHAPE,
    adapter_id_for,
    load_factory,
    load_problem,
    shape_problem,
)

if TYPE_CHECKING:
    from taskq.testing.harness import HarnessFactory

ADAPTER_OPTION = "--taskq-adapter"
PORTS_OPTION = "--taskq-ports"
#: The ports the suite has tests for; a test names its own with the ``taskq_ports`` marker.
PORTS: tuple[str, ...] = ("queue_store", "leader_lock", "notifier", "rate_limiter")

_HERE = Path(__file__).resolve().parent
#: Where the suite is: inside this package once installed from a wheel (which maps the
#: repository's contracts/ folder there), or the top-level contracts/ of a source
#: checkout that TaskQ is installed from in editable mode.
_SUITE_CANDIDATES = (_HERE / "contracts", _HERE.parents[2] / "contracts")
_FACTORY_KEY = pytest.StashKey["UserAdapter"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("taskq", "TaskQ contract suite")
    group.addoption(
        ADAPTER_OPTION,
        action="store",
        default=None,
        metavar="MODULE:CALLABLE",
        help=(
            "run TaskQ's contract suite against this harness factory (an async context "
            "manager function yielding taskq.testing.Harness); without paths, collects "
            "only the suite"
        ),
    )
    group.addoption(
        PORTS_OPTION,
        action="store",
        default=None,
        metavar="PORT,...",
        help=f"run only the contract tests of these ports ({', '.join(PORTS)}; default all)",
    )


def suite_directory() -> Path:
    """The directory holding the contract suite (its ``conftest.py`` and test files)."""
    for candidate in _SUITE_CANDIDATES:
        if (candidate / "conftest.py").is_file():
            return candidate
    raise pytest.UsageError(
        f"{ADAPTER_OPTION}: the contract suite is not installed with taskq at {_HERE.parent}"
    )


def selected_ports(config: pytest.Config) -> frozenset[str]:
    """The ports ``--taskq-ports`` names (all when it is not given); a UsageError if unknown."""
    raw: str | None = config.getoption(PORTS_OPTION, None)
    if raw is None:
        return frozenset(PORTS)
    names = {name.strip() for name in raw.split(",") if name.strip()}
    unknown = sorted(names - set(PORTS))
    if unknown or not names:
        problem = f"unknown port {', '.join(unknown)}" if unknown else "no port named"
        raise pytest.UsageError(f"{PORTS_OPTION}={raw}: {problem}; ports: {', '.join(PORTS)}")
    return frozenset(names)


def named_ports(config: pytest.Config) -> frozenset[str]:
    """The ports ``--taskq-ports`` names explicitly (none when it is not given): an adapter
    claims to implement these, so a test of one of them must not skip for want of it."""
    if config.getoption(PORTS_OPTION, None) is None:
        return frozenset()
    return selected_ports(config)


@dataclass(frozen=True, slots=True)
class UserAdapter:
    """The factory ``--taskq-adapter`` names, loaded and checked."""

    spec: str
    factory: HarnessFactory

    @property
    def id(self) -> str:
        """Its test id (``my_harness`` → ``my``)."""
        return adapter_id_for(self.spec)


def user_adapter(config: pytest.Config) -> UserAdapter | None:
    """The factory ``--taskq-adapter`` names (None without the option); a UsageError when it
    cannot be imported or has the wrong shape. Loaded once per run."""
    spec: str | None = config.getoption(ADAPTER_OPTION, None)
    if not spec:
        return None
    if _FACTORY_KEY not in config.stash:
        invocation_dir = str(config.invocation_params.dir)
        if invocation_dir not in sys.path:
            sys.path.append(invocation_dir)  # last: never shadows an installed module
        try:
            factory = load_factory(spec)
        except Exception as exc:
            why = load_problem(exc, spec, invocation_dir)
            raise pytest.UsageError(f"{ADAPTER_OPTION}={spec}: {why}") from exc
        problem = shape_problem(factory)
        if problem is not None:
            raise pytest.UsageError(f"{ADAPTER_OPTION}={spec}: {problem}; {SHAPE}")
        config.stash[_FACTORY_KEY] = UserAdapter(spec, factory)
    return config.stash[_FACTORY_KEY]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    selected_ports(config)  # a misspelt port is a usage error before anything is collected
    if user_adapter(config) is None:
        return
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        # No paths given: the suite, not the project's testpaths or working directory.
        config.args = [str(suite_directory())]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # --taskq-ports filters the suite's tests; with none collected (no --taskq-adapter in a
    # project of one's own) it would silently run the project's tests instead.
    if config.getoption(PORTS_OPTION, None) is None:
        return
    suite = suite_directory()
    if not any(item.path.is_relative_to(suite) for item in items):
        raise pytest.UsageError(
            f"{PORTS_OPTION} selects contract tests, and none was collected: "
            f"give {ADAPTER_OPTION}=MODULE:CALLABLE too"
        )


__all__ = [
    "ADAPTER_OPTION",
    "PORTS",
    "PORTS_OPTION",
    "UserAdapter",
    "named_ports",
    "selected_ports",
    "suite_directory",
    "user_adapter",
]
