"""Resolving and checking a harness factory named ``MODULE:CALLABLE``.

A factory is what an adapter hands the contract suite (see
:mod:`taskq.testing.harness`). Its shape is checked without calling it, so a
wrong kind of function is refused once, before any test runs, instead of
failing every test alike.
"""

from __future__ import annotations

import importlib
import inspect
import traceback
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from taskq.testing.harness import HarnessFactory

SHAPE = (
    "a harness factory is a function taking no arguments that returns an async context "
    "manager yielding taskq.testing.Harness (an async def decorated with "
    "@contextlib.asynccontextmanager)"
)


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


def adapter_id_for(spec: str) -> str:
    """The test id of a user factory: its callable name without a ``_harness`` suffix."""
    name = spec.rpartition(":")[2].rpartition(".")[2]
    return name.removesuffix("_harness") or name


def describe(exc: BaseException) -> str:
    """``ExceptionType: message``, as the suite reports a factory that failed to load."""
    return f"{type(exc).__name__}: {exc}"


def load_problem(exc: BaseException, spec: str, search_dir: str) -> str:
    """Why ``spec`` failed to load, with where to look: the directories searched when its
    module does not exist, else the line that raised (a usage error shows no traceback)."""
    module = spec.partition(":")[0]
    if (
        isinstance(exc, ModuleNotFoundError)
        and exc.name
        and (module + ".").startswith(exc.name + ".")
    ):
        return (
            f"{describe(exc)} (not among the installed packages, nor under {search_dir}, "
            "the directory pytest runs in: install it, or add its directory to pytest's "
            "pythonpath setting)"
        )
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<") and frame.filename != __file__
    ]
    if frames:
        return f"{describe(exc)} (raised at {frames[-1].filename}:{frames[-1].lineno})"
    return describe(exc)


__all__ = ["SHAPE", "adapter_id_for", "describe", "load_factory", "load_problem", "shape_problem"]
