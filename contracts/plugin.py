"""The suite's pytest hooks: which adapters run which tests, and the ``harness`` fixture.

``conftest.py`` beside this file exposes them, so they act only on the suite's
own tests, wherever it is collected: ``pytest contracts`` or a bare ``pytest``
in the repository, or the copy installed as ``taskq.testing.contracts`` that
``pytest --taskq-adapter=...`` collects in any project. The options themselves
belong to :mod:`taskq.testing.plugin`, the entry point pytest loads first.

Each test runs once per adapter (ids such as ``test_x[memory]``). With
``--taskq-adapter`` only that factory runs. Without it the built-in adapters
run: memory always (a broken memory factory makes every ``[memory]`` test
error, loudly), asyncpg and psycopg when their factory module imports, redis
for the rate-limiter tests only.

Every test belongs to the ports its ``taskq_ports`` marker names (unmarked:
``queue_store``). It runs against each adapter implementing all of them, and
only when ``--taskq-ports`` selects them all; otherwise it is deselected.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
import pytest_asyncio

from taskq.testing.factory import SHAPE, describe, load_factory
from taskq.testing.harness import Harness, HarnessFactory
from taskq.testing.plugin import PORTS, selected_ports, user_adapter

MARKER = "taskq_requires"
PORTS_MARKER = "taskq_ports"
ALL_PORTS = frozenset(PORTS)
#: The port of a test without a ``taskq_ports`` marker.
DEFAULT_PORTS = frozenset({"queue_store"})

#: (test id, factory module in this package, factory attribute, ports) of the adapters
#: shipped with TaskQ. Redis backs only the RateLimiter port.
BUILTIN_ADAPTERS: tuple[tuple[str, str, str, frozenset[str]], ...] = (
    ("memory", "factories.memory", "memory_harness", ALL_PORTS),
    ("asyncpg", "factories.asyncpg", "asyncpg_harness", ALL_PORTS),
    ("psycopg", "factories.psycopg", "psycopg_harness", ALL_PORTS),
    ("redis", "factories.redis", "redis_harness", frozenset({"rate_limiter"})),
)
#: Built-in adapters whose factory module may be absent (its driver is not installed).
_OPTIONAL_BUILTINS = frozenset({"asyncpg", "psycopg"})
_PACKAGE = __name__.rpartition(".")[0]  # "contracts", or "taskq.testing.contracts" installed
_SUITE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True, slots=True)
class Adapter:
    """An adapter the suite runs against; ``factory`` is None when it failed to load."""

    id: str
    spec: str
    factory: HarnessFactory | None
    ports: frozenset[str] = ALL_PORTS
    problem: str | None = None


_ADAPTERS_KEY = pytest.StashKey[list[Adapter]]()
_SKIPPED_KEY = pytest.StashKey[list[Adapter]]()
_PORTS_KEY = pytest.StashKey[frozenset[str]]()
_COUNTS_KEY = pytest.StashKey[dict[str, int]]()
_DESELECTED_KEY = pytest.StashKey[int]()


def _not_a_factory(adapter: Adapter, problem: str) -> NoReturn:
    """Stop the whole run once: every test would fail the same way."""
    pytest.exit(f"{adapter.spec} is not a harness factory: {problem}; {SHAPE}", returncode=4)


def _is_absent(exc: BaseException, module: str) -> bool:
    """Whether ``exc`` says the factory module itself (or its package) does not exist."""
    if not isinstance(exc, ModuleNotFoundError) or exc.name is None:
        return False
    return module == exc.name or module.startswith(exc.name + ".")


def _builtin_adapters() -> tuple[list[Adapter], list[Adapter]]:
    """The built-in adapters to run, and the optional ones whose module is absent."""
    adapters: list[Adapter] = []
    skipped: list[Adapter] = []
    for adapter_id, module_in_suite, attr, ports in BUILTIN_ADAPTERS:
        module = f"{_PACKAGE}.{module_in_suite}"
        spec = f"{module}:{attr}"
        try:
            adapters.append(Adapter(adapter_id, spec, load_factory(spec), ports))
        except Exception as exc:
            failed = Adapter(adapter_id, spec, None, ports, describe(exc))
            # An absent optional factory is normal; a broken one, or a missing required
            # factory, stays in so every one of its tests reports the problem.
            absent = _is_absent(exc, module) and adapter_id in _OPTIONAL_BUILTINS
            (skipped if absent else adapters).append(failed)
    return adapters, skipped


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*capabilities): skip the contract test, with a reason, when the adapter "
        "under test does not declare every one of these capabilities",
    )
    config.addinivalue_line(
        "markers",
        f"{PORTS_MARKER}(*ports): the ports the contract test exercises (default "
        "queue_store); it runs only against adapters implementing all of them",
    )
    user = user_adapter(config)
    if user is not None:
        adapters = [Adapter(user.id, user.spec, user.factory)]
        skipped: list[Adapter] = []
    else:
        adapters, skipped = _builtin_adapters()
    config.stash[_ADAPTERS_KEY] = adapters
    config.stash[_SKIPPED_KEY] = skipped
    config.stash[_PORTS_KEY] = selected_ports(config)


def ports_of(node: pytest.Item) -> frozenset[str]:
    """The ports a test exercises: its ``taskq_ports`` markers' union, or queue_store."""
    ports: set[str] = set()
    for mark in node.iter_markers(PORTS_MARKER):
        ports.update(str(p) for p in mark.args)
    return frozenset(ports) or DEFAULT_PORTS


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "harness" not in metafunc.fixturenames:
        return
    stash = metafunc.config.stash
    ports = ports_of(metafunc.definition)
    if not ports <= stash[_PORTS_KEY]:
        return  # left unparametrized: deselected (pytest_collection_modifyitems)
    adapters = [a for a in stash[_ADAPTERS_KEY] if ports <= a.ports]
    if adapters:
        metafunc.parametrize("harness", [pytest.param(a, id=a.id) for a in adapters], indirect=True)


