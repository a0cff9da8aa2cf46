"""Pytest plugin that runs the contract suite once per adapter.

It adds ``--taskq-adapter=MODULE:CALLABLE``, the ``harness`` fixture (one
fresh :class:`~contracts.harness.Harness` per test, parametrized over the
adapters with ids such as ``test_x[memory]``) and the ``taskq_requires``
marker. ``contracts/conftest.py`` loads it, so ``pytest contracts`` and a bare
``pytest`` from the repo root both see it; outside this checkout use
``-p contracts.plugin``.

Without the option the built-in adapters run: memory always (a broken memory
factory makes every ``[memory]`` test error, loudly), asyncpg and psycopg only
when their factory module imports. With the option, only the named factory
runs.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
import pytest_asyncio

from contracts.harness import Harness, HarnessFactory

OPTION = "--taskq-adapter"
MARKER = "taskq_requires"

#: (test id, factory module, factory attribute) of the adapters shipped with TaskQ.
BUILTIN_ADAPTERS: tuple[tuple[str, str, str], ...] = (
    ("memory", "contracts.factories.memory", "memory_harness"),
    ("asyncpg", "contracts.factories.asyncpg", "asyncpg_harness"),
    ("psycopg", "contracts.factories.psycopg", "psycopg_harness"),
)
_REQUIRED_BUILTIN = "memory"

#: Adapters that implement only the RateLimiter port: they run only the tests that use
#: the ``limiters`` fixture (contracts/test_rate_limiter.py).
RATE_LIMITER_ADAPTERS: tuple[tuple[str, str, str], ...] = (
    ("redis", "contracts.factories.redis", "redis_harness"),
)
_RATE_LIMITER_FIXTURE = "limiters"
_SUITE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True, slots=True)
class Adapter:
    """An adapter the suite runs against; ``factory`` is None when it failed to load."""

    id: str
    spec: str
    factory: HarnessFactory | None
    problem: str | None = None


_ADAPTERS_KEY = pytest.StashKey[list[Adapter]]()
_SKIPPED_KEY = pytest.StashKey[list[Adapter]]()
_COUNTS_KEY = pytest.StashKey[dict[str, int]]()
_RATE_LIMITER_ADAPTERS_KEY = pytest.StashKey[list[Adapter]]()


def load_factory(spec: str) -> HarnessFactory:
    """Resolve ``"package.module:callable"`` (the attribute may be dotted)."""
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"{spec!r} is not MODULE:CALLABLE")
    obj: object = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec!r} is not callable")
    factory: HarnessFactory = obj
    return factory


SHAPE = (
    "a harness factory is a function taking no arguments that returns an async context "
    "manager yielding contracts.harness.Harness (an async def decorated with "
    "@contextlib.asynccontextmanager)"
)


def shape_problem(factory: object) -> str | None:
    """What is wrong with the factory's shape, seen without calling it; None if nothing."""
    try:
        params = inspect.signature(factory).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        params = None
    required = [
        p.name
        for p in params or ()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if required:
        return f"it needs arguments ({', '.join(required)})"
    wrapped = getattr(factory, "__wrapped__", None)
    if inspect.iscoroutinefunction(factory):
        return "it is a plain async def (a call gives a coroutine, not a context manager)"
    if inspect.isasyncgenfunction(factory):
        return "it is an async generator function without @contextlib.asynccontextmanager"
    if inspect.isgeneratorfunction(factory) or inspect.isgeneratorfunction(wrapped):
        return "it is a sync generator or @contextlib.contextmanager, not an async one"
    return None


def _not_a_factory(adapter: Adapter, problem: str) -> NoReturn:
    """Stop the whole run once: every test would fail the same way."""
    pytest.exit(f"{adapter.spec} is not a harness factory: {problem}; {SHAPE}", returncode=4)


def adapter_id_for(spec: str) -> str:
    """The test id of a user factory: its callable name without a ``_harness`` suffix."""
    name = spec.rpartition(":")[2].rpartition(".")[2]
    return name.removesuffix("_harness") or name


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _is_absent(exc: BaseException, module: str) -> bool:
    """Whether ``exc`` says the factory module itself (or its package) does not exist."""
    if not isinstance(exc, ModuleNotFoundError) or exc.name is None:
        return False
    return module == exc.name or module.startswith(exc.name + ".")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("taskq", "TaskQ contract suite")
    group.addoption(
        OPTION,
        action="store",
        default=None,
        metavar="MODULE:CALLABLE",
        help=(
            "run the contract suite only against this harness factory (an async context "
            "manager function yielding contracts.harness.Harness)"
        ),
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*capabilities): skip the contract test, with a reason, when the adapter "
        "under test does not declare every one of these capabilities",
    )
    adapters: list[Adapter] = []
    skipped: list[Adapter] = []
    user_spec: str | None = config.getoption(OPTION)
    if user_spec:
        try:
            factory = load_factory(user_spec)
        except Exception as exc:
            raise pytest.UsageError(f"{OPTION}={user_spec}: {_describe(exc)}") from exc
        problem = shape_problem(factory)
        if problem is not None:
            raise pytest.UsageError(f"{OPTION}={user_spec}: {problem}; {SHAPE}")
        adapters.append(Adapter(adapter_id_for(user_spec), user_spec, factory))
    else:
        for adapter_id, module, attr in BUILTIN_ADAPTERS:
            spec = f"{module}:{attr}"
            try:
                adapters.append(Adapter(adapter_id, spec, load_factory(spec)))
            except Exception as exc:
                failed = Adapter(adapter_id, spec, None, _describe(exc))
                # An absent optional factory is normal; a broken one, or a missing memory
                # factory, stays in so every one of its tests reports the problem.
                absent = _is_absent(exc, module) and adapter_id != _REQUIRED_BUILTIN
                (skipped if absent else adapters).append(failed)
    rate_limiters: list[Adapter] = []
    if not user_spec:
        for adapter_id, module, attr in RATE_LIMITER_ADAPTERS:
            spec = f"{module}:{attr}"
            try:
                rate_limiters.append(Adapter(adapter_id, spec, load_factory(spec)))
            except Exception as exc:
                rate_limiters.append(Adapter(adapter_id, spec, None, _describe(exc)))
    config.stash[_ADAPTERS_KEY] = adapters
    config.stash[_RATE_LIMITER_ADAPTERS_KEY] = rate_limiters
    config.stash[_SKIPPED_KEY] = skipped


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "harness" not in metafunc.fixturenames:
        return
    stash = metafunc.config.stash
    base: list[Adapter] = stash[_ADAPTERS_KEY]
    adapters = list(base)
    if _RATE_LIMITER_FIXTURE in metafunc.fixturenames:
        extra: list[Adapter] = stash[_RATE_LIMITER_ADAPTERS_KEY]
        adapters.extend(extra)
    metafunc.parametrize(
        "harness",
        [pytest.param(a, id=a.id) for a in adapters],
        indirect=True,
    )


def _required_capabilities(node: pytest.Item) -> frozenset[str]:
    caps: set[str] = set()
    for mark in node.iter_markers(MARKER):
        caps.update(str(c) for c in mark.args)
    return frozenset(caps)


def harness_capabilities(h: Harness) -> frozenset[str]:
    """What the adapter declares, on the harness and on its store."""
    return frozenset(h.capabilities) | frozenset(h.store.capabilities)


def pytest_collectstart(collector: pytest.Collector) -> None:
    # Run the suite's async tests under pytest-asyncio whatever asyncio_mode the
    # adapter author's project configures (strict mode needs the marker).
    if isinstance(collector, pytest.Module) and collector.path.resolve().parent == _SUITE_DIR:
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


def _count_by_adapter(items: Iterable[pytest.Item]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or "harness" not in callspec.params:
            continue
        adapter: Adapter = callspec.params["harness"]
        counts[adapter.id] = counts.get(adapter.id, 0) + 1
    return counts


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[_COUNTS_KEY] = _count_by_adapter(items)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    counts = config.stash.get(_COUNTS_KEY, {})
    if not counts and not config.stash.get(_SKIPPED_KEY, []):
        return
    shown = config.stash[_ADAPTERS_KEY] + config.stash.get(_RATE_LIMITER_ADAPTERS_KEY, [])
    parts = [f"{a.id}: {counts.get(a.id, 0)} tests" for a in shown]
    parts += [f"{a.id}: not collected ({a.problem})" for a in config.stash[_SKIPPED_KEY]]
    terminalreporter.write_line("taskq contract suite — " + "; ".join(parts))