def _required_capabilities(node: pytest.Item) -> frozenset[str]:
    caps: set[str] = set()
    for mark in node.iter_markers(MARKER):
        caps.update(str(c) for c in mark.args)
    return frozenset(caps)


def harness_capabilities(h: Harness) -> frozenset[str]:
    """What the adapter declares, on the harness and on its store."""
    return frozenset(h.capabilities) | frozenset(h.store.capabilities)


def _in_suite(path: Path) -> bool:
    return path.resolve().parent == _SUITE_DIR


def pytest_collectstart(collector: pytest.Collector) -> None:
    # Run the suite's async tests under pytest-asyncio whatever asyncio_mode the
    # adapter author's project configures (strict mode needs the marker).
    if isinstance(collector, pytest.Module) and _in_suite(collector.path):
        collector.add_marker(pytest.mark.asyncio)


@pytest_asyncio.fixture
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """A fresh harness of the adapter this test instance runs against."""
    adapter: Adapter = request.param
    if adapter.factory is None:
        pytest.fail(f"{adapter.id} harness factory {adapter.spec} failed: {adapter.problem}")
    required = _required_capabilities(request.node)
    manager: object = adapter.factory()  # what a malformed factory returns is checked here
    if not (hasattr(manager, "__aenter__") and hasattr(manager, "__aexit__")):
        if inspect.iscoroutine(manager):
            manager.close()  # never awaited: no "coroutine was never awaited" warning
        _not_a_factory(adapter, f"it returned {type(manager).__name__}")
    async with manager as h:
        if not isinstance(h, Harness):
            _not_a_factory(adapter, f"its context manager yielded {type(h).__name__}")
        missing = sorted(required - harness_capabilities(h))
        if missing:
            pytest.skip(f"adapter {h.name!r} lacks capability {', '.join(missing)}")
        yield h


def _adapter_of(item: pytest.Item) -> Adapter | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None or "harness" not in callspec.params:
        return None
    adapter: Adapter = callspec.params["harness"]
    return adapter


def _count_by_adapter(items: Iterable[pytest.Item]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        adapter = _adapter_of(item)
        if adapter is not None:
            counts[adapter.id] = counts.get(adapter.id, 0) + 1
    return counts


def _unselected(item: pytest.Item) -> bool:
    """A suite test no adapter runs: its ports are not selected or not implemented."""
    needs_harness = "harness" in getattr(item, "fixturenames", ())
    return needs_harness and _in_suite(item.path) and _adapter_of(item) is None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unselected = [item for item in items if _unselected(item)]
    if unselected:
        items[:] = [item for item in items if not _unselected(item)]
        config.hook.pytest_deselected(items=unselected)
    config.stash[_DESELECTED_KEY] = len(unselected)


def pytest_collection_finish(session: pytest.Session) -> None:
    # Counted once every deselection (ports, -k, -m) is done, so the last line says what runs.
    session.config.stash[_COUNTS_KEY] = _count_by_adapter(session.items)


def _tests(count: int) -> str:
    return f"{count} test" if count == 1 else f"{count} tests"


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    counts = config.stash.get(_COUNTS_KEY, {})
    deselected = config.stash.get(_DESELECTED_KEY, 0)
    if not counts and not deselected and not config.stash.get(_SKIPPED_KEY, []):
        return
    parts = [f"{a.id}: {_tests(counts.get(a.id, 0))}" for a in config.stash[_ADAPTERS_KEY]]
    parts += [f"{a.id}: not collected ({a.problem})" for a in config.stash[_SKIPPED_KEY]]
    if deselected:
        ports = ",".join(p for p in PORTS if p in config.stash[_PORTS_KEY])
        parts.append(f"{_tests(deselected)} deselected (they need ports beyond {ports})")
    terminalreporter.write_line("taskq contract suite — " + "; ".join(parts))
